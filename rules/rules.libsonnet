// Vigil's recording rules: the mixin's prometheusRules (mixin.libsonnet), reading its _config
// (config.libsonnet).
{
  local c = $._config,

  // TTFT error ratio: requests whose first token came later than the SLO, over all requests.
  local ttftErrors(window) = |||
    1 - (
      sum by (cluster, namespace, job) (rate(vigil_worker_time_to_first_token_seconds_bucket{%(sel)s, le="%(le)s"}[%(w)s]))
    /
      sum by (cluster, namespace, job) (rate(vigil_worker_time_to_first_token_seconds_count{%(sel)s}[%(w)s]))
    )
  ||| % { sel: c.workerSelector, le: c.ttftSloSeconds, w: window },

  prometheusRules+:: {
    groups+: [
      {
        // The SLO burn alerts of alerts/alerts.libsonnet complete this group (see ruleGroups in
        // mixin.libsonnet); the fleet dashboard reads the 5m ratio.
        name: 'vigil-worker-slo',
        rules: [
          { record: 'vigil_worker:ttft_slo_errors:ratio_rate' + w, expr: ttftErrors(w) }
          for w in ['5m', '30m', '1h', '6h']
        ],
      },
    ],
  },
}
