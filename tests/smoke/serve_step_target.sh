#!/usr/bin/env bash
# `serve` with a step latency target no step can meet (1 ms: a decode step reads ~100 MB of
# weights): it says so at start, naming the target and the decode step it measured, and
# /metrics shows the target and vigil_worker_step_latency_target_attainable 0. With `auto` (five
# decode steps of the running batch, at most 100 ms) the target on /metrics is the learned one,
# above 0, at most 100 ms and attainable, and so it is with no target in the config (auto is the
# default); with `off`, 0: the ITL alert (alerts/alerts.libsonnet) compares streams with that
# series and ignores a worker where it is 0.
#   serve_step_target.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
# shellcheck source=tests/smoke/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

# Starts the worker with engine.step_latency_target $1 (none: the default); sets url, leaves its
# stderr in $dir/err.
serve() {
  printf 'engine:\n  threads: 2\n' >"$dir/target.yaml"
  [[ -z ${1:-} ]] || printf '  step_latency_target: %s\n' "$1" >>"$dir/target.yaml"
  serve_start "$dir/err" "$bin" serve -m "$model" --config "$dir/target.yaml" --port 0
  cat "$dir/err"
}

serve 1ms
grep -q "warning: engine.step_latency_target 1 ms is below a decode-only step" "$dir/err" ||
  { echo "no warning naming the unattainable target"; exit 1; }
metrics=$(curl -sf "$url/metrics")
grep -qx "vigil_worker_step_latency_target_seconds 0.001" <<<"$metrics" || { echo "target not on /metrics"; exit 1; }
grep -qx "vigil_worker_step_latency_target_attainable 0" <<<"$metrics" || { echo "attainable is not 0"; exit 1; }
echo "an unattainable step latency target is reported at start and on /metrics"
serve_stop

for auto in auto ""; do
  serve "$auto"
  grep -q "step latency target 5x the decode step of the batch, at most 100 ms" "$dir/err" ||
    { echo "no start line for auto (${auto:-the default})"; exit 1; }
  grep -q "below a decode-only step" "$dir/err" && { echo "auto called unattainable"; exit 1; }
  curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "The sky is", "max_tokens": 8, "temperature": 0}' >/dev/null || { echo "completion failed"; exit 1; }
  metrics=$(curl -sf "$url/metrics")
  target=$(awk '$1 == "vigil_worker_step_latency_target_seconds" {print $2}' <<<"$metrics")
  awk -v t="${target:-0}" 'BEGIN {exit !(t > 0 && t <= 0.1)}' ||
    { echo "auto: vigil_worker_step_latency_target_seconds is '${target}', not a learned step"; exit 1; }
  grep -qx "vigil_worker_step_latency_target_attainable 1" <<<"$metrics" || { echo "auto: attainable is not 1"; exit 1; }
  overrun=$(awk '$1 == "vigil_worker_step_cost_seconds{part=\"overrun\"}" {print $2}' <<<"$metrics")
  awk -v r="${overrun:--1}" 'BEGIN {exit !(r >= 0 && r < 1)}' ||
    { echo "auto: vigil_worker_step_cost_seconds{part=\"overrun\"} is '${overrun}', not a learned margin"; exit 1; }
  echo "auto (${auto:-the default}): the learned target ${target} s is on /metrics, attainable"
  serve_stop
done

serve off
grep -q "step latency target" "$dir/err" && { echo "off: a start line names a target"; exit 1; }
metrics=$(curl -sf "$url/metrics")
grep -qx "vigil_worker_step_latency_target_seconds 0" <<<"$metrics" || { echo "off: the target on /metrics is not 0"; exit 1; }
serve_stop
echo "off: no target, 0 on /metrics"
