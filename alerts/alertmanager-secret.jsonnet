// deploy/alertmanager/alertmanager.yml as the Secret prometheus-operator's Alertmanager reads
// (spec.configSecret: alertmanager-vigil), so the routing has one source.
{
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name: 'alertmanager-vigil',
    labels: { 'app.kubernetes.io/part-of': 'vigil', 'app.kubernetes.io/component': 'alerting' },
  },
  type: 'Opaque',
  stringData: { 'alertmanager.yaml': importstr '../deploy/alertmanager/alertmanager.yml' },
}
