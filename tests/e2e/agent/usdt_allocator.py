#!/usr/bin/env python3
"""USDT truth test: a program with semaphore-gated probes shaped like PyTorch's pytorch:malloc/free
and the worker's vigil:alloc_block_alloc/free/alloc_snapshot reports its own allocator account.
The agent (given the binary in libraries.usdt) must enable the semaphores and export the same
numbers, plus cached slack and external fragmentation computed from them.
usage: usdt_allocator.py VIGIL_AGENT USDT_ALLOCATOR"""
import json
import os
import subprocess
import sys
import time

from harness import Agent, fail, promtool_check, require_root, total


def expect(name, got, want):
    ok = abs(got - want) < 1e-9
    print("%-60s agent %-12.6g program %-12.6g %s" % (name, got, want, "ok" if ok else "MISMATCH"))
    return ok


def main():
    require_root()
    agent_bin, program = sys.argv[1], os.path.realpath(sys.argv[2])
    # No discovery: a vigil-worker someone runs on the same machine would add its own probes.
    config = 'probes: {tcp: false, cuda: false, nccl: false}\nlibraries: {discover: false, usdt: [%s]}\n' % program
    with Agent(agent_bin, config) as agent:
        if total(agent.scrape(), 'vigil_agent_probes_attached', set='usdt') != 5:
            fail("expected 5 USDT probes attached: " + agent.log_text())
        w = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        w.stdout.readline()
        w.stdin.write('\n')
        w.stdin.flush()
        truth = json.loads(w.stdout.readline())
        pid = truth['pid']
        if not truth['semaphores_enabled']:
            fail("the program's USDT semaphores were not set by the agent's attachment")
        time.sleep(0.3)
        s = agent.scrape()
        promtool_check(agent)
        ok = True
        for alloc in ('pytorch', 'vigil'):
            t = truth[alloc]
            q = dict(pid=pid, allocator=alloc)
            ok &= expect(alloc + ' gpu_memory_allocator_block_allocations_total', total(s, 'gpu_memory_allocator_block_allocations_total', **q), t['mallocs'])
            ok &= expect(alloc + ' gpu_memory_allocator_block_frees_total', total(s, 'gpu_memory_allocator_block_frees_total', **q), t['frees'])
            ok &= expect(alloc + ' gpu_memory_allocator_allocated_bytes', total(s, 'gpu_memory_allocator_allocated_bytes', **q), t['allocated'])
        v = truth['vigil']
        q = dict(pid=pid, allocator='vigil')
        ok &= expect('vigil gpu_memory_allocator_reserved_bytes', total(s, 'gpu_memory_allocator_reserved_bytes', **q), v['reserved'])
        ok &= expect('vigil gpu_memory_cached_slack_ratio', total(s, 'gpu_memory_cached_slack_ratio', **q),
                     (v['reserved'] - v['allocated']) / v['reserved'])
        ok &= expect('vigil gpu_memory_external_fragmentation_ratio', total(s, 'gpu_memory_external_fragmentation_ratio', **q),
                     1 - v['largest_free'] / (v['reserved'] - v['allocated']))
        w.stdin.write('\n')
        w.stdin.flush()
        w.wait(timeout=10)
        if not ok:
            fail("the agent's allocator numbers differ from the program's")
    print("ok")


if __name__ == '__main__':
    main()
