#!/usr/bin/env bash
# `generate --backend cuda` and `bench --backend cuda` on a host without a GPU: exit 1 with one
# line on stderr naming what is missing (the driver, a device, or a CUDA build), nothing on stdout.
#   verbs_cuda_missing.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
if [[ -e /dev/nvidia0 ]]; then
  echo "this host has a GPU: the CUDA backend would start (device_check.sh covers it)"
  exit 77  # CTest SKIP_RETURN_CODE: reported as skipped, never as passed
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
if "$bin" --version | grep -q "cuda runtime"; then
  reason='(no CUDA driver \(libcuda\.so\.1 not found\)|no usable CUDA device): cudaGetDeviceCount: cuda[A-Za-z]+ \(.+\)'
else
  reason='this vigil-worker was built without the CUDA backend \(.+\)'
fi

check() {  # VERB ARGS...: exit 1, stdout empty, stderr exactly "vigil-worker VERB: --backend cuda: REASON"
  local verb=$1 rc
  set +e
  timeout 60 "$bin" "$@" --backend cuda >"$dir/out" 2>"$dir/err"; rc=$?
  set -e
  cat "$dir/err"
  [[ $rc -eq 1 ]] || { echo "$verb --backend cuda exited $rc, expected 1"; exit 1; }
  [[ ! -s "$dir/out" ]] || { echo "$verb --backend cuda wrote to stdout:"; cat "$dir/out"; exit 1; }
  [[ $(wc -l <"$dir/err") -eq 1 ]] || { echo "$verb --backend cuda: expected one line on stderr"; exit 1; }
  grep -Eq "^vigil-worker $verb: --backend cuda: $reason\$" "$dir/err" ||
    { echo "$verb --backend cuda: the line does not name what is missing"; exit 1; }
}
check generate -m "$model" -p "Hello" -n 4 -t 1
check bench -m "$model" -p 8 -n 4 -s 2 -r 1 -t 1
echo "generate and bench --backend cuda without a GPU: exit 1 with one line naming what is missing"
