// Vigil's recording rules: the mixin's prometheusRules (mixin.libsonnet), reading its _config
// (config.libsonnet).
local failuresIn = import 'failures.libsonnet';

{
  local c = $._config,
  local by(labels) = 'by (%s)' % std.join(', ', labels),

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
      {
        // Cross-node NCCL/TCP correlation (docs/correlation.md). A rank that only waits for its
        // peer's data times out with its own sockets quiet: its agent counts the timeout as
        // uncorrelated, while the backoff is at the sender's end, on the peer's node.
        // tcp_peer_stall_seconds (per stalled connection end) and nccl_tcp_collective_peers (the
        // address pairs a collective process holds) join the two through the addresses.
        // The alert VigilNcclTcpCrossNodeCorrelatedTimeouts completes this group.
        name: 'vigil-nccl-tcp-cross-node',
        rules: [
          {
            // Each stalled end as its other end sees it: local_address and peer swapped, the
            // stalled node as peer_node. Loopback is on every node, so it would match
            // everywhere.
            record: 'vigil:tcp_peer_stall_seconds:remote_view',
            expr: |||
              max by (cluster, local_address, peer, peer_node) (
                label_replace(
                  label_replace(
                    label_replace(
                      label_replace(tcp_peer_stall_seconds{%s, peer!~"127[.].*|::1"}, "vigil_swap", "$1", "local_address", "(.*)"),
                      "local_address", "$1", "peer", "(.*)"),
                    "peer", "$1", "vigil_swap", "(.*)"),
                  "peer_node", "$1", "node", "(.*)")
              )
            ||| % c.agentSelector,
          },
          {
            // Uncorrelated failures of a process in the window that held a connection whose other
            // end stalled in the window, with the node of the longest such stall. topk(1): an
            // address pair stalled on two nodes (addresses reused, e.g. a bridge network per
            // node) or a process with stalled peers on two nodes would make the joins
            // many-to-many, and the rule would fail for the whole fleet.
            record: 'vigil:nccl_tcp_cross_node_correlated_timeouts:increase' + c.correlatedTimeoutWindow,
            expr: |||
              (sum %(P)s %(failures)s > 0)
              * on (cluster, instance, pid) group_left (peer_node)
              group by (cluster, instance, pid, peer_node) (
                topk by (cluster, instance, pid) (1,
                  max by (cluster, instance, pid, peer_node) (
                    max_over_time(nccl_tcp_collective_peers{%(sel)s}[%(w)s])
                    * on (cluster, local_address, peer) group_left (peer_node)
                    topk by (cluster, local_address, peer) (1, max_over_time(vigil:tcp_peer_stall_seconds:remote_view[%(w)s]))
                  )
                )
              )
            ||| % { P: by(c.processLabels + ['source', 'kind']), sel: c.agentSelector, w: c.correlatedTimeoutWindow,
                  failures: failuresIn('nccl_tcp_uncorrelated_timeouts_total{%s}' % c.agentSelector, c.correlatedTimeoutWindow) },
          },
        ],
      },
    ],
  },
}
