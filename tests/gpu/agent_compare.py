#!/usr/bin/env python3
# vigil-agent on the real libcuda.so.1 against the CUDA backend's own counters: for graphs on,
# graphs off and the VMM memory backend, the agent's per-process allocation and graph-launch
# counts must equal the worker's allocator segment allocations and graph replays.
#   agent_compare.py BUILD_DIR AGENT_BINARY MODEL OUT_DIR   (root; run by device_check.sh)
import json
import os
import subprocess
import sys
import time

from vigil_harness.agent import Agent, declared_total, mapped_path, total, wait_attached
from vigil_harness.fail import fail, require_root

RUNS = [('graphs_on', ['--graphs', 'on']), ('graphs_off', ['--graphs', 'off']), ('vmm', ['--graphs', 'on', '--vmm'])]


def run_one(agent, bench, model, args):
    w = subprocess.Popen([bench, model, 'bench', '--handshake'] + args, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if not w.stdout.readline().startswith('ready'):
        fail("bench did not start")
    wait_attached(agent, 'cuda', mapped_path(w.pid, 'libcuda.so'))
    w.stdin.write('\n')
    w.stdin.flush()
    text = ''
    while True:
        line = w.stdout.readline()
        if not line:
            fail("bench exited before its counters: " + text)
        text += line
        try:
            worker = json.loads(text)
            break
        except json.JSONDecodeError:
            continue
    time.sleep(1.0)  # two agent poll intervals
    s = agent.scrape()
    agent_side = {
        # Per-process series exist from the process's first call; the launch failures only from the
        # first failure (its launches carry the pid), so that family need only be declared.
        'allocations': total(s, 'gpu_memory_allocations_total', require=True, pid=w.pid),
        'graph_launches': total(s, 'cuda_graph_launches_total', require=True, pid=w.pid),
        'graph_launch_failures': declared_total(s, 'cuda_graph_launch_failures_total', pid=w.pid),
        'capture_allocations': total(s, 'cuda_stream_capture_allocations_total', require=True, pid=w.pid),
    }
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=30)
    return worker, agent_side


def main():
    require_root()
    build, agent_bin, model, out = sys.argv[1:5]
    bench = os.path.join(build, 'tests', 'gpu', 'cuda_generate')
    results, ok = {}, True
    with Agent(agent_bin, 'probes: {tcp: false, nccl: false}\n') as agent:
        for name, args in RUNS:
            worker, agent_side = run_one(agent, bench, model, args)
            checks = {
                'allocations': (agent_side['allocations'], worker['allocator']['segment_allocs']),
                'graph_launches': (agent_side['graph_launches'], worker['graphs']['launches']),
                'graph_launch_failures': (agent_side['graph_launch_failures'], worker['graphs']['launch_failures']),
                'capture_allocations': (agent_side['capture_allocations'], 0),
            }
            for k, (got, want) in checks.items():
                good = got == want
                ok &= good
                print('%-10s %-22s agent %-8g worker %-8g %s' % (name, k, got, want, 'ok' if good else 'MISMATCH'))
            results[name] = {'worker': worker, 'agent': agent_side, 'equal': {k: g == w for k, (g, w) in checks.items()}}
    with open(os.path.join(out, 'agent_compare.json'), 'w') as f:
        json.dump(results, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
