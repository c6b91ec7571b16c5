#!/usr/bin/env python3
"""No lost updates: 8 threads of one process allocate and free through the driver API at once (the
stand-in libcuda), and every per-process counter the agent exports equals the workload's own
totals exactly: allocations, small allocations, calls by function, the size histogram's count and
sum, and the live bytes. A plain `++` on the shared map value loses counts when two threads
update it on two CPUs at the same time (bpf_atomic_updates checks the bytecode for that form). The
workload runs as a copy named for the test: the histogram is per program, and another CUDA process
of the same program on the machine would add to it.
usage: cuda_threads.py VIGIL_AGENT CUDA_WORKLOAD"""
import os
import sys
import time

from vigil_harness.agent import Agent, named_copy, run_workload, total
from vigil_harness.fail import fail, require_root

THREADS, ITERATIONS = 8, 20000
COMM = 'cuda-%d' % os.getpid()


def main():
    require_root()
    agent_bin = sys.argv[1]
    config = 'probes: {tcp: false, nccl: false}\n'
    with named_copy(sys.argv[2], COMM) as workload_bin, Agent(agent_bin, config) as agent:
        w, truth = run_workload(agent, [workload_bin, 'threads', str(THREADS), str(ITERATIONS)], 'cuda', 'libcuda.so')
        pid = truth['pid']
        time.sleep(0.5)
        s = agent.scrape()
        group = {'comm': COMM, 'container_id': ''}  # the size histogram is per program
        checks = [
            ('gpu_memory_allocations_total', truth['allocs'], {'pid': pid}),
            ('gpu_memory_small_allocations_total', truth['small_allocs'], {'pid': pid}),
            ('gpu_memory_allocation_size_bytes_count', truth['allocs'], group),
            ('gpu_memory_allocation_size_bytes_sum', truth['alloc_bytes'], group),
            ('gpu_memory_driver_allocated_bytes', truth['live_bytes'], {'pid': pid}),
        ]
        calls = {l['function']: v for n, l, v in s if n == 'cuda_driver_calls_total' and l.get('pid') == str(pid)}
        ok = True
        for name, want, labels in checks:
            got = total(s, name, **labels)
            print('%-44s agent %-12d workload %-12d %s' % (name, got, want, 'ok' if got == want else 'MISMATCH'))
            ok &= got == want
        for fn, want in (('cuMemAlloc_v2', THREADS * ITERATIONS), ('cuMemFree_v2', truth['frees'])):
            got = calls.get(fn, 0)
            print('%-44s agent %-12d workload %-12d %s' % ('cuda_driver_calls_total{function="%s"}' % fn, got, want,
                                                          'ok' if got == want else 'MISMATCH'))
            ok &= got == want
        drops = total(s, 'vigil_agent_ringbuf_drops_total', require=True, set='cuda')
        w.stdin.write('\n')
        w.stdin.flush()
        w.wait(timeout=10)
        if not ok:
            fail('the agent lost updates of %d threads (ring buffer drops: %d)' % (THREADS, drops))
    print('ok')


if __name__ == '__main__':
    main()
