#!/usr/bin/env python3
"""The real vigil-worker serving requests, watched through its USDT probes (vigil:alloc_block_*,
vigil:alloc_snapshot): once the requests are done, the agent's allocator numbers for the worker's
pid must equal the worker's own /metrics (vigil_worker_allocator_*): reserved, allocated and the
external fragmentation both compute from the largest free block. Those three come through the
worker's snapshot probe, so the agent's own work is checked too: its pairing of the alloc/free
probes (blocks handed out minus given back, and their bytes) must equal the worker's live blocks
and allocated bytes.
usage: worker_allocator.py VIGIL_AGENT VIGIL_WORKER MODEL"""
import os
import subprocess
import sys
import time

from vigil_harness.agent import Agent, parse_metrics, select, total
from vigil_harness.fail import fail, require_root
from vigil_harness.ports import listen_port
from vigil_harness.worker_client import call, complete, wait_ready


def expect(name, got, want):
    ok = abs(got - want) <= 1e-9 * max(1.0, abs(want))
    print("%-44s agent %-16.10g worker %-16.10g %s" % (name, got, want, "ok" if ok else "MISMATCH"))
    return ok


def main():
    require_root()
    agent_bin, worker_bin, model = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
    if not os.path.exists(model):
        fail("model %s missing (scripts/fetch_model.sh)" % model)
    # The worker binary is attached before it starts, so every probe it fires is seen.
    config = 'probes: {tcp: false, cuda: false, nccl: false}\nlibraries: {discover: false, usdt: [%s]}\n' % worker_bin
    with Agent(agent_bin, config) as agent:
        if total(agent.scrape(), 'vigil_agent_probes_attached', require=True, set='usdt') < 3:
            fail("vigil:alloc_* probes not attached in %s: %s" % (worker_bin, agent.log_text()))
        port = listen_port()
        worker = subprocess.Popen([worker_bin, 'serve', '-m', model, '--host', '127.0.0.1', '--port', str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            try:
                wait_ready(port, '/ready', timeout=120, proc=worker)
            except RuntimeError as e:
                fail("worker: %s %s" % (e, worker.stderr.read() if worker.poll() is not None else ''))
            for prompt in ('Hello!', 'Name three colours.', 'What is 2+2?'):
                c = complete(port, {'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': 8, 'temperature': 0})
                if c.status != 200:
                    fail("chat completion: %d %s" % (c.status, c.raw))
            time.sleep(0.5)
            w = parse_metrics(call(port, 'GET', '/metrics')[2].decode())
            s = agent.scrape()
            q = dict(pid=worker.pid, allocator='vigil')
            if total(s, 'gpu_memory_allocator_block_allocations_total', require=True, **q) == 0:
                fail("the agent saw no block allocation of the worker (pid %d)" % worker.pid)
            ok = True
            ok &= expect('reserved bytes', total(s, 'gpu_memory_allocator_reserved_bytes', require=True, **q),
                         total(w, 'vigil_worker_allocator_reserved_bytes', require=True))
            ok &= expect('allocated bytes', total(s, 'gpu_memory_allocator_allocated_bytes', require=True, **q),
                         total(w, 'vigil_worker_allocator_allocated_bytes', require=True))
            # The ratio is defined only with free bytes inside reserved memory; without, the agent
            # exports none and the worker 0, and a comparison of the two would be 0 = 0.
            free = total(w, 'vigil_worker_allocator_reserved_bytes', require=True) - \
                total(w, 'vigil_worker_allocator_allocated_bytes', require=True)
            if free > 0:
                ok &= expect('external fragmentation ratio',
                             total(s, 'gpu_memory_external_fragmentation_ratio', require=True, **q),
                             total(w, 'vigil_worker_allocator_fragmentation_ratio', require=True))
            elif select(s, 'gpu_memory_external_fragmentation_ratio', **q):
                fail("an external fragmentation ratio with no free bytes inside reserved memory")
            else:
                print("external fragmentation ratio: not compared, the worker holds no free bytes "
                      "inside its reserved memory (the agent exports none)")
            handed = total(s, 'gpu_memory_allocator_block_allocations_total', require=True, **q)
            back = total(s, 'gpu_memory_allocator_block_frees_total', require=True, **q)
            print("blocks: %d handed out, %d given back (agent)" % (handed, back))
            ok &= expect('live blocks (agent: allocations - frees)', handed - back,
                         total(w, 'vigil_worker_allocator_blocks', require=True))
            ok &= expect('live block bytes (agent pairing)', total(s, 'gpu_memory_allocator_paired_bytes', require=True, **q),
                         total(w, 'vigil_worker_allocator_allocated_bytes', require=True))
            if not ok:
                fail("the agent's allocator numbers differ from the worker's own")
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    print("ok")


if __name__ == '__main__':
    main()
