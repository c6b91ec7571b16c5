#!/usr/bin/env bash
# The GPU path's one device run (issue 8): build with CUDA, cross-backend op tests, greedy
# generation CPU vs CUDA (graphs off and on), prefill/decode benchmarks with graphs on and off,
# `vigil-worker serve` on the CUDA backend under 1 and 16 streams (graphs on and off, its graph
# counters checked), and the agent on the real libcuda compared with the worker's own counters
# and with the CUDA truth workload's record (tests/e2e/agent/cuda_real_driver.sh).
# Results go to $OUT (at most 8 files). Each step has a timeout; a failed step is recorded and the
# script goes on, then exits 1 naming every failed step. Budget: under 8 minutes on 16 cores.
#   OUT=/some/dir tests/gpu/device_check.sh [MODEL.gguf]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH="$root/pylib"  # vigil_harness, for the agent and worker checks
out=${OUT:?set OUT to the results folder}
model=${1:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
build=$root/build/gpu
agent_build=$root/build/gpu-agent
log=$out/device_check.log
summary=$out/summary.txt
: >"$log"
: >"$summary"
failed=()

# step NAME TIMEOUT_S CMD...: runs CMD with a timeout, output to the log; records ok/FAIL.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc=0
  echo "=== $name (limit ${limit}s)" >>"$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1 || rc=$?
  if ((rc == 0)); then
    echo "ok    $name $((SECONDS - t0))s" >>"$summary"
  else
    echo "FAIL  $name rc=$rc $((SECONDS - t0))s" >>"$summary"
    failed+=("$name")
  fi
  return 0
}

step gpu_present 30 nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$summary" 2>&1 || true

# Two builds, so that a machine without the BPF toolchain still runs every CUDA step.
step configure 120 cmake -S "$root" -B "$build" -DVIGIL_CUDA=ON -DVIGIL_BUILD_AGENT=OFF -DCMAKE_BUILD_TYPE=Release
step build 300 cmake --build "$build" -j 16 --target cuda_backend_ops_test cuda_generate vigil-worker
step configure_agent 120 cmake -S "$root" -B "$agent_build" -DVIGIL_CUDA=OFF -DVIGIL_BUILD_AGENT=ON -DCMAKE_BUILD_TYPE=Release
step build_agent 240 cmake --build "$agent_build" -j 16 --target vigil-agent cuda_workload

# The agent's CUDA truth test on the real driver: real failures in every family it compares.
step agent_cuda_real_driver 120 "$root/tests/e2e/agent/cuda_real_driver.sh" "$agent_build"

step ops_test 120 "$build/tests/gpu/cuda_backend_ops_test" --gtest_output="xml:$out/ops_test.xml"

if [[ -f $model ]]; then
  step generate_check 180 bash -c "'$build/tests/gpu/cuda_generate' '$model' check >'$out/check.json'"
  step bench_graphs_on 120 bash -c "'$build/tests/gpu/cuda_generate' '$model' bench --graphs on >'$out/bench_graphs_on.json'"
  step bench_graphs_off 120 bash -c "'$build/tests/gpu/cuda_generate' '$model' bench --graphs off >'$out/bench_graphs_off.json'"
  step bench_cublas_vmm 120 bash -c "'$build/tests/gpu/cuda_generate' '$model' bench --matmul cublas --vmm >'$out/bench_cublas_vmm.json'"
  # The server on the CUDA backend: closed-loop streams, then its own graph counters.
  # Its /metrics stay outside $OUT (8 files come back at most); the check prints what it read.
  prom=$(mktemp -d)
  for graphs in on off; do
    mkdir -p "$prom/$graphs"
    step "serve_streams_graphs_$graphs" 150 env VIGIL_WORKER="$build/worker/vigil-worker" VIGIL_BENCH_MODEL="$model" python3 "$root/bench/load.py" \
      streams --streams 1,16 --seconds 15 --backend cuda --graphs "$graphs" --metrics-dir "$prom/$graphs"
  done
  step serve_graph_counters 10 python3 - "$prom" <<'PY'
import re, sys
def value(path, series):
    try:
        text = open(path).read()
    except OSError:
        return None
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None
on, off = (f"{sys.argv[1]}/{g}/vigil-cuda-16streams.prom" for g in ("on", "off"))
launches = value(on, "vigil_worker_cuda_graph_launches_total")
disabled = value(off, 'vigil_worker_cuda_graph_eager_steps_total{reason="disabled"}')
print(f"graphs on: {launches} launches; graphs off: {disabled} eager steps (disabled)")
sys.exit(0 if launches and disabled and value(off, "vigil_worker_cuda_graph_launches_total") == 0 else 1)
PY
  # The agent watches a bench run that lingers so its series can be scraped while it lives.
  step agent_vs_worker 180 env PYTHONUNBUFFERED=1 VIGIL_PROMTOOL_OPTIONAL=1 python3 "$root/tests/gpu/agent_compare.py" "$build" "$agent_build/agent/vigil-agent" "$model" "$out"
else
  echo "FAIL  model missing at $model (see docs/gpu.md: the model is carried in two parts)" >>"$summary"
  failed+=(model)
fi

cat "$summary"
if ((${#failed[@]})); then
  echo "device_check: FAILED steps: ${failed[*]}"
  exit 1
fi
echo "device_check: all steps passed"
