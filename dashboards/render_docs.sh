#!/usr/bin/env bash
# Draws every dashboard's panels, as queried from the end-to-end alerting run, into
# docs/dashboards/*.png so readers can look before they deploy. Runs the e2e test (root, a
# build with the agent and the stand-in libcuda).
# usage: dashboards/render_docs.sh [BUILD_DIR]   (default build/dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/dev}" && pwd)
py=$("$root/tests/alerts/python_env.sh")
"$root/dashboards/generate.sh"
"$py" "$root/tests/e2e/alerting/alerting_e2e.py" \
  "$build/agent/vigil-agent" "$build/worker/vigil-worker" "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$build/tests/agent/fake_cuda/libcuda.so.1" "$build/tests/agent/tcp_bulk" \
  --dashboards "$root/dashboards/generated" --render-to "$root/docs/dashboards"
