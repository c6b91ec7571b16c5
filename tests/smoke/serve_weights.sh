#!/usr/bin/env bash
# `serve` says where the weights sit (#44 item 1): by default a copy in transparent huge pages,
# and the start line, vigil_worker_info{weights} and vigil_worker_weights_pmd_mapped_bytes say so;
# the count is checked against the kernel's own total for the process (/proc/PID/smaps_rollup,
# which the worker does not read). `backend.weights: page_cache` maps the file instead; a bad
# value stops the worker naming the key.
#   serve_weights.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
# shellcheck source=tests/smoke/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"
metric() { awk -v n="$1" '$1 == n {print $2}' <<<"$metrics"; }
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "absent")

serve_start "$dir/err" "$bin" serve -m "$model" --port 0
line=$(grep "serving .* on http://" "$dir/err")
metrics=$(curl -sf "$url/metrics")
pmd=$(metric vigil_worker_weights_pmd_mapped_bytes)
size=$(metric vigil_worker_weights_bytes)
[[ $size == "$(stat -c %s "$model")" ]] || { echo "FAIL: weights_bytes $size is not the file's size"; exit 1; }
if [[ $thp == *"[never]"* || $thp == absent ]]; then
  # No huge pages on this kernel: the fallback, and its reason, are what there is to check.
  grep -q "weights in page cache (.*no huge pages: transparent huge pages are" <<<"$line" ||
    { echo "FAIL: THP off ($thp) and the start line does not say so: $line"; exit 1; }
  echo "ok   THP off here: the worker fell back to the page cache and said why"
  serve_stop
  exit 0
fi
grep -q "weights in huge pages ([0-9.]* of [0-9.]* MB PMD-mapped)" <<<"$line" ||
  { echo "FAIL: the start line does not say huge pages: $line"; exit 1; }
grep -q 'vigil_worker_info{.*weights="huge_pages"} 1' <<<"$metrics" || { echo "FAIL: vigil_worker_info has no weights=huge_pages"; exit 1; }
anon_huge=$(awk '$1 == "AnonHugePages:" {print $2 * 1024}' "/proc/$pid/smaps_rollup")
echo "PMD-mapped: worker says $pmd of $size bytes, kernel's AnonHugePages for the process $anon_huge"
(( pmd >= size / 2 )) || { echo "FAIL: fewer than half the weights in huge pages"; exit 1; }
(( anon_huge >= pmd )) || { echo "FAIL: the kernel counts fewer huge-page bytes than the worker claims"; exit 1; }
serve_stop

printf 'backend:\n  weights: page_cache\n' >"$dir/page_cache.yaml"
serve_start "$dir/err" "$bin" serve -m "$model" --config "$dir/page_cache.yaml" --port 0
grep -q "weights in page cache (" "$dir/err" || { cat "$dir/err"; echo "FAIL: page_cache not in the start line"; exit 1; }
metrics=$(curl -sf "$url/metrics")
grep -q 'vigil_worker_info{.*weights="page_cache"} 1' <<<"$metrics" || { echo "FAIL: no weights=page_cache"; exit 1; }
echo "ok   backend.weights: page_cache maps the file"
serve_stop

printf 'backend:\n  weights: hugepages\n' >"$dir/bad.yaml"
set +e
"$bin" serve -m "$model" --config "$dir/bad.yaml" --port 0 2>"$dir/err"
rc=$?
set -e
if [[ $rc != 2 ]] || ! grep -q "backend.weights.*expected huge_pages or page_cache" "$dir/err"; then
  cat "$dir/err"; echo "FAIL: a bad backend.weights exited $rc"; exit 1
fi
echo "ok   a bad backend.weights is refused: $(cat "$dir/err")"
