#!/usr/bin/env bash
# `generate --backend cuda` and `serve` (backend.kind: cuda) with NVIDIA's real driver library
# present and no GPU: Debian's libcuda1 535.309.01 (scripts/fetch_nvidia_libs.py), in a private
# /dev (as root the real cuInit creates /dev/nvidiactl). Driver 535 supports CUDA 12.2 and this
# build's runtime is CUDA 13: both exit 1 with one line naming the two versions and the runtime's
# own error, the version read from the driver itself (cudaDriverGetVersion asks libcuda).
#   cuda_real_driver.sh VIGIL_WORKER MODEL FETCH_NVIDIA_LIBS
set -euo pipefail
bin=$1 model=$2 fetch=$3
[[ $(id -u) -eq 0 ]] || { echo "needs root (a private /dev)"; exit 1; }
"$bin" --version | grep -q "cuda runtime" || { echo "this vigil-worker has no CUDA backend"; exit 1; }
libs=$("$fetch" --verify-only) || { echo "the real NVIDIA libraries are not in place (the nvidia_libs test fetches them)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Only the driver: the runtime, cuBLAS and NCCL stay the build's own.
mkdir "$dir/driver"
ln -s "$(readlink -f "$libs/libcuda.so.1")" "$dir/driver/libcuda.so.1"
printf 'backend:\n  kind: cuda\n  cuda:\n    graphs: false\nserver:\n  port: 0\n' >"$dir/cuda.yaml"
want='the NVIDIA driver is older than this build.s CUDA runtime \(the driver supports CUDA 12\.2, the runtime is CUDA [0-9]+\.[0-9]+; update the driver\): cudaGetDeviceCount: cudaErrorInsufficientDriver \(.+\)'

check() {  # PREFIX ARGS...: exit 1 with the line "PREFIX: " + want on stderr
  local prefix=$1 rc
  shift
  set +e
  timeout 60 unshare -m sh -c 'mount -t tmpfs vigil-no-dev /dev && exec "$@"' sh \
    env LD_LIBRARY_PATH="$dir/driver" "$bin" "$@" >"$dir/out" 2>"$dir/err"; rc=$?
  set -e
  cat "$dir/err"
  [[ $rc -eq 1 ]] || { echo "$prefix: exited $rc, expected 1"; exit 1; }
  grep -Eq "^$prefix: $want\$" "$dir/err" || { echo "$prefix: the line does not name the driver and runtime versions"; exit 1; }
}
check "vigil-worker generate: --backend cuda" generate -m "$model" -p "Hello" -n 4 -t 1 --backend cuda
check "vigil-worker serve: backend.kind: cuda" serve -m "$model" --config "$dir/cuda.yaml"
echo "generate and serve on the real driver 535 without a GPU: exit 1 naming CUDA 12.2 against the runtime's 13"
