#!/usr/bin/env bash
# Creates .venv-ref with llama-cpp-python built from source: the llama.cpp reference that
# scripts/gen_reference.py turns into tests/fixtures/, and the peer of the benchmarks in bench/.
# Idempotent; tests never need it.
set -euo pipefail

VERSION=0.3.36
UNICODEDATA2=15.1.0  # llama.cpp's unicode-data.cpp is Unicode 15.1 (scripts/gen_unicode_tables.py)
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-ref"

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi

if "$venv/bin/python" -c "import sys, llama_cpp, llama_cpp.server, unicodedata2
sys.exit(llama_cpp.__version__ != '$VERSION' or unicodedata2.unidata_version != '$UNICODEDATA2')" 2>/dev/null; then
  echo "setup_reference: llama-cpp-python $VERSION and unicodedata2 $UNICODEDATA2 already in $venv"
  exit 0
fi

# --no-binary: the reference must be llama.cpp compiled here, not a wheel built elsewhere.
# [server]: its OpenAI-compatible server is the peer of bench/load.py's serving comparison.
"$venv/bin/pip" install --no-binary llama-cpp-python "llama-cpp-python[server]==$VERSION" "unicodedata2==$UNICODEDATA2"
"$venv/bin/python" -c "import llama_cpp; print('setup_reference: llama-cpp-python', llama_cpp.__version__)"
