#!/usr/bin/env bash
# Draws every dashboard's panels, each as its type (stat, table, time series, heatmap, in its
# unit: pylib/vigil_harness/dashboard_queries.py), into docs/dashboards/*.png so readers can look
# before they deploy. The node, worker and agent dashboards come from the end-to-end alerting run
# (root, a build with the agent and the stand-in libcuda); the fleet overview from a 100-node
# fleet simulation in 4 clusters with its faults (bench/fleet/run.sh, no root), since one node
# shows no fleet.
# usage: dashboards/render_docs.sh [BUILD_DIR]   (default build/dev)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/dev}" && pwd)
py=$("$root/tests/alerts/python_env.sh")
export PYTHONPATH="$root/pylib"  # vigil_harness, for alerting_e2e.py
"$root/dashboards/generate.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" "$root/tests/e2e/alerting/alerting_e2e.py" \
  "$build/agent/vigil-agent" "$build/worker/vigil-worker" "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  "$build/tests/standins/fake_cuda/libcuda.so.1" "$build/tests/standins/tcp_bulk" \
  --dashboards "$root/dashboards/generated" --render-to "$tmp"
for png in "$tmp"/*.png; do
  [[ $(basename "$png") == vigil-fleet.png ]] || cp "$png" "$root/docs/dashboards/"
done
"$root/bench/fleet/run.sh" --nodes 100 --clusters 4 --interval 5 --dashboards-png "$root/docs/dashboards"
