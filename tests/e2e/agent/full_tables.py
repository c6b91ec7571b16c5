#!/usr/bin/env python3
"""A neighbour that fills the agent's tables cannot fool it (#28 item 4). One stand-in CUDA process
holds 300,000 live allocations, more than the node-wide table of live allocations (262,144) has
room for; a second process allocates and frees afterwards. The second's numbers must equal its own
account exactly; the first's allocations past its cap are counted as untracked and left out of its
gauges, so once it frees everything its gauges are 0 (before: every allocation past a full table
was added to the live bytes and never taken back, the victim's included). Then three processes
together ask for more entries than the table has: the agent counts the refused inserts, and each
one's gauges still return to 0 when it frees everything.
usage: full_tables.py VIGIL_AGENT CUDA_WORKLOAD"""
import json
import subprocess
import sys
import time

from vigil_harness.agent import Agent, exit_workload, mapped_path, run_workload, total, wait_attached
from vigil_harness.fail import fail, require_root

LIVE_TABLE = 262144      # bpf/cuda.bpf.c, live
PER_PROCESS = 131072     # bpf/cuda_events.h, CUDA_LIVE_ENTRIES_PER_PROCESS
HOLD = 300000


def step(w):
    """One line to a `hold` workload, and the JSON it answers."""
    w.stdin.write('\n')
    w.stdin.flush()
    return json.loads(w.stdout.readline())


def gauges(agent, pid):
    s = agent.scrape()
    return (total(s, 'gpu_memory_driver_allocated_bytes', pid=pid), total(s, 'gpu_memory_allocations_total', pid=pid),
            total(s, 'gpu_memory_untracked_allocations_total', pid=pid), s)


def main():
    require_root()
    agent_bin, workload_bin = sys.argv[1], sys.argv[2]
    with Agent(agent_bin, 'probes: {tcp: false, nccl: false}\n') as agent:
        # 1. One process past the node's table, then a victim.
        big, truth = run_workload(agent, [workload_bin, 'hold', str(HOLD)], 'cuda', 'libcuda.so', timeout=30)
        victim, vt = run_workload(agent, [workload_bin, 'threads', '2', '20000'], 'cuda', 'libcuda.so')
        time.sleep(0.5)
        live, allocs, untracked, _ = gauges(agent, vt['pid'])
        print('victim pid %d: driver_allocated_bytes agent %d, workload %d; allocations agent %d, workload %d; '
              'untracked %d' % (vt['pid'], live, vt['live_bytes'], allocs, vt['allocs'], untracked))
        exit_workload(victim)
        if (live, allocs, untracked) != (vt['live_bytes'], vt['allocs'], 0):
            fail('the victim beside a process holding %d allocations is not counted exactly' % HOLD)
        live, allocs, untracked, _ = gauges(agent, truth['pid'])
        print('holder pid %d: %d allocations of 256 B held; agent: allocations %d, untracked %d, driver_allocated_bytes %d'
              % (truth['pid'], truth['allocs'], allocs, untracked, live))
        if allocs != truth['allocs'] or untracked != truth['allocs'] - PER_PROCESS or live != PER_PROCESS * 256:
            fail('the holder past its cap: expected %d allocations, %d untracked, %d bytes tracked'
                 % (truth['allocs'], truth['allocs'] - PER_PROCESS, PER_PROCESS * 256))
        freed = step(big)
        time.sleep(0.5)
        live, _, _, _ = gauges(agent, truth['pid'])
        print('holder freed %d: driver_allocated_bytes %d' % (freed['frees'], live))
        if freed['frees'] != truth['allocs'] or live != 0:
            fail('after freeing everything the holder still shows %d bytes live' % live)
        exit_workload(big)

        # 2. Three processes at their caps ask for more than the node's table holds.
        holders = []
        for _ in range(3):
            w = subprocess.Popen([workload_bin, 'hold', str(PER_PROCESS)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            if not w.stdout.readline().startswith('ready'):
                fail('holder did not start')
            wait_attached(agent, 'cuda', mapped_path(w.pid, 'libcuda.so'), 30)
            holders.append((w, step(w)))
        s = agent.scrape()
        refused = total(s, 'vigil_agent_table_full_total', require=True, set='cuda')
        untracked = sum(total(s, 'gpu_memory_untracked_allocations_total', pid=t['pid']) for _, t in holders)
        print('3 holders of %d: inserts refused by the full table %d, untracked allocations %d (at least %d)'
              % (PER_PROCESS, refused, untracked, 3 * PER_PROCESS - LIVE_TABLE))
        if refused < 3 * PER_PROCESS - LIVE_TABLE or untracked < refused:
            fail('a full table must be counted: %d refused, %d untracked' % (refused, untracked))
        for w, t in holders:
            step(w)
        time.sleep(0.5)
        left = {t['pid']: gauges(agent, t['pid'])[0] for _, t in holders}
        print('after the holders freed everything, driver_allocated_bytes: %s' % left)
        for w, _ in holders:
            exit_workload(w)
        if any(left.values()):
            fail('gauges inflated by allocations the full table did not keep: %s' % left)
    print('ok')


if __name__ == '__main__':
    main()
