#!/usr/bin/env bash
# The main job: vigil-worker serving the model on loopback, vigil-agent watching it, and where
# to look. Runs until Ctrl-C; VIGIL_DEMO_ONESHOT=1 checks everything once and exits (tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/dev"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
# The one-shot run (a test) takes loopback ports free now instead of the usual ones, where another
# worker, agent or Prometheus on the machine would answer in its place.
if [[ "${VIGIL_DEMO_ONESHOT:-0}" == 1 ]]; then
  read -r -a ports < <(PYTHONPATH="$root/pylib" python3 -c 'from vigil_harness.ports import listen_port
ports = set()
while len(ports) < 5:
    ports.add(listen_port())
print(*ports)')
else
  ports=(8080 9435 9094 9090 9093)
fi
worker_port=${VIGIL_WORKER_PORT:-${ports[0]}}
agent_port=${VIGIL_AGENT_PORT:-${ports[1]}}
runbook_port=${VIGIL_RUNBOOK_PORT:-${ports[2]}}
prometheus_port=${VIGIL_PROMETHEUS_PORT:-${ports[3]}}
alertmanager_port=${VIGIL_ALERTMANAGER_PORT:-${ports[4]}}
logs=$(mktemp -d /tmp/vigil-demo.XXXXXX)
pids=()
# The demo's agent pins its state under a root of its own, removed when the demo ends: pinned links
# outlive an agent by design (a DaemonSet restart loses nothing), but a demo that has ended must
# not leave probes counting on the machine, nor hand its state to the next agent on the default root.
pin_root=/sys/fs/bpf/vigil-demo-$$
agent_running=0

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((agent_running)); then
    "$build/agent/vigil-agent" --cleanup --bpf-pin-root "$pin_root" >>"$logs/agent.log" 2>&1 ||
      echo "demo: vigil-agent --cleanup --bpf-pin-root $pin_root failed (see $logs/agent.log)" >&2
  fi
}
trap cleanup EXIT
trap 'exit 0' INT TERM

refuse_taken_ports() {  # a port another process holds would answer in place of the demo's server
  local name var
  for name in WORKER AGENT RUNBOOK PROMETHEUS ALERTMANAGER; do
    var=${name,,}_port
    if ! python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "${!var}" 2>/dev/null; then
      echo "demo: port ${!var} is in use by another process (set VIGIL_${name}_PORT to a free one)" >&2
      exit 1
    fi
  done
}

wait_http() {  # URL, what, log
  for _ in $(seq 1 150); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "demo: $2 did not come up; its log ($3):" >&2
  tail -n 20 "$3" >&2
  exit 1
}

start_worker() {
  "$build/worker/vigil-worker" serve -m "$model" --host 127.0.0.1 --port "$worker_port" \
    >"$logs/worker.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$worker_port/ready" "vigil-worker" "$logs/worker.log"
}

start_agent() {
  if [[ $(id -u) -ne 0 ]]; then
    # The one-shot run is a test of both programs: without the agent it has not passed.
    if [[ "${VIGIL_DEMO_ONESHOT:-0}" == 1 ]]; then
      echo "demo: FAIL: the one-shot run checks vigil-agent, which needs root (or CAP_SYS_ADMIN and CAP_SYS_PTRACE)" >&2
      exit 1
    fi
    echo "demo: vigil-agent needs root (or CAP_SYS_ADMIN and CAP_SYS_PTRACE); skipping it" >&2
    return
  fi
  "$build/agent/vigil-agent" --listen "127.0.0.1:$agent_port" --bpf-pin-root "$pin_root" >"$logs/agent.log" 2>&1 &
  pids+=($!)
  agent_running=1
  wait_http "http://127.0.0.1:$agent_port/readyz" "vigil-agent" "$logs/agent.log"
  # Its first discovery round attaches the USDT set to the running worker; requests before that
  # would go unseen. The agent logs each attachment with the process it found the file in.
  local worker_pid=${pids[0]}
  for _ in $(seq 1 50); do
    if grep -Eq "usdt: [1-9][0-9]* probes attached in /proc/$worker_pid/" "$logs/agent.log" &&
      curl -s "http://127.0.0.1:$agent_port/metrics" | grep -Eq '^vigil_agent_probes_attached\{set="usdt"\} [1-9]'; then
      echo "== $(grep -E "usdt: [1-9][0-9]* probes attached in /proc/$worker_pid/" "$logs/agent.log" | head -n 1)"
      return
    fi
    sleep 0.2
  done
  echo "demo: vigil-agent has not attached to the worker's (pid $worker_pid) USDT probes (see $logs/agent.log)" >&2
  # The one-shot run is a test: an agent that does not watch the worker fails it.
  if [[ "${VIGIL_DEMO_ONESHOT:-0}" == 1 ]]; then exit 1; fi
}

first_request() {
  echo "== a chat completion through the OpenAI API"
  local answer
  answer=$(curl -s "http://127.0.0.1:$worker_port/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "max_tokens": 32,
         "messages": [{"role": "user", "content": "What is the capital of France?"}]}')
  echo "$answer"
  grep -q '"choices"' <<<"$answer" || { echo "demo: the worker did not answer the request" >&2; exit 1; }
  echo "== the worker's metrics (excerpt)"
  curl -s "http://127.0.0.1:$worker_port/metrics" | grep -E '^vigil_worker_(requests_running|kv_cache_usage_ratio|generation_tokens_total|info)' || true
  if [[ $(id -u) -eq 0 ]]; then
    echo "== the agent's metrics (excerpt)"
    sleep 1  # the agent reads its maps at scrape time; give the last events a moment
    curl -sf "http://127.0.0.1:$agent_port/metrics" | grep -E '^vigil_agent_(probes_attached|events_total)' | head -n 12
  fi
}

