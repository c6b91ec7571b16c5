// Vigil's recording rules: the mixin's prometheusRules (mixin.libsonnet), reading its _config
// (config.libsonnet).
local failuresIn = import 'failures.libsonnet';

{
  local c = $._config,
  local by(labels) = 'by (%s)' % std.join(', ', labels),
  // Appended to a per-cluster count: 0 for every cluster with an agent target, not no data.
  local zeroPerCluster = 'or on (cluster) (0 * group by (cluster) (up{%s}))' % c.agentSelector,

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
          {
            // The fleet dashboard's count per cluster (0 where none): here, after the record it
            // reads, not in vigil-fleet (a record is read in its own group only).
            record: 'vigil_fleet:nccl_tcp_cross_node_correlated_timeouts:sum',
            expr: 'sum by (cluster) (vigil:nccl_tcp_cross_node_correlated_timeouts:increase%s) %s' % [c.correlatedTimeoutWindow, zeroPerCluster],
          },
        ],
      },
      {
        // Which rank of a communicator the others wait for (docs/correlation.md): NCCL's
        // (nccl_comm_*) and the worker's tensor-parallel groups (tp_comm_*). The agent labels
        // each rank's progress with the communicator's id (a hash of the ncclUniqueId every rank
        // passed to its init; the group id the worker's leader drew), so ranks on different
        // nodes join on (cluster, communicator). VigilCollectiveRankStuck completes this group.
        name: 'vigil-nccl-rank',
        local sel = c.agentSelector,
        local progress = '{__name__=~"nccl_comm_collectives_total|tp_comm_collectives_total", %s}' % sel,
        local age = '{__name__=~"nccl_comm_last_collective_age_seconds|tp_comm_last_collective_age_seconds", %s}' % sel,
        local head = 'max by (cluster, communicator) (%s)' % progress,
        local unread = 'tp_comm_unread_bytes{%s}' % sel,
        local tpProgress = 'tp_comm_collectives_total{%s}' % sel,
        // The laggard rules repeat this rather than read its record: an engine that reads records
        // a moment late (vmalert through VictoriaMetrics' latency offset) would pair the waiting
        // of a communicator that has just resumed with progress already past it.
        local waiting = |||
          %(age)s > %(t)s
          and on (cluster, instance, pid, communicator, rank)
          (%(progress)s == on (cluster, communicator) group_left %(head)s)
          unless on (cluster, instance, pid, communicator, rank) %(unread)s > 0
        ||| % { age: age, t: c.rankStuckWaitSeconds, progress: progress, head: head, unread: unread },
        local waitingInline = std.stripChars(waiting, '\n'),
        rules: [
          {
            // Ranks at the communicator's furthest progress that have entered no collective for
            // rankStuckWaitSeconds: waiting (or the whole communicator idle), value the wait.
            // A rank holding unread bytes is not waiting for anyone: what it waits for is there.
            record: 'vigil:nccl_comm_rank_waiting:age_seconds',
            expr: waiting,
          },
          {
            // A running rank behind the furthest, itself idle past the threshold, while others
            // wait: value the collectives it has not entered. Idle too: ranks that progress are
            // behind one another by a scrape's worth, and a stopped rank's last entry is at
            // least as old as the waiting ranks'.
            record: 'vigil:nccl_comm_laggard:collectives_behind',
            labels: { state: 'running' },
            expr: |||
              (%(head)s - on (cluster, communicator) group_right %(progress)s) > 0
              and on (cluster, instance, pid, communicator, rank) %(age)s > %(t)s
              and on (cluster, communicator) (%(waiting)s)
            ||| % { head: head, progress: progress, age: age, t: c.rankStuckWaitSeconds, waiting: waitingInline },
          },
          {
            // A rank level with the others, idle as long, that has not read what they sent it
            // while they wait: stopped or starved inside the collective they all entered (Gloo
            // moves a rank's share only while that rank runs). Value 1: it owes its share of
            // that one collective. Only the worker's groups export unread bytes.
            record: 'vigil:nccl_comm_laggard:collectives_behind',
            labels: { state: 'not_reading' },
            expr: |||
              ((%(head)s - on (cluster, communicator) group_right %(progress)s) == 0) + 1
              and on (cluster, instance, pid, communicator, rank) tp_comm_last_collective_age_seconds{%(sel)s} > %(t)s
              and on (cluster, instance, pid, communicator, rank) %(unread)s > 0
              and on (cluster, communicator) (%(waiting)s)
            ||| % { head: 'max by (cluster, communicator) (%s)' % tpProgress, progress: tpProgress, sel: sel, t: c.rankStuckWaitSeconds, unread: unread, waiting: waitingInline },
          },
          {
            // A rank seen behind in rankGoneWindow with no series now (its process exited, its
            // node or agent is down) while the others wait. Behind, not level: a job whose
            // ranks exit one by one at its end leaves no rank behind.
            record: 'vigil:nccl_comm_laggard:collectives_behind',
            labels: { state: 'gone' },
            expr: |||
              (%(head)s - on (cluster, communicator) group_right last_over_time(%(progress)s[%(w)s])) > 0
              unless on (cluster, communicator, rank) %(progress)s
              and on (cluster, communicator) (%(waiting)s)
            ||| % { head: head, progress: progress, w: c.rankGoneWindow, waiting: waitingInline },
          },
          {
            // The fleet overview's count of laggards per cluster (0 where none): here, after the
            // records it reads (a record is read in its own group only).
            record: 'vigil_fleet:nccl_comm_laggards:count',
            expr: 'count by (cluster) (vigil:nccl_comm_laggard:collectives_behind) %s' % zeroPerCluster,
          },
        ],
      },
      {
        // What Vigil costs each node, in cores: the kernel's run time of the agent's BPF programs
        // (kernel.bpf_stats_enabled, on while the agent runs) plus the agent process's own CPU.
        // A program runs in the context of whatever fired it: a uprobe's or USDT probe's run time
        // is spent in the probed workload's thread and charged to that workload's CPU (cgroup,
        // container_cpu_usage), a TCP tracepoint's to the sending task or softirq, none to the
        // agent's process_cpu_seconds_total; so the parts do not overlap and the sum is the
        // whole cost. `or` keeps the agent's CPU for a node without BPF program series (they
        // carry set and program, so the two sides never collide). VigilAgentCostOverBudget
        // completes this group.
        name: 'vigil-agent',
        rules: [{
          record: 'vigil_node:agent_cost_cores:rate5m',
          expr: |||
            sum by (cluster, node, instance) (
              rate(vigil_agent_bpf_program_run_seconds_total{%(sel)s}[5m])
              or
              rate(process_cpu_seconds_total{%(sel)s}[5m])
            )
          ||| % { sel: c.agentSelector },
        }],
      },
      {
        // The fleet overview (dashboards: vigil-fleet) reads only these: per node (cluster, node)
        // for its worst-nodes tables, per cluster for everything else, so a panel touches
        // O(clusters) series (O(nodes) for the tables), never O(nodes x processes). Per-cluster
        // records read the per-node ones above them where they can (same group, in order).
        // "or zeros": a cluster with nothing to count shows 0, not "no data".
        name: 'vigil-fleet',
        rules: [
          { record: 'vigil_node:gpu_memory_fragmentation_ratio:max', expr: 'max by (cluster, node) (gpu_memory_fragmentation_ratio{%s})' % c.agentSelector },
          { record: 'vigil_node:nccl_tcp_timeout_risk_ratio:max', expr: 'max by (cluster, node) (nccl_tcp_timeout_risk_ratio{%s})' % c.agentSelector },
          { record: 'vigil_node:cuda_graph_launch_failures:rate5m', expr: 'sum by (cluster, node) (rate(cuda_graph_launch_failures_total{%s}[5m]))' % c.agentSelector },
          { record: 'vigil_node:tcp_retransmits:rate5m', expr: 'sum by (cluster, node) (rate(tcp_retransmits_total{%s}[5m]))' % c.agentSelector },
          { record: 'vigil_node:gpu_processes:count', expr: 'count by (cluster, node) (gpu_memory_live_bytes{%s})' % c.agentSelector },
          { record: 'vigil_fleet:agents_up:sum', expr: 'sum by (cluster) (up{%s})' % c.agentSelector },
          { record: 'vigil_fleet:agents_down:sum', expr: 'sum by (cluster) (up{%s} == bool 0)' % c.agentSelector },
          {
            // Nodes seen in agentGoneWindow that no agent answers for now (target gone from
            // discovery): VigilAgentDown's second half, counted.
            record: 'vigil_fleet:agents_gone:count',
            expr: 'count by (cluster) (group by (cluster, node) (max_over_time(up{%(s)s}[%(w)s])) unless on (cluster, node) up{%(s)s}) %(z)s'
                  % { s: c.agentSelector, w: c.agentGoneWindow, z: zeroPerCluster },
          },
          { record: 'vigil_fleet:gpu_processes:sum', expr: 'sum by (cluster) (vigil_node:gpu_processes:count)' },
          { record: 'vigil_fleet:gpu_memory_live_bytes:sum', expr: 'sum by (cluster) (gpu_memory_live_bytes{%s})' % c.agentSelector },
          { record: 'vigil_fleet:gpu_memory_fragmentation_ratio:max', expr: 'max by (cluster) (vigil_node:gpu_memory_fragmentation_ratio:max)' },
          {
            record: 'vigil_fleet:gpu_fragmented_nodes:count',
            expr: 'count by (cluster) (vigil_node:gpu_memory_fragmentation_ratio:max > %s) %s' % [c.fragmentationThreshold, zeroPerCluster],
          },
          { record: 'vigil_fleet:cuda_graph_launch_failures:rate5m', expr: 'sum by (cluster) (vigil_node:cuda_graph_launch_failures:rate5m) %s' % zeroPerCluster },
          { record: 'vigil_fleet:nccl_tcp_timeout_risk_ratio:max', expr: 'max by (cluster) (vigil_node:nccl_tcp_timeout_risk_ratio:max)' },
          {
            record: 'vigil_fleet:nccl_tcp_risky_nodes:count',
            expr: 'count by (cluster) (vigil_node:nccl_tcp_timeout_risk_ratio:max > %s) %s' % [c.timeoutRiskThreshold, zeroPerCluster],
          },
          {
            // The agent exports a connection's TCP state only once it retransmits: a cluster
            // with no connection in backoff has no series, and its longest stall is 0.
            record: 'vigil_fleet:tcp_stall_seconds:max',
            expr: 'max by (cluster) (tcp_stall_seconds{%s}) %s' % [c.agentSelector, zeroPerCluster],
          },
          { record: 'vigil_fleet:tcp_retransmits:rate5m', expr: 'sum by (cluster) (vigil_node:tcp_retransmits:rate5m) %s' % zeroPerCluster },
          {
            // Failed collectives in correlatedTimeoutWindow with TCP in backoff on the process's
            // own node. Named without the window: the dashboard reads it whatever the window.
            record: 'vigil_fleet:nccl_tcp_correlated_timeouts:sum',
            expr: 'sum by (cluster) (%s) %s' % [failuresIn('nccl_tcp_correlated_timeouts_total{%s}' % c.agentSelector, c.correlatedTimeoutWindow), zeroPerCluster],
          },
        ] + [
          {
            // Vigil alerts firing per cluster and priority (P1 pages, P2 tickets).
            record: 'vigil_fleet:alerts_firing:count',
            labels: { priority: p },
            expr: 'count by (cluster) (ALERTS{alertname=~"Vigil.*", alertstate="firing", priority="%s"}) %s' % [p, zeroPerCluster],
          }
          for p in ['P1', 'P2']
        ],
      },
      {
        // The fleet's allocation-size histogram for the overview's heatmap: the one fleet record
        // that reads every bucket of every process (42 buckets x processes; at 100 nodes x 8 GPUs
        // it took 0.3-0.6 s of the group's 0.57 s, every other record a few ms), so in a group of
        // its own at a longer interval (fleetHistogramInterval). A heatmap cell per minute is
        // what the panel shows anyway.
        name: 'vigil-fleet-histograms',
        interval: c.fleetHistogramInterval,
        rules: [{
          record: 'vigil_fleet:gpu_memory_allocation_size_bytes_bucket:rate5m',
          expr: 'sum by (cluster, le) (rate(gpu_memory_allocation_size_bytes_bucket{%s}[5m]))' % c.agentSelector,
        }],
      },
    ],
  },
}
