// The same rules as a prometheus-operator PrometheusRule (deploy/kubernetes/base/prometheusrule.yaml,
// and an overlay's with its `overrides` of the mixin's _config, e.g. its runbook URL pattern).
function(overrides={}) {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: {
    name: 'vigil',
    labels: { 'app.kubernetes.io/part-of': 'vigil', 'app.kubernetes.io/component': 'alerting' },
  },
  spec: (import 'rules.jsonnet')(overrides),
}
