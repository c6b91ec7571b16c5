#!/usr/bin/env bash
# Runs the fleet history benchmark (bench/fleet/history.py): hours of simulated nodes backfilled
# into Prometheus (promtool) and VictoriaMetrics (import, vmalert -replay), merged, and every
# dashboard panel queried over 1 h, 6 h and 24 h; prints the table.
# usage: bench/fleet/history.sh [--nodes 40] [--gpus 8] [--hours 24] [--interval 15] [--table-out FILE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for bin in prometheus promtool victoria-metrics vmalert jsonnet; do
  command -v "$bin" >/dev/null || { echo "history.sh: $bin missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
py=$("$here/../../tests/alerts/python_env.sh")
VIGIL_PYTHON="$py" exec "$here/../run.sh" "$here/history.py" "$@"
