#!/usr/bin/env bash
# `serve` with backend.kind: cuda on a host without a GPU: exit 1 before listening, naming the
# failing CUDA call (or the missing CUDA build); with --tp it is refused as a usage error (2).
#   serve_backend.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
if [[ -e /dev/nvidia0 ]]; then
  echo "this host has a GPU: the CUDA backend would start (device_check.sh covers it)"
  exit 77  # CTest SKIP_RETURN_CODE: reported as skipped, never as passed
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'backend:\n  kind: cuda\n  cuda:\n    graphs: false\n' >"$dir/cuda.yaml"

set +e
timeout 60 "$bin" serve -m "$model" --config "$dir/cuda.yaml" --port 0 2>"$dir/err"; rc=$?
set -e
cat "$dir/err"
[[ $rc -eq 1 ]] || { echo "serve on a missing GPU exited $rc, expected 1"; exit 1; }
grep -q "^vigil-worker serve: backend.kind: cuda: " "$dir/err" || { echo "no 'backend.kind: cuda:' error line"; exit 1; }
if "$bin" --version | grep -q "cuda runtime"; then
  grep -q "cudaGetDeviceCount" "$dir/err" || { echo "the failing CUDA call is not named"; exit 1; }
else
  grep -q "built without the CUDA backend" "$dir/err" || { echo "a build without CUDA does not say so"; exit 1; }
fi

set +e
timeout 60 "$bin" serve -m "$model" --config "$dir/cuda.yaml" --tp 2 --rank 0 --tp-store "$dir/store" 2>"$dir/err"; rc=$?
set -e
cat "$dir/err"
[[ $rc -eq 2 ]] || { echo "--tp with the cuda backend exited $rc, expected 2"; exit 1; }
grep -q "tensor parallelism runs on the CPU backend only" "$dir/err" || { echo "--tp refusal does not say why"; exit 1; }
echo "serve backend.kind: cuda without a GPU: refused at start with the reason"
