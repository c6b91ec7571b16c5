// Vigil's monitoring mixin, laid out as node-mixin and kubernetes-mixin are: one _config
// (config.libsonnet) read by the alerts (prometheusAlerts, alerts/alerts.libsonnet), the recording
// rules (prometheusRules, rules/rules.libsonnet) and the Grafana dashboards (grafanaDashboards,
// keyed by file name, dashboards/dashboards.libsonnet). A deployment overrides the config with
// `(import 'mixin.libsonnet') + { _config+:: { ... } }`; alerts/*.jsonnet and
// dashboards/dashboards.jsonnet render it.
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'dashboards/dashboards.libsonnet') +
{
  // The rule groups to load: each group of prometheusAlerts after the records of its namesake in
  // prometheusRules, then the other record groups. The SLO burn alerts read records: Prometheus
  // evaluates one group's rules in order at one timestamp but groups independently, so in
  // another group they would read records one interval old or not yet written. Load these, not
  // the two lists concatenated (Prometheus refuses a group name twice in a file).
  ruleGroups::
    local records = { [g.name]: g.rules for g in $.prometheusRules.groups };
    local alerting = std.set([g.name for g in $.prometheusAlerts.groups]);
    [g { rules: std.get(records, g.name, []) + super.rules } for g in $.prometheusAlerts.groups] +
    [g for g in $.prometheusRules.groups if !std.setMember(g.name, alerting)],
}
