#!/usr/bin/env bash
# Runs one CTest test N times in a row on a loaded machine and says how it went: a test that fails
# once in N is a failure to explain, not to retry (#47).
#
#   tests/stress.sh [--beside-work] NAME N
#
# NAME is the test's exact CTest name in build/dev (tests/stress.sh agent_usdt_churn 30). While it
# runs, a CPU burner spins on one core (the machine has other work). With --beside-work the work of
# a real node runs beside it as well: a vigil-worker serving the model, a second vigil-agent with
# its pins under the default root (/sys/fs/bpf/vigil) watching everything, and a CUDA stand-in
# workload holding allocations; a test that asserts about the whole host instead of its own
# processes, files and pins fails then. Each failing run's output is kept; the last line is the
# summary: passes, failures, the slowest run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/dev"
beside=0
if [[ ${1:-} == --beside-work ]]; then
  beside=1
  shift
fi
if [[ $# -ne 2 || ! $2 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: tests/stress.sh [--beside-work] NAME N" >&2
  exit 2
fi
name=$1 runs=$2
# The list may hold its fixtures' setup tests too (nvidia_libs before the real-library tests).
# Listed first, then matched: with pipefail, 'grep -q' leaving early would fail ctest with SIGPIPE.
listed=$(ctest --test-dir "$build" -N -R "^${name}\$")
if ! grep -Eq "Test +#[0-9]+: ${name}\$" <<<"$listed"; then
  echo "stress: no test named '$name' in $build (ctest --test-dir $build -N lists them)" >&2
  exit 2
fi
logs=$(mktemp -d "/tmp/vigil-stress-$name.XXXXXX")
pids=()
agent_pins=0

cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((agent_pins)); then "$build/agent/vigil-agent" --cleanup >>"$logs/agent.log" 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_http() {  # URL, what, log
  for _ in $(seq 1 150); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "stress: $2 did not come up; its log: $3" >&2
  exit 1
}

# One core stays busy for the whole run (the lowest priority would hide nothing).
(while :; do :; done) &
pids+=($!)

if ((beside)); then
  port=$(free_port)
  "$build/worker/vigil-worker" serve -m "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" --host 127.0.0.1 \
    --port "$port" >"$logs/worker.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$port/ready" "the serving vigil-worker" "$logs/worker.log"
  # A client keeps it generating, so its USDT probes fire and its TCP sockets carry traffic.
  (while :; do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
      -d '{"prompt":"Tell me about the sea","max_tokens":32,"stream":true}' || sleep 1
  done) &
  pids+=($!)
  # Fed from a FIFO this script holds open (a line starts it; its exit ends it): a pipeline from
  # `sleep infinity` outlived the run, and waiting for it hung the cleanup, leaving the pins.
  mkfifo "$logs/hold"
  "$build/tests/standins/cuda_workload" hold 64 <"$logs/hold" >"$logs/cuda_workload.log" 2>&1 &
  pids+=($!)
  exec 9>"$logs/hold"
  echo >&9
  if [[ $(id -u) -eq 0 ]]; then
    agent_port=$(free_port)
    "$build/agent/vigil-agent" --listen "127.0.0.1:$agent_port" >"$logs/agent.log" 2>&1 &
    pids+=($!)
    agent_pins=1
    wait_http "http://127.0.0.1:$agent_port/readyz" "the second vigil-agent" "$logs/agent.log"
  else
    echo "stress: not root: no second agent beside the test" >&2
  fi
  echo "stress: beside the test: vigil-worker on port $port, cuda_workload holding 64 allocations$( ((agent_pins)) && echo ", vigil-agent on port $agent_port with pins under /sys/fs/bpf/vigil")"
fi

passes=0 failures=0 slowest=0 slowest_run=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  if ctest --test-dir "$build" -R "^${name}\$" --output-on-failure >"$logs/run-$i.log" 2>&1; then
    result=pass
    passes=$((passes + 1))
    rm -f "$logs/run-$i.log"
  else
    result="FAIL (output: $logs/run-$i.log)"
    failures=$((failures + 1))
  fi
  took=$(echo "$(date +%s.%N) - $start" | bc)
  if (($(echo "$took > $slowest" | bc))); then slowest=$took slowest_run=$i; fi
  printf 'stress: %s run %d/%d: %s in %.1f s\n' "$name" "$i" "$runs" "$result" "$took"
done
printf 'stress: %s: %d of %d passed, %d failed; slowest run %.1f s (run %d)%s\n' "$name" "$passes" "$runs" \
  "$failures" "$slowest" "$slowest_run" "$( ((beside)) && echo ', beside other work')"
((failures == 0))
