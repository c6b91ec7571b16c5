#!/usr/bin/env bash
# Runs the fleet benchmark (bench/fleet/run.py): simulated nodes through two vmagent shards,
# VictoriaMetrics, vmalert and Alertmanager, with Prometheus as the baseline; prints the table.
# usage: bench/fleet/run.sh [--nodes 1000] [--gpus 8] [--clusters K] [--interval 15] [--table-out FILE] [--dashboards-png DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for bin in prometheus prometheus-alertmanager victoria-metrics vmagent vmalert jsonnet; do
  command -v "$bin" >/dev/null || { echo "run.sh: $bin missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
py=$("$here/../../tests/alerts/python_env.sh")
VIGIL_PYTHON="$py" exec "$here/../run.sh" "$here/run.py" "$@"
