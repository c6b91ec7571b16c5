#!/usr/bin/env bash
# `serve` with a step latency target no step can meet (1 ms: a decode step reads ~100 MB of
# weights): it says so at start, naming the target and the decode step it measured, and
# /metrics shows the target and vigil_worker_step_latency_target_attainable 0.
#   serve_step_target.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
dir=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
printf 'engine:\n  step_latency_target: 1ms\n' >"$dir/target.yaml"
"$bin" serve -m "$model" --config "$dir/target.yaml" --port 0 2>"$dir/err" &
pid=$!
for _ in $(seq 1 120); do
  grep -q "serving .* on http://" "$dir/err" && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/err"; echo "serve exited"; exit 1; }
  sleep 0.5
done
cat "$dir/err"
url=$(grep -o "http://[0-9.]*:[0-9]*" "$dir/err" | head -1)
[[ -n $url ]] || { echo "no serving line"; exit 1; }
grep -q "warning: engine.step_latency_target 1 ms is below a decode-only step" "$dir/err" ||
  { echo "no warning naming the unattainable target"; exit 1; }
metrics=$(curl -sf "$url/metrics")
grep -qx "vigil_worker_step_latency_target_seconds 0.001" <<<"$metrics" || { echo "target not on /metrics"; exit 1; }
grep -qx "vigil_worker_step_latency_target_attainable 0" <<<"$metrics" || { echo "attainable is not 0"; exit 1; }
echo "an unattainable step latency target is reported at start and on /metrics"
