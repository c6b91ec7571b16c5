#!/usr/bin/env bash
# Creates (once) the Python environment of the alerting, dashboard, deploy and OpenAI-client tests under
# build/ops-venv, with the PyPI packages they need, and prints its python. Idempotent: a venv
# whose packages import is reused as is. Called by scripts/setup.sh and by the tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/build/ops-venv"
packages=(pyyaml==6.0.2 kubernetes-validate==1.37.0 matplotlib==3.10.7 helm-python-sdk==0.2.2 openai==2.8.1)
check='import yaml, kubernetes_validate, matplotlib, helm_python, openai'

if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "python_env: installing ${packages[*]} into $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "${packages[@]}" >&2
  "$venv/bin/python" -c "$check"
fi
echo "$venv/bin/python"
