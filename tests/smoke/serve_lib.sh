# shellcheck shell=bash
# Sourced by the serve smoke tests (after set -euo pipefail): a scratch directory `dir`, a worker
# started in the background and waited for, stopped at the end whatever happens.
dir=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

# serve_start ERRFILE COMMAND...: runs COMMAND in the background, its stderr in ERRFILE, until the
# worker's start line; sets pid and url. Fails the test when the worker exits first or never says.
serve_start() {
  local err=$1
  shift
  "$@" 2>"$err" &
  pid=$!
  for _ in $(seq 1 120); do
    grep -q "serving .* on http://" "$err" && break
    kill -0 "$pid" 2>/dev/null || { cat "$err"; echo "FAIL: serve exited"; exit 1; }
    sleep 0.5
  done
  url=$(grep -o "http://[0-9.]*:[0-9]*" "$err" | head -1)
  [[ -n $url ]] || { cat "$err"; echo "FAIL: no serving line"; exit 1; }
}

serve_stop() { kill "$pid"; wait "$pid" || true; pid=; }
