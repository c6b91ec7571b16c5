// The one _config of the Vigil mixin (mixin.libsonnet): selectors, thresholds and windows, read
// by the alerts, the recording rules and the dashboards. Override fields with jsonnet's `+`
// (`(import 'mixin.libsonnet') + { _config+:: { ... } }`, as with node-mixin); the end-to-end
// test shortens windows this way.
{
  _config+:: {
    // Selectors of the scrape jobs (set job names with relabelling in the Pod/ServiceMonitors).
    agentSelector: 'job="vigil-agent"',
    workerSelector: 'job="vigil-worker"',
    // Both jobs at once, for the dashboards' cluster list and targets-up panel: PromQL cannot OR
    // two matcher lists, so a deployment that renames a job sets this with the selectors above.
    vigilSelector: 'job=~"vigil-agent|vigil-worker"',
    // kube-state-metrics series of the worker pods (readiness is not in the worker's own metrics).
    workerPodSelector: 'pod=~"vigil-worker-.*"',

    // Labels that name a process seen by the agent, and a worker instance. Absent labels are
    // harmless in `by`, so the same rules work with and without Kubernetes target labels.
    // namespace, pod and container are the agent's own (from the kubelet's container log links).
    processLabels: ['cluster', 'node', 'instance', 'namespace', 'pod', 'container', 'pid', 'comm', 'container_id', 'pod_uid'],
    workerLabels: ['cluster', 'namespace', 'pod', 'job', 'instance'],

    // The source document's P1: fragmentation ratio above this with at least N CUDA Graph
    // launch failures in the window, on the same process.
    fragmentationThreshold: '0.65',
    graphFailuresThreshold: 3,
    graphFailuresWindow: '5m',
    p1For: '1m',

    // NCCL/TCP: risk = (TCP stall + next retry wait) / collective timeout; at 1 the retry lands
    // after the watchdog. Half-way leaves time to act before the abort.
    timeoutRiskThreshold: '0.5',
    timeoutRiskFor: '30s',
    correlatedTimeoutWindow: '10m',
    correlatedFor: '1m',
    retransmitStormPerSecond: 5,
    retransmitWindow: '5m',

    // Which rank of a communicator the others wait for (docs/correlation.md): the ranks furthest
    // ahead have entered no collective for this many seconds while another rank is behind them.
    // Far above a healthy step (NCCL collectives return at enqueue, milliseconds apart) and
    // below the collective watchdog's timeout (PyTorch's default 10 min), so it pages first.
    rankStuckWaitSeconds: 60,
    rankStuckFor: '1m',
    // How far back a rank whose series are gone (process exited, node or agent down) is looked
    // for while the others wait.
    rankGoneWindow: '15m',

    // NVIDIA XIDs (gpu_xid_errors_total; its class is NVIDIA's catalogue's, reduced by the agent).
    // One fatal XID pages: the window keeps the page open while someone acts (the counter never
    // says the GPU healed); `for` is short but not 0 (the rules' contract: every `for` non-zero). Any
    // other XID opens a ticket; xidTicketMatchers picks which (add e.g. xid!="45" where aborted
    // CUDA processes are routine: NVIDIA's catalogue logs 45 when one is killed, Ctrl-C, SIGKILL).
    xidFatalWindow: '30m',
    xidFatalFor: '1m',
    xidErrorsWindow: '10m',  // longer than warningFor: one XID fires
    xidTicketMatchers: 'class!="fatal"',

    allocationFailureWindow: '10m',  // longer than warningFor: one burst fires
    captureAllocationWindow: '10m',
    warningFor: '5m',

    workerDownFor: '1m',
    workerNotReadyFor: '5m',
    kvUsageThreshold: '0.9',
    kvFor: '5m',
    // Inter-token latency P99 over itlWindow above itlTargetTolerance x the worker's step latency
    // target this long. The target is what the planner predicts a step takes; the default (auto)
    // overran it at P99 by up to 19 % in bench/load.py latency (docs/performance.md), and gaps also
    // hold HTTP writes: 1.5x is a target missed, not a prediction's noise.
    itlWindow: '5m',
    itlTargetTolerance: '1.5',
    itlAboveTargetFor: '10m',

    // TTFT SLO: this share of requests get their first token within ttftSloSeconds (a bucket
    // boundary of vigil_worker_time_to_first_token_seconds, written as the worker writes `le`).
    ttftSloSeconds: '1',
    ttftObjective: 0.99,  // a number: the burn thresholds are computed from it

    // How often the fleet overview's histogram record (group vigil-fleet-histograms) is
    // evaluated: it reads every bucket series of the fleet.
    fleetHistogramInterval: '1m',

    agentDownFor: '5m',
    // How long a node whose agent target left discovery keeps VigilAgentDown firing (a node
    // removed from the cluster for good stops paging after this).
    agentGoneWindow: '1h',
    probesFor: '15m',
    dropsWindow: '15m',
    // What Vigil may cost its node, in cores (BPF program run time plus the agent's CPU,
    // vigil_node:agent_cost_cores:rate5m): 0.05 is the CPU the agent's DaemonSet requests (50m),
    // so above it the node pays for more than the scheduler reserved; it is ~20x the agent's own
    // measured idle CPU (0.2-0.3 % of a core, docs/probes-agent.md) and leaves room for ~25k
    // probed driver calls/s (about 1.9 us of uprobe time each). Sustained, not a burst.
    agentCostBudgetCores: '0.05',
    agentCostFor: '15m',
    // Any run of an agent BPF program the kernel skipped in this window is an alert.
    recursionMissWindow: '15m',
    // Any insert a full BPF table refused in this window is an alert.
    tableFullWindow: '15m',

    // Where a pager's link to an alert's runbook points: %s is the alert's name, the page is
    // docs/runbooks/<name>.md. Set it once per deployment (deploy/kubernetes/overlays/*/
    // alerts-config.json; the demo serves the runbooks itself). The default is the docs/runbooks
    // folder of the project's repository on GitHub; no public repository exists yet, so a
    // deployment sets its own.
    runbookURLPattern: 'https://github.com/vigil-project/vigil/blob/main/docs/runbooks/%s.md',
  },
}
