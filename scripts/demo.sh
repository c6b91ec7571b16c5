#!/usr/bin/env bash
# The main job: vigil-worker serving the model on loopback, vigil-agent watching it, and where
# to look. Runs until Ctrl-C; VIGIL_DEMO_ONESHOT=1 checks everything once and exits (tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/dev"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
worker_port=${VIGIL_WORKER_PORT:-8080}
agent_port=${VIGIL_AGENT_PORT:-9435}
logs=$(mktemp -d /tmp/vigil-demo.XXXXXX)
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 0' INT TERM

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
    echo "demo: vigil-agent needs root (CAP_BPF, CAP_PERFMON); skipping it" >&2
    return
  fi
  "$build/agent/vigil-agent" --listen "127.0.0.1:$agent_port" >"$logs/agent.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$agent_port/readyz" "vigil-agent" "$logs/agent.log"
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
    sleep 2  # one discovery round: the agent attaches to the worker's USDT probes
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
Ctrl-C stops everything.
MSG
}

start_worker
start_agent
first_request
where_to_look
if [[ "${VIGIL_DEMO_ONESHOT:-0}" == 1 ]]; then exit 0; fi
wait "${pids[0]}"
