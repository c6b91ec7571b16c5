#!/usr/bin/env bash
# `serve` and its API key (#46 item 3): a set-but-empty VIGIL_API_KEY, or a key holding a newline
# (a Secret made with --from-file), is a start-up error naming the cause, not an open door or a key
# no request can match; the start line says whether /v1/* needs a key, and with one a request
# without it is refused (401) while /health is answered.
#   serve_api_key.sh VIGIL_WORKER MODEL
set -euo pipefail
bin=$1 model=$2
# shellcheck source=tests/smoke/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"

refused() {  # what, expected message part, then the environment assignment
  local what=$1 expect=$2
  shift 2
  set +e
  env "$@" "$bin" serve -m "$model" --port 0 >/dev/null 2>"$dir/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || { cat "$dir/err"; echo "FAIL: $what: serve exited $rc, expected 2"; exit 1; }
  grep -q "$expect" "$dir/err" || { cat "$dir/err"; echo "FAIL: $what: no '$expect' in the error"; exit 1; }
  echo "ok   $what: $(cat "$dir/err")"
}

refused "VIGIL_API_KEY set but empty" "set but empty" VIGIL_API_KEY=
refused "a key ending in a newline" "whitespace or a control byte" "VIGIL_API_KEY=s3cret
"

serve() { serve_start "$dir/err" env "$@" "$bin" serve -m "$model" --port 0; }  # the environment assignment

serve VIGIL_API_KEY=s3cret
grep -q "(/v1/\* needs the API key;" "$dir/err" || { cat "$dir/err"; echo "FAIL: the start line does not say a key is needed"; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models")
[[ $code == 401 ]] || { echo "FAIL: /v1/models without the key: $code"; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret' "$url/v1/models")
[[ $code == 200 ]] || { echo "FAIL: /v1/models with the key: $code"; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/health")
[[ $code == 200 ]] || { echo "FAIL: /health: $code"; exit 1; }
echo "ok   with a key: $(grep -o 'serving .*' "$dir/err" | head -1); 401 without it, 200 with it, /health 200"
serve_stop

serve -u VIGIL_API_KEY
grep -q "(/v1/\* open: no API key;" "$dir/err" || { cat "$dir/err"; echo "FAIL: the start line does not say /v1/* is open"; exit 1; }
echo "ok   without a key: the start line says /v1/* is open"
serve_stop
