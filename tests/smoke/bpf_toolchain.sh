#!/usr/bin/env bash
# Smoke test: the agent loads its smoke program from the skeleton, attaches it to a tracepoint,
# sees one event, detaches, and leaves nothing of ours loaded in the kernel.
set -euo pipefail
agent=$1
[[ $(id -u) -eq 0 ]] || { echo "needs root (CAP_BPF + CAP_PERFMON)"; exit 1; }
"$agent" --self-test
if bpftool prog show | grep -q handle_getppid; then
  echo "program handle_getppid still loaded after the agent exited"; exit 1
fi
if bpftool link show | grep -q -i getppid; then
  echo "a link to getppid is still attached after the agent exited"; exit 1
fi
echo "nothing of ours left in bpftool prog / link"
