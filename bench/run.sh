#!/usr/bin/env bash
# Runs one benchmark script with pylib/ on PYTHONPATH (vigil_harness: the agent run and scraped,
# the monitoring stack, the worker's client, shared with the tests), in the python3 on PATH or
# $VIGIL_PYTHON (the ops venv for the fleet's, tests/alerts/python_env.sh).
# usage: [sudo] bench/run.sh bench/SCRIPT.py [ARGS...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$root/pylib${PYTHONPATH:+:$PYTHONPATH}"
exec "${VIGIL_PYTHON:-python3}" "$@"
