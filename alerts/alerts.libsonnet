// Vigil's alerts, one group per component (gpu, nccl-tcp, worker, agent): the mixin's
// prometheusAlerts (mixin.libsonnet), reading its _config (config.libsonnet).
// Every alert carries severity (critical pages, warning tickets), priority (P1 pages, P2 tickets),
// a static summary, a templated description and a runbook under docs/runbooks/.
local by(labels) = 'by (%s)' % std.join(', ', labels);
local where = '(pod {{ $labels.pod }} in {{ $labels.namespace }})';
// Processes outside Kubernetes have no pod UID: say nothing rather than an empty value.
local proc = 'process {{ $labels.comm }} (pid {{ $labels.pid }}{{ with $labels.pod }}, pod {{ $labels.namespace }}/{{ . }}{{ with $labels.container }} container {{ . }}{{ end }}{{ else }}{{ with $labels.pod_uid }}, pod UID {{ . }}{{ end }}{{ end }}) on {{ $labels.node }} ({{ $labels.instance }})';

// A failure counter's count in a window, a series born inside it counted from zero.
local failuresIn = import '../rules/failures.libsonnet';

{
  local c = $._config,
  local P = by(c.processLabels),
  local W = by(c.workerLabels),
  local X = by(['cluster', 'node', 'instance', 'gpu', 'xid', 'class', 'process']),
  // The driver names a process for some XIDs only (process="" otherwise).
  local xidProcess = '{{ with $labels.process }}, process {{ . }}{{ else }} (the driver named no process){{ end }}',

  local alert(name, severity, priority, component, expr, for_, summary, description) = {
    alert: name,
    expr: expr,
    'for': for_,
    labels: { severity: severity, priority: priority, component: component },
    annotations: {
      summary: summary,
      description: description,
      runbook_url: c.runbookURLPattern % name,
    },
  },

  // SLO burn: both windows' error ratio (recorded by rules/rules.libsonnet) above factor times
  // the error budget.
  local budget = 1 - c.ttftObjective,
  local burn(long, short, factor) =
    'vigil_worker:ttft_slo_errors:ratio_rate%(l)s > %(t)s\nand\nvigil_worker:ttft_slo_errors:ratio_rate%(s)s > %(t)s\n' % {
      l: long, s: short, t: '%.6g' % (factor * budget),
    },

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'vigil-gpu',
        rules: [
          alert(
            'VigilGpuFragmentationGraphFailures', 'critical', 'P1', 'agent',
            |||
              max %(P)s (gpu_memory_fragmentation_ratio{%(sel)s}) > %(ratio)s
              and on (instance, pid)
              sum %(P)s %(failures)s >= %(n)s
            ||| % { P: P, sel: c.agentSelector, ratio: c.fragmentationThreshold, n: c.graphFailuresThreshold,
                  failures: failuresIn('cuda_graph_launch_failures_total{%s}' % c.agentSelector, c.graphFailuresWindow) },
            c.p1For,
            'A GPU process allocates mostly small blocks while its CUDA Graph launches fail.',
            'GPU memory fragmentation ratio {{ $value | humanizePercentage }} (allocations <= 4 KiB over all) with at least %(n)s CUDA Graph launch failures in %(w)s for %(proc)s.' % { n: c.graphFailuresThreshold, w: c.graphFailuresWindow, proc: proc },
          ),
          alert(
            'VigilGpuAllocationFailures', 'warning', 'P2', 'agent',
            'sum %(P)s %(failures)s > 0' % {
              P: by(c.processLabels + ['error']),
              failures: failuresIn('gpu_memory_allocation_failures_total{%s}' % c.agentSelector, c.allocationFailureWindow),
            },
            c.warningFor,
            'GPU memory allocations fail.',
            '{{ $value | humanize }} GPU allocation calls failed with {{ $labels.error }} in the last %(w)s for %(proc)s.' % { w: c.allocationFailureWindow, proc: proc },
          ),
          // NVIDIA XIDs, from the driver's tracepoint or its kernel log lines (a line a process
          // wrote to /dev/kmsg is never counted). The agent creates a series at its first XID,
          // hence failuresIn: a single XID is the event. One per GPU, code, class and process.
          alert(
            'VigilGpuXidFatal', 'critical', 'P1', 'agent',
            'sum %(X)s %(xids)s > 0' % {
              X: X,
              xids: failuresIn('gpu_xid_errors_total{%s, class="fatal"}' % c.agentSelector, c.xidFatalWindow),
            },
            c.xidFatalFor,
            'A GPU reported a fatal NVIDIA XID error: it needs a reset or its node a drain.',
            '{{ $value | humanize }} XID {{ $labels.xid }} (class fatal) on GPU {{ $labels.gpu }} of node {{ $labels.node }} (agent {{ $labels.instance }}) in the last %(w)s%(process)s. NVIDIA\'s catalogue asks for a GPU reset or a machine restart: cordon the node and drain it.' % { w: c.xidFatalWindow, process: xidProcess },
          ),
          alert(
            'VigilGpuXidErrors', 'warning', 'P2', 'agent',
            'sum %(X)s %(xids)s > 0' % {
              X: X,
              xids: failuresIn('gpu_xid_errors_total{%s, %s}' % [c.agentSelector, c.xidTicketMatchers], c.xidErrorsWindow),
            },
            c.warningFor,
            'A GPU reported NVIDIA XID errors that need no reset.',
            '{{ $value | humanize }} XID {{ $labels.xid }} (class {{ $labels.class }}) on GPU {{ $labels.gpu }} of node {{ $labels.node }} (agent {{ $labels.instance }}) in the last %(w)s%(process)s{{ if eq $labels.class "application" }}: the workload\'s own fault, for its owner (NVIDIA: restart the application){{ else if eq $labels.class "hardware" }}: a hardware condition the GPU survived (NVIDIA: no reset now; XIDs 63 and 94 want one at the next drain){{ else if eq $labels.class "driver" }}: a driver or firmware condition (NVIDIA: no reset){{ else }}: a code NVIDIA\'s catalogue does not describe for data-center GPUs{{ end }}.' % { w: c.xidErrorsWindow, process: xidProcess },
          ),
          alert(
            'VigilCudaCaptureAllocations', 'warning', 'P2', 'agent',
            'sum %(P)s %(failures)s > 0' % {
              P: P,
              failures: failuresIn('cuda_stream_capture_allocations_total{%s}' % c.agentSelector, c.captureAllocationWindow),
            },
            c.warningFor,
            'A process allocates GPU memory while a CUDA stream capture is open.',
            '{{ $value | humanize }} allocation calls during stream capture in the last %(w)s for %(proc)s; each one invalidates the capture and the graph falls back or fails.' % { w: c.captureAllocationWindow, proc: proc },
          ),
        ],
      },
      {
        name: 'vigil-nccl-tcp',
        rules: [
          alert(
            'VigilNcclTcpTimeoutRiskHigh', 'critical', 'P1', 'agent',
            'max %(P)s (nccl_tcp_timeout_risk_ratio{%(sel)s}) > %(t)s' % { P: P, sel: c.agentSelector, t: c.timeoutRiskThreshold },
            c.timeoutRiskFor,
            'TCP retransmission backoff of an NCCL process is approaching its collective timeout.',
            'TCP stall plus the next retransmit wait is {{ $value | humanizePercentage }} of the collective timeout for %(proc)s; at 100%% the collective watchdog aborts before TCP recovers.' % { proc: proc },
          ),
          alert(
            'VigilNcclTcpCorrelatedTimeouts', 'critical', 'P1', 'agent',
            'sum %(P)s %(failures)s > 0' % {
              P: by(c.processLabels + ['source', 'kind']),
              failures: failuresIn('nccl_tcp_correlated_timeouts_total{%s}' % c.agentSelector, c.correlatedTimeoutWindow),
            },
            c.correlatedFor,
            'Collective failures coincide with TCP retransmission backoff on the same process.',
            '{{ $value | humanize }} collective {{ $labels.kind }} events (seen by {{ $labels.source }} probes) in the last %(w)s came while TCP was backing off for %(proc)s: look at the network, not the GPU.' % { w: c.correlatedTimeoutWindow, proc: proc },
          ),
          alert(
            'VigilTcpRetransmitStorm', 'warning', 'P2', 'agent',
            |||
              sum %(P)s (rate(tcp_retransmits_total{%(sel)s}[%(w)s])) > %(r)s
              and on (instance, pid)
              nccl_tcp_timeout_risk_ratio{%(sel)s}
            ||| % { P: P, sel: c.agentSelector, w: c.retransmitWindow, r: c.retransmitStormPerSecond },
            c.warningFor,
            'An NCCL process retransmits TCP segments at a high rate.',
            '{{ $value | humanize }} TCP retransmits per second over %(w)s for %(proc)s, which runs collectives over TCP.' % { w: c.retransmitWindow, proc: proc },
          ),
        ],
      },
      {
        // Completes the group of the cross-node records it reads (rules/rules.libsonnet). Not a
        // branch of VigilNcclTcpCorrelatedTimeouts: the page's headline (the static summary) and
        // the place to act differ, the stall being on another node than the rank that paged.
        name: 'vigil-nccl-tcp-cross-node',
        rules: [
          alert(
            'VigilNcclTcpCrossNodeCorrelatedTimeouts', 'critical', 'P1', 'agent',
            'vigil:nccl_tcp_cross_node_correlated_timeouts:increase' + c.correlatedTimeoutWindow,
            c.correlatedFor,
            'Collective failures coincide with TCP retransmission backoff at the peer\'s end, on another node.',
            '{{ $value | humanize }} collective {{ $labels.kind }} events (seen by {{ $labels.source }} probes) in the last %(w)s for %(proc)s came while the other end of one of its connections, on {{ $labels.peer_node }}, was in TCP retransmission backoff (its own sockets were not): look at the network of {{ $labels.peer_node }} and the path between the nodes, not the GPU.' % { w: c.correlatedTimeoutWindow, proc: proc },
          ),
        ],
      },
      {
        // Completes the group of the laggard records it reads (rules/rules.libsonnet). The
        // waiting ranks are listed from their record, on whatever nodes they are.
        name: 'vigil-nccl-rank',
        rules: [
          alert(
            'VigilCollectiveRankStuck', 'critical', 'P1', 'agent',
            'vigil:nccl_comm_laggard:collectives_behind',
            c.rankStuckFor,
            'One rank of a communicator (NCCL, or a worker\'s tensor-parallel group) holds up the others: they wait for it.',
            'Rank {{ $labels.rank }} of {{ $labels.nranks }} in communicator {{ $labels.communicator }} {{ if eq $labels.state "not_reading" }}is level with the others but owes its share of the collective they are in{{ else }}is {{ $value }} collectives behind{{ end }}: %(proc)s{{ if eq $labels.state "gone" }} is gone (its process exited, or its node or agent is down){{ else if eq $labels.state "not_reading" }} is inside the collective the others wait in and does not read what they sent it (stopped, frozen or starved){{ else }} has stopped entering collectives{{ end }}. Waiting for it, with no collective for over %(t)ss: {{ range query (printf "vigil:nccl_comm_rank_waiting:age_seconds{cluster=%%q, communicator=%%q}" $labels.cluster $labels.communicator) | sortByLabel "rank" }}rank {{ .Labels.rank }} on {{ .Labels.node }}{{ if .Labels.pod }} (pod {{ .Labels.namespace }}/{{ .Labels.pod }}){{ end }}; {{ end }}' % { proc: proc, t: c.rankStuckWaitSeconds },
          ),
        ],
      },
      {
        // Completes the group of the recording rules these read (rules/rules.libsonnet):
        // mixin.libsonnet's ruleGroups puts them after the records, in one group.
        name: 'vigil-worker-slo',
        rules: [
          alert(
            'VigilWorkerTtftBudgetBurnFast', 'critical', 'P1', 'worker',
            burn('1h', '5m', 14.4),
            '2m',
            'Time to first token burns the SLO error budget fast.',
            '{{ $value | humanizePercentage }} of requests to {{ $labels.job }} in {{ $labels.namespace }} waited more than %ss for their first token over the last hour (objective %s%%): at this rate 2%% of the monthly budget goes in an hour.' % [c.ttftSloSeconds, '%g' % (c.ttftObjective * 100)],
          ),
          alert(
            'VigilWorkerTtftBudgetBurnSlow', 'warning', 'P2', 'worker',
            burn('6h', '30m', 6),
            '15m',
            'Time to first token burns the SLO error budget.',
            '{{ $value | humanizePercentage }} of requests to {{ $labels.job }} in {{ $labels.namespace }} waited more than %ss for their first token over the last 6 hours (objective %s%%): at this rate 5%% of the monthly budget goes in 6 hours.' % [c.ttftSloSeconds, '%g' % (c.ttftObjective * 100)],
          ),
        ],
      },
      {
        name: 'vigil-worker',
        rules: [
          alert(
            'VigilWorkerDown', 'critical', 'P1', 'worker',
            'up{%s} == 0' % c.workerSelector,
            c.workerDownFor,
            'Prometheus cannot scrape a Vigil worker.',
            'Worker {{ $labels.instance }} %s has not answered its /metrics scrape for %s.' % [where, c.workerDownFor],
          ),
          alert(
            'VigilWorkerNotReady', 'warning', 'P2', 'worker',
            'max by (cluster, namespace, pod) (kube_pod_status_ready{%s, condition="false"}) == 1' % c.workerPodSelector,
            c.workerNotReadyFor,
            'A Vigil worker pod is running but not ready.',
            'Pod {{ $labels.pod }} in {{ $labels.namespace }} has failed its /ready probe for %s: it is loading, draining or stuck, and gets no traffic.' % c.workerNotReadyFor,
          ),
          alert(
            'VigilWorkerKvCacheSaturated', 'warning', 'P2', 'worker',
            |||
              max %(W)s (vigil_worker_kv_cache_usage_ratio{%(sel)s}) > %(t)s
              and on (instance)
              sum %(W)s (rate(vigil_worker_preemptions_total{%(sel)s}[5m])) > 0
            ||| % { W: W, sel: c.workerSelector, t: c.kvUsageThreshold },
            c.kvFor,
            'A worker\'s KV cache is full and it preempts sequences.',
            'KV cache usage {{ $value | humanizePercentage }} with preemptions rising on worker {{ $labels.instance }} %s: requests are recomputed and latency grows.' % where,
          ),
          alert(
            'VigilWorkerCudaGraphsFailing', 'warning', 'P2', 'worker',
            // A bucket whose graph failed is never retried: the lasting symptom is its steps running
            // eagerly, so this fires as long as that traffic lasts, not just at the failure.
            'sum %(W)s (increase(vigil_worker_cuda_graph_eager_steps_total{%(sel)s, reason="failed_bucket"}[%(w)s])) > 0' % { W: W, sel: c.workerSelector, w: c.graphFailuresWindow },
            c.warningFor,
            'A worker decodes without CUDA Graphs because its graphs failed.',
            '{{ $value | humanize }} decode steps in %(w)s ran eagerly on worker {{ $labels.instance }} %(where)s because their batch-size bucket\'s CUDA Graph failed to capture or launch (vigil_worker_cuda_graph_capture_failures_total, ..._launch_failures_total): decoding is slower until the worker restarts.' % { w: c.graphFailuresWindow, where: where },
          ),
          alert(
            'VigilWorkerInterTokenLatencyAboveTarget', 'warning', 'P2', 'worker',
            // Only workers with a target (engine.step_latency_target > 0; auto by default): it
            // says what streams should stay within. Its largest value over the window: auto's
            // target follows the running batch.
            |||
              histogram_quantile(0.99, sum %(WL)s (rate(vigil_worker_inter_token_latency_seconds_bucket{%(sel)s}[%(w)s])))
              > on (%(on)s)
              %(tol)s * max %(W)s (max_over_time(vigil_worker_step_latency_target_seconds{%(sel)s}[%(w)s]) > 0)
            ||| % { W: W, WL: by(c.workerLabels + ['le']), on: std.join(', ', c.workerLabels), sel: c.workerSelector, w: c.itlWindow, tol: c.itlTargetTolerance },
            c.itlAboveTargetFor,
            'Streams on a worker pause well beyond its step latency target.',
            'Inter-token latency P99 {{ $value | humanizeDuration }} over %(w)s on worker {{ $labels.instance }} %(where)s has stayed above %(tol)sx its engine.step_latency_target for %(for)s: steps take longer than the target (vigil_worker_step_latency_target_attainable, vigil_worker_step_cost_seconds say whether decodes alone already do).' % { w: c.itlWindow, 'for': c.itlAboveTargetFor, where: where, tol: c.itlTargetTolerance },
          ),
        ],
      },
      {
        name: 'vigil-agent',
        rules: [
          // A failing scrape leaves up == 0; a target gone from discovery (agent pod deleted,
          // DaemonSet not scheduled) leaves no up at all, so the second half keeps, per node,
          // the targets seen in the last agentGoneWindow that no agent of that node answers now.
          // By node, not instance: an agent back under a new pod IP is the node observed again.
          alert(
            'VigilAgentDown', 'warning', 'P2', 'agent-self',
            |||
              up{%(sel)s} == 0
              or
              group by (cluster, node, instance, job) (max_over_time(up{%(sel)s}[%(w)s]))
              unless on (cluster, node)
              up{%(sel)s}
            ||| % { sel: c.agentSelector, w: c.agentGoneWindow },
            c.agentDownFor,
            'Prometheus cannot scrape a Vigil agent: its node is not observed.',
            'Agent {{ $labels.instance }} on {{ $labels.node }} has not answered its /metrics scrape, or has left service discovery, for %s; GPU, NCCL and TCP alerts for its node cannot fire.' % c.agentDownFor,
          ),
          alert(
            'VigilAgentProbesNotAttached', 'warning', 'P2', 'agent-self',
            // Sets turned off in the config are meant. The XID set is tracepoint_missing only with
            // neither NVIDIA's open-module tracepoint nor a readable kernel log: the chart's agent
            // has no /dev/kmsg yet (docs/probes-agent.md), so on a node with the proprietary module
            // that is the installed state, not a fault.
            |||
              vigil_agent_probe_set_enabled{%(sel)s, reason!="disabled_by_config"} == 0
              unless
              vigil_agent_probe_set_enabled{%(sel)s, set="xid", reason="tracepoint_missing"}
            ||| % { sel: c.agentSelector },
            c.probesFor,
            'A Vigil agent probe set is disabled.',
            'Probe set {{ $labels.set }} of agent {{ $labels.instance }} on {{ $labels.node }} is disabled ({{ $labels.reason }}) for %s: its metrics and alerts are missing on this node.' % c.probesFor,
          ),
          alert(
            'VigilAgentEventsDropped', 'warning', 'P2', 'agent-self',
            'sum by (cluster, node, instance, set) (increase(vigil_agent_ringbuf_drops_total{%s}[%s])) > 0' % [c.agentSelector, c.dropsWindow],
            c.warningFor,
            'A Vigil agent drops events because its ring buffer is full.',
            'Agent {{ $labels.instance }} on {{ $labels.node }} dropped {{ $value | humanize }} {{ $labels.set }} events in %s: failure context is lost (counters stay exact).' % c.dropsWindow,
          ),
          alert(
            // Reads the record of its group (rules/rules.libsonnet), which says what it sums.
            'VigilAgentCostOverBudget', 'warning', 'P2', 'agent-self',
            'vigil_node:agent_cost_cores:rate5m > %s' % c.agentCostBudgetCores,
            c.agentCostFor,
            'Vigil costs its node more CPU than its budget.',
            'Vigil costs node {{ $labels.node }} {{ $value | humanizePercentage }} of a core (its BPF programs plus agent {{ $labels.instance }}), above the budget of %(b)s of a core, for %(for)s; the BPF part is spent in the probed workloads\' threads.'
            % { b: '%g%%' % (std.parseJson(c.agentCostBudgetCores) * 100), 'for': c.agentCostFor },
          ),
          alert(
            // The kernel does not nest BPF programs on a CPU: a run that would have is skipped and
            // counted in recursion_misses. What that run would have counted is lost, so unlike a
            // ring buffer drop the counters are short. A ticket, as the other agent-self alerts:
            // the workloads are not harmed, their observation is.
            'VigilAgentBpfRecursionMisses', 'warning', 'P2', 'agent-self',
            'sum by (cluster, node, instance, set, program) %s > 0'
            % failuresIn('vigil_agent_bpf_program_recursion_misses_total{%s}' % c.agentSelector, c.recursionMissWindow),
            c.warningFor,
            'The kernel skipped runs of a Vigil BPF program: events were lost.',
            'The kernel skipped {{ $value | humanize }} runs of BPF program {{ $labels.program }} (set {{ $labels.set }}) of agent {{ $labels.instance }} on {{ $labels.node }} in %s, because a BPF program was already running on that CPU (or, for a classic tracepoint, a BPF map was being copied there): the events of those runs are lost and the set\'s counters are short.' % c.recursionMissWindow,
          ),
          alert(
            // A full table refuses what a new process, allocation or peer would have recorded;
            // the agent keeps the other numbers exact (an allocation not recorded is left out of
            // the gauges and counted untracked), so it is a ticket like the other agent-self ones.
            'VigilAgentTableFull', 'warning', 'P2', 'agent-self',
            'sum by (cluster, node, instance, set) %s > 0'
            % failuresIn('vigil_agent_table_full_total{%s}' % c.agentSelector, c.tableFullWindow),
            c.warningFor,
            'A Vigil agent BPF table is full: new entries are not recorded.',
            'Agent {{ $labels.instance }} on {{ $labels.node }}: full {{ $labels.set }} tables refused {{ $value | humanize }} inserts in %s; what they would have recorded (processes, allocations, peers) is missing on this node. vigil_agent_table_entries says which table.' % c.tableFullWindow,
          ),
          alert(
            // The kubelet restarts an agent whose /healthz fails past the stall limit, but not
            // when its probes cannot (TCP probes beside a web config that requires client
            // certificates: docs/deploy.md): then only this says the loop that attaches probes
            // to new processes and forgets exited ones has stopped. The limit is the agent's own.
            'VigilAgentHousekeepingStalled', 'warning', 'P2', 'agent-self',
            |||
              vigil_agent_housekeeping_last_tick_age_seconds{%(sel)s}
              > vigil_agent_housekeeping_stall_limit_seconds{%(sel)s}
            ||| % { sel: c.agentSelector },
            c.warningFor,
            'A Vigil agent\'s housekeeping loop has stopped.',
            'Agent {{ $labels.instance }} on {{ $labels.node }} has completed no housekeeping tick for {{ $value | humanizeDuration }}, beyond its stall limit, for %s: processes started since are not probed and exited ones are not forgotten; its /healthz fails, so a kubelet with HTTP(S) probes would have restarted it.' % c.warningFor,
          ),
        ],
      },
    ],
  },
}
