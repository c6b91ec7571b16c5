// The dashboards as one ConfigMap labelled for Grafana's dashboard sidecar
// (deploy/kubernetes/base/dashboards-configmap.yaml).
local dashboards = import 'dashboards.libsonnet';
std.manifestYamlDoc({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'vigil-dashboards',
    labels: { grafana_dashboard: '1', 'app.kubernetes.io/part-of': 'vigil' },
    annotations: { grafana_folder: 'Vigil' },
  },
  data: { [name]: std.manifestJsonEx(dashboards[name], '  ') for name in std.objectFields(dashboards) },
}, quote_keys=false)