where_to_look() {
  cat <<MSG

Vigil is running (logs in $logs):
  worker  OpenAI API   http://127.0.0.1:$worker_port/v1/chat/completions  (model SmolLM2-135M-Instruct.Q4_1.gguf)
          metrics      http://127.0.0.1:$worker_port/metrics   health /health  readiness /ready
  agent   metrics      http://127.0.0.1:$agent_port/metrics    health /healthz readiness /readyz
Try:    curl -N http://127.0.0.1:$worker_port/v1/completions -d '{"prompt": "Once upon a time", "max_tokens": 64, "stream": true}'
MSG
}


# --- Monitoring (alerts/, deploy/alertmanager): Prometheus with Vigil's rules and Alertmanager
# with its routing, on loopback next to the worker and agent. Receivers are stripped of their
# integrations (no pager is called from a demo): notifications show in Alertmanager's UI.
start_monitoring() {
  local dir="$logs/monitoring" py
  mkdir -p "$dir"
  py=$("$root/tests/alerts/python_env.sh")
  "$py" - "$root/deploy/alertmanager/alertmanager.yml" "$dir/alertmanager.yml" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["receivers"] = [{"name": r["name"]} for r in cfg["receivers"]]
for route in [cfg["route"]] + cfg["route"].get("routes", []):
    for key, value in (("group_wait", "5s"), ("group_interval", "30s")):
        if key in route or route is cfg["route"]:
            route[key] = value
yaml.safe_dump(cfg, open(sys.argv[2], "w"))
PY
  # The rules with runbook links to the runbooks this demo serves itself.
  jsonnet --tla-code overrides="{runbookURLPattern: 'http://127.0.0.1:$runbook_port/%s.md'}" "$root/alerts/rules.jsonnet" |
    "$py" "$root/alerts/to_yaml.py" "Vigil's rules for the demo (alerts/rules.jsonnet, runbooks on port $runbook_port)." \
    >"$dir/vigil.rules.yaml"
  python3 -m http.server "$runbook_port" --bind 127.0.0.1 --directory "$root/docs/runbooks" \
    >"$logs/runbooks.log" 2>&1 &
  pids+=($!)
  cat >"$dir/prometheus.yml" <<YAML
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [$dir/vigil.rules.yaml]
alerting:
  alertmanagers: [{static_configs: [{targets: ['127.0.0.1:$alertmanager_port']}]}]
scrape_configs:
  - job_name: vigil-worker
    static_configs: [{targets: ['127.0.0.1:$worker_port'], labels: {cluster: demo, namespace: demo, pod: vigil-worker-0}}]
  - job_name: vigil-agent
    static_configs: [{targets: ['127.0.0.1:$agent_port'], labels: {cluster: demo, node: $(hostname)}}]
YAML
  prometheus-alertmanager --config.file="$dir/alertmanager.yml" --storage.path="$dir/alertmanager-data" \
    --web.listen-address="127.0.0.1:$alertmanager_port" --cluster.listen-address= >"$logs/alertmanager.log" 2>&1 &
  pids+=($!)
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus-data" \
    --web.listen-address="127.0.0.1:$prometheus_port" >"$logs/prometheus.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$runbook_port/VigilWorkerDown.md" "the runbook server" "$logs/runbooks.log"
  wait_http "http://127.0.0.1:$alertmanager_port/-/ready" "Alertmanager" "$logs/alertmanager.log"
  wait_http "http://127.0.0.1:$prometheus_port/-/ready" "Prometheus" "$logs/prometheus.log"
  # Every runbook link Prometheus holds opens.
  local url
  for url in $(curl -s "http://127.0.0.1:$prometheus_port/api/v1/rules" | "$py" -c \
      'import json, sys; print("\n".join(r["annotations"]["runbook_url"] for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"] if r["type"] == "alerting"))'); do
    curl -sf -o /dev/null "$url" || { echo "demo: runbook link $url does not open" >&2; exit 1; }
  done
  wait_scraped vigil-worker
  if ((agent_running)); then wait_scraped vigil-agent; fi
}

wait_scraped() {  # job: Prometheus holds up == 1 for it
  for _ in $(seq 1 30); do
    curl -sG "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode "query=up{job=\"$1\"} == 1" |
      grep -q '"result":\[{' && return 0
    sleep 0.5
  done
  echo "demo: Prometheus does not scrape $1; its log ($logs/prometheus.log):" >&2
  tail -n 20 "$logs/prometheus.log" >&2
  exit 1
}

where_to_look_monitoring() {
  cat <<MSG
  Prometheus   http://127.0.0.1:$prometheus_port/alerts   (Vigil's rules; targets: /targets)
  Alertmanager http://127.0.0.1:$alertmanager_port/        (P1 -> vigil-page, P2 -> vigil-ticket)
  Runbooks     http://127.0.0.1:$runbook_port/               (each alert's runbook_url links here)
  Dashboards   dashboards/generated/*.json for Grafana (data source: http://127.0.0.1:$prometheus_port); previews in docs/dashboards/
MSG
}

refuse_taken_ports
start_worker
start_agent
start_monitoring
first_request
where_to_look
where_to_look_monitoring
echo "Ctrl-C stops everything."
if [[ "${VIGIL_DEMO_ONESHOT:-0}" == 1 ]]; then exit 0; fi
wait "${pids[0]}"
