#!/usr/bin/env bash
# Creates .venv-ref with llama-cpp-python built from source: the llama.cpp reference that
# scripts/gen_reference.py turns into tests/fixtures/, and the peer of the benchmarks in bench/;
# and .venv-ref/bin/llama-server, llama.cpp's own server built from the llama.cpp sources that
# release vendors, with the same flags: the serving peer with parallel slots and continuous
# batching (bench/load.py latency --peer llama-server, bench/stream_cost.py).
# Idempotent; tests never need it.
set -euo pipefail

VERSION=0.3.36
# The peer's CPU build, pinned so that a figure means the same on every machine: no -march=native
# (a native build on a VM that advertises AMX but does not grant it dies with "Illegal
# instruction"), AVX2 and AVX-512 with VNNI and BF16 on, AMX off.
GGML_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
UNICODEDATA2=15.1.0  # llama.cpp's unicode-data.cpp is Unicode 15.1 (scripts/gen_unicode_tables.py)
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-ref"

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi

flags_file="$venv/ggml-flags"
if [[ "$(cat "$flags_file" 2>/dev/null)" == "$GGML_FLAGS" ]] &&
   "$venv/bin/python" -c "import sys, llama_cpp, llama_cpp.server, unicodedata2
sys.exit(llama_cpp.__version__ != '$VERSION' or unicodedata2.unidata_version != '$UNICODEDATA2')" 2>/dev/null; then
  echo "setup_reference: llama-cpp-python $VERSION ($GGML_FLAGS) and unicodedata2 $UNICODEDATA2 already in $venv"
else
  # --no-binary: the reference must be llama.cpp compiled here, not a wheel built elsewhere.
  # [server]: its OpenAI-compatible server (one request at a time) is bench/load.py streams' peer.
  # --no-cache-dir: pip's cache may hold a wheel built on another CPU with other flags.
  CMAKE_ARGS="$GGML_FLAGS" "$venv/bin/pip" install --no-cache-dir --force-reinstall --no-binary llama-cpp-python \
    "llama-cpp-python[server]==$VERSION" "unicodedata2==$UNICODEDATA2"
  echo "$GGML_FLAGS" >"$flags_file"
  "$venv/bin/python" -c "import llama_cpp; print('setup_reference: llama-cpp-python', llama_cpp.__version__,
        llama_cpp.llama_print_system_info().decode())"
fi

# llama-server from the sdist of the same release (vendor/llama.cpp), so that both peers run the
# same llama.cpp. No web UI (it would be downloaded), no OpenSSL; a static build, nothing to load.
server_stamp="$venv/llama-server-build"
server_build="$VERSION $GGML_FLAGS"
if [[ -x "$venv/bin/llama-server" && "$(cat "$server_stamp" 2>/dev/null)" == "$server_build" ]]; then
  echo "setup_reference: llama-server of llama-cpp-python $VERSION ($GGML_FLAGS) already in $venv/bin"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/pip" download --no-cache-dir --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$VERSION"
tar -xzf "$work/llama_cpp_python-$VERSION.tar.gz" -C "$work"
# shellcheck disable=SC2086  # GGML_FLAGS is a list of arguments
cmake -S "$work/llama_cpp_python-$VERSION/vendor/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release $GGML_FLAGS \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF
cmake --build "$work/build" -j "$(nproc)" --target llama-server
install -m 0755 "$work/build/bin/llama-server" "$venv/bin/llama-server"
echo "$server_build" >"$server_stamp"
echo "setup_reference: llama-server of llama-cpp-python $VERSION in $venv/bin ($("$venv/bin/llama-server" --version 2>&1 | head -1))"
