#!/usr/bin/env bash
# The CUDA truth test on a GPU machine: the same workload and checks as agent_cuda_driver, with
# the real libcuda.so.1 (found through ldconfig) in place of the stand-in. Every failure family
# the test compares gets failures the real driver returns (1 PiB allocations, an exec update to
# another topology, a NULL graph, an allocation in a capture); the stand-in's injected ones do not
# happen here, and the workload records what each call returned, so every comparison still holds.
# Fails, saying why, where there is no GPU. tests/gpu/device_check.sh runs it.
#   tests/e2e/agent/cuda_real_driver.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: cuda_real_driver.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null || { echo "FAIL: no NVIDIA GPU here"; exit 1; }
lib=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
[[ -n $lib ]] || { echo "FAIL: the real libcuda.so.1 is not in the ldconfig cache"; exit 1; }
PYTHONPATH="$here/../../../pylib" VIGIL_CUDA_LIBDIR=$(dirname "$(readlink -f "$lib")") \
  python3 "$here/cuda_driver.py" "$build/agent/vigil-agent" "$build/tests/standins/cuda_workload"
