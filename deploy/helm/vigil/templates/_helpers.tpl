{{/* Names, labels and the monitor object shared by the chart's templates. */}}

{{/* Labels on every object: the kustomize base's plus Helm's release labels. */}}
{{- define "vigil.labels" -}}
app.kubernetes.io/part-of: vigil
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* image: repository:tag, the tag defaulting to the chart's appVersion. Argument: the component's values. */}}
{{- define "vigil.image" -}}
{{ .ctx.image.repository }}:{{ .ctx.image.tag | default .root.Chart.AppVersion }}
{{- end }}

{{/* The port number at the end of an "address:port" string. */}}
{{- define "vigil.port" -}}
{{- regexFind "[0-9]+$" . -}}
{{- end }}

{{/*
A PodMonitor or ServiceMonitor for one component. Arguments: root, name, namespace, job, port
(the endpoint's port name), values (the component's monitor values), relabelings (those the rules
need, before the user's).
*/}}
{{- define "vigil.monitor" -}}
{{- $m := .values -}}
{{- if not (has $m.kind (list "PodMonitor" "ServiceMonitor")) }}
{{- fail (printf "%s: monitor.kind must be PodMonitor or ServiceMonitor, not %s" .name $m.kind) }}
{{- end }}
apiVersion: monitoring.coreos.com/v1
kind: {{ $m.kind }}
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    {{- include "vigil.labels" .root | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: {{ .name }}}
  {{- if $m.sampleLimit }}
  sampleLimit: {{ $m.sampleLimit }}
  {{- end }}
  {{ if eq $m.kind "PodMonitor" }}podMetricsEndpoints{{ else }}endpoints{{ end }}:
    - port: {{ .port }}
      path: /metrics
      interval: {{ $m.interval }}
      {{- with $m.endpoint }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
      relabelings:
        {{- toYaml (concat .relabelings $m.relabelings) | nindent 8 }}
{{- end }}
