#!/usr/bin/env python3
"""USDT truth test: a program with semaphore-gated probes laid out as PyTorch's pytorch:malloc/free
(checked here against its ELF note: pointer, int8 device index, size, int64 stream id, as
c10/cuda/CUDACachingAllocator.cpp fires them) and the worker's vigil:alloc_block_alloc/free/
alloc_snapshot reports its own allocator account, PyTorch's per device, from 8 threads at once.
The agent (given the binary in libraries.usdt, then finding a copy named vigil-worker by
discovery, opened through map_files) must enable the semaphores and export the same numbers,
per gpu label, plus cached slack and external fragmentation computed from them.
usage: usdt_allocator.py VIGIL_AGENT USDT_ALLOCATOR"""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, promtool_check, total, wait_attached
from vigil_harness.fail import fail, require_root


def expect(name, got, want):
    ok = abs(got - want) < 1e-9
    print("%-60s agent %-12.6g program %-12.6g %s" % (name, got, want, "ok" if ok else "MISMATCH"))
    return ok


def note_args(program, provider, name):
    """The argument specs ("8@%rax", "-1@%sil", ...) of PROVIDER:NAME in PROGRAM's stapsdt notes."""
    text = subprocess.run(['readelf', '-n', program], capture_output=True, text=True, check=True).stdout
    for m in re.finditer(r'Provider: (\S+)\s+Name: (\S+)\s+Location:.*?Arguments: ([^\n]*)', text, re.S):
        if (m.group(1), m.group(2)) == (provider, name):
            return m.group(3).split()
    fail('%s:%s not in the ELF notes of %s' % (provider, name, program))


def check_pytorch_layout(program):
    """PyTorch's layout: void *devPtr (8, unsigned), c10::DeviceIndex (int8: -1), size_t (8),
    c10::StreamId (int64: -8); free(ptr) with one pointer."""
    sizes = [a.split('@')[0] for a in note_args(program, 'pytorch', 'malloc')]
    print('pytorch:malloc argument sizes %s' % sizes)
    if sizes != ['8', '-1', '8', '-8']:
        fail("the test program's pytorch:malloc is not PyTorch's (8, -1, 8, -8): %s" % sizes)
    if [a.split('@')[0] for a in note_args(program, 'pytorch', 'free')] != ['8']:
        fail("the test program's pytorch:free is not PyTorch's (one pointer)")


def run_and_check(agent, program, before_go=lambda pid: None):
    """Runs PROGRAM; once it has started, before_go(pid), then its allocations: the agent's
    numbers for its pid must equal the program's own account."""
    w = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    w.stdout.readline()
    before_go(w.pid)
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
    # Device 0 and device 3 apart, and the worker's allocator with no device.
    accounts = [(dict(allocator='pytorch', gpu=gpu), t) for gpu, t in sorted(truth['pytorch'].items())]
    accounts.append((dict(allocator='vigil', gpu=''), truth['vigil']))
    for labels, t in accounts:
        alloc = '%(allocator)s gpu=%(gpu)s' % labels
        q = dict(pid=pid, **labels)
        ok &= expect(alloc + ' gpu_memory_allocator_block_allocations_total', total(s, 'gpu_memory_allocator_block_allocations_total', require=True, **q), t['mallocs'])
        ok &= expect(alloc + ' gpu_memory_allocator_block_frees_total', total(s, 'gpu_memory_allocator_block_frees_total', require=True, **q), t['frees'])
        ok &= expect(alloc + ' gpu_memory_allocator_allocated_bytes', total(s, 'gpu_memory_allocator_allocated_bytes', require=True, **q), t['allocated'])
    v = truth['vigil']
    q = dict(pid=pid, allocator='vigil', gpu='')
    ok &= expect('vigil gpu_memory_allocator_reserved_bytes', total(s, 'gpu_memory_allocator_reserved_bytes', require=True, **q), v['reserved'])
    ok &= expect('vigil gpu_memory_cached_slack_ratio', total(s, 'gpu_memory_cached_slack_ratio', require=True, **q),
                 (v['reserved'] - v['allocated']) / v['reserved'])
    ok &= expect('vigil gpu_memory_external_fragmentation_ratio', total(s, 'gpu_memory_external_fragmentation_ratio', require=True, **q),
                 1 - v['largest_free'] / (v['reserved'] - v['allocated']))
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)
    if not ok:
        fail("the agent's allocator numbers differ from the program's")


def main():
    require_root()
    agent_bin, program = sys.argv[1], os.path.realpath(sys.argv[2])
    check_pytorch_layout(program)
    # No discovery: a vigil-worker someone runs on the same machine would add its own probes.
    config = 'probes: {tcp: false, cuda: false, nccl: false}\nlibraries: {discover: false, usdt: [%s]}\n' % program
    with Agent(agent_bin, config) as agent:
        if total(agent.scrape(), 'vigil_agent_probes_attached', require=True, set='usdt') != 5:
            fail("expected 5 USDT probes attached: " + agent.log_text())
        run_and_check(agent, program)
    # Found by discovery instead: a copy named as the worker, reached through its process's
    # /proc/PID/map_files link and handed to libbpf as /proc/self/fd/N (semaphores included).
    with tempfile.TemporaryDirectory() as tmp, \
            Agent(agent_bin, 'probes: {tcp: false, cuda: false, nccl: false}\ndiscovery_interval: 1s\n') as agent:
        copy = os.path.join(tmp, 'vigil-worker')
        shutil.copy(program, copy)
        run_and_check(agent, copy, lambda pid: wait_attached(agent, 'usdt', copy))
    print("ok")


if __name__ == '__main__':
    main()
