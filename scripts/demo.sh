#!/usr/bin/env bash
# The main job: the worker with the model, the agent watching it, and where to look.
# Grows as the pieces land; today it runs what exists and says what does not yet.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/dev"
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"

echo "== vigil-agent: eBPF toolchain self-test (load, attach, one event, detach)"
"$build/agent/vigil-agent" --self-test

echo
echo "== vigil-worker: the model it will serve"
"$build/worker/vigil-worker" inspect "$model" | sed -n '1,6p;/^by type/,$p'
