#!/usr/bin/env bash
# The CUDA truth test on a GPU machine: the same workload and checks as agent_cuda_driver, with
# the real libcuda.so.1 (found through ldconfig) in place of the stand-in. Injected failures do
# not happen on the real driver; the workload records what each call returned, so every
# comparison still holds. Fails, saying why, where there is no GPU.
#   tests/e2e/agent/cuda_real_driver.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: cuda_real_driver.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null || { echo "FAIL: no NVIDIA GPU here"; exit 1; }
lib=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
[[ -n $lib ]] || { echo "FAIL: the real libcuda.so.1 is not in the ldconfig cache"; exit 1; }
VIGIL_CUDA_LIBDIR=$(dirname "$(readlink -f "$lib")") \
  python3 "$here/cuda_driver.py" "$build/agent/vigil-agent" "$build/tests/agent/cuda_workload"
