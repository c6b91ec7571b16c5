#!/usr/bin/env python3
"""CUDA driver truth test: a workload drives libcuda.so.1 (the stand-in the tests build, or the
real driver on a GPU machine) through allocations, VMM, an allocation that invalidates a capture,
graphs and injected failures, and prints what it did. The agent finds the library through its
normal /proc discovery, and every CUDA metric it exports for the workload's pid must equal the
workload's own account; the failure log must carry each failure; the series must disappear after
the grace period once the workload exits. The allocation-size histogram is per container and
program: a second workload adds to it, and it keeps what the first counted after the first's
series are gone, until a grace period after both are. The workload runs as a copy named for the
test, so that program's series are its own beside other CUDA processes on the machine.
usage: cuda_driver.py VIGIL_AGENT CUDA_WORKLOAD
With VIGIL_CUDA_LIBDIR set (a directory holding the real libcuda.so.1), the workload runs on the
real driver instead (tests/e2e/agent/cuda_real_driver.sh, on a GPU machine)."""
import os
import shutil
import sys
import time

from vigil_harness.agent import (Agent, declared_total, exit_workload, named_copy, promtool_check, run_workload, select,
                                 total)
from vigil_harness.fail import fail, require_root

GRACE_S = 1
COMM = 'cuda-%d' % os.getpid()


def expect(name, got, want):
    ok = abs(got - want) < 1e-9
    print("%-48s agent %-14s workload %-14s %s" % (name, got, want, "ok" if ok else "MISMATCH"))
    return ok


def group_sizes(samples):
    """The allocation-size histogram's samples of the workloads' group (host, COMM)."""
    return [(n, l, v) for n, l, v in samples if n.startswith('gpu_memory_allocation_size_bytes')
            and l.get('comm') == COMM and l.get('container_id') == '']


def expect_sizes(samples, sizes, when):
    """The group's histogram equals the workloads' own allocation sizes: every bucket, sum, count."""
    got = group_sizes(samples)
    if any('pid' in l for _, l, _ in got):
        fail("the allocation size histogram is labelled by pid")
    buckets = {float(l['le']): v for n, l, v in got if n.endswith('_bucket')}
    if not buckets:
        fail("no allocation size histogram (%s)" % when)
    ok = expect('size buckets (%d), %s' % (len(buckets), when),
                int(all(v == sum(1 for x in sizes if x <= le) for le, v in buckets.items())), 1)
    ok &= expect('size sum, ' + when, sum(v for n, _, v in got if n.endswith('_sum')), sum(sizes))
    ok &= expect('size count, ' + when, sum(v for n, _, v in got if n.endswith('_count')), len(sizes))
    return ok


def by_label(samples, name, pid, label):
    return {l[label]: v for l, v in select(samples, name, pid=pid)}


def main():
    require_root()
    agent_bin = sys.argv[1]
    config = 'probes: {tcp: false, nccl: false}\ngrace_period: %ds\n' % GRACE_S
    with named_copy(sys.argv[2], COMM) as workload_bin, Agent(agent_bin, config) as agent:
        env = dict(os.environ)
        if os.environ.get('VIGIL_CUDA_LIBDIR'):
            env['LD_LIBRARY_PATH'] = os.environ['VIGIL_CUDA_LIBDIR']
            print("running the workload on the libcuda.so.1 in " + env['LD_LIBRARY_PATH'])
        w, truth = run_workload(agent, [workload_bin], 'cuda', 'libcuda.so', env=env)
        pid = truth['pid']
        time.sleep(0.5)
        s = agent.scrape()
        # A GPU machine may lack promtool; the format does not depend on the driver underneath.
        if os.environ.get('VIGIL_CUDA_LIBDIR') and not shutil.which('promtool'):
            print("promtool not installed: the format is checked by the stand-in run (agent_cuda_driver)")
        else:
            promtool_check(agent)

        sizes = truth['sizes']
        small = sum(1 for x in sizes if x <= 4096)
        errors = {}
        for key, n in truth['errors'].items():
            fn, err = key.split('/')
            errors.setdefault(fn, {})
            errors[fn][err] = errors[fn].get(err, 0) + n

        def errs(*fns):
            out = {}
            for fn in fns:
                for e, n in errors.get(fn, {}).items():
                    out[e] = out.get(e, 0) + n
            return out

        ok = True
        ok &= expect('gpu_memory_allocations_total', total(s, 'gpu_memory_allocations_total', require=True, pid=pid), len(sizes))
        ok &= expect('gpu_memory_small_allocations_total', total(s, 'gpu_memory_small_allocations_total', require=True, pid=pid), small)
        ok &= expect('gpu_memory_fragmentation_ratio', total(s, 'gpu_memory_fragmentation_ratio', require=True, pid=pid), small / len(sizes))
        ok &= expect('gpu_memory_driver_allocated_bytes', total(s, 'gpu_memory_driver_allocated_bytes', require=True, pid=pid), truth['live_bytes'])
        ok &= expect('gpu_memory_live_bytes', total(s, 'gpu_memory_live_bytes', require=True, pid=pid), truth['live_bytes'] + truth['vmm_mapped_bytes'])
        for k in ('vmm_mapped_bytes', 'vmm_physical_bytes', 'vmm_reserved_bytes'):
            ok &= expect('gpu_memory_' + k, total(s, 'gpu_memory_' + k, require=True, pid=pid), truth[k])
        ok &= expect_sizes(s, sizes, 'one process')
        alloc_fns = ('cuMemAlloc_v2', 'cuMemAllocPitch_v2', 'cuMemAllocAsync', 'cuMemAllocFromPoolAsync',
                     'cuMemAllocManaged', 'cuMemCreate')
        for family, want in (('gpu_memory_allocation_failures_total', errs(*alloc_fns)),
                             ('cuda_graph_launch_failures_total', errs('cuGraphLaunch')),
                             ('cuda_graph_instantiate_failures_total', errs('cuGraphInstantiate')),
                             ('cuda_stream_capture_failures_total', errs('cuStreamBeginCapture_v2', 'cuStreamEndCapture')),
                             ('cuda_graph_exec_update_failures_total', errs('cuGraphExecUpdate_v2'))):
            # The workload provokes failures the real driver returns too (an allocation far beyond
            # any device's memory, a NULL graph, a changed topology, an allocation in a capture):
            # with none, agent and workload would agree on nothing.
            if not want:
                fail("the workload made no call fail that %s counts: the check would be 0 = 0" % family)
            got = by_label(s, family, pid, 'error')
            ok &= expect(family, got == want, True)
            if got != want:
                print("   agent %s\n   workload %s" % (got, want))
        ok &= expect('cuda_stream_capture_allocations_total', total(s, 'cuda_stream_capture_allocations_total', require=True, pid=pid), truth['allocs_in_capture'])
        ok &= expect('cuda_graph_launches_total', total(s, 'cuda_graph_launches_total', require=True, pid=pid), truth['calls']['cuGraphLaunch'])
        got_calls = by_label(s, 'cuda_driver_calls_total', pid, 'function')
        ok &= expect('cuda_driver_calls_total by function', got_calls == {k: float(v) for k, v in truth['calls'].items()}, True)
        if got_calls != truth['calls']:
            print("   agent %s\n   workload %s" % (got_calls, truth['calls']))
        log = agent.log_text()
        logged = log.count('cuda failure: pid=%d ' % pid)
        ok &= expect('failure context lines in the log', logged, sum(truth['errors'].values()))
        lines = [l for l in log.splitlines() if 'cuda failure: pid=%d ' % pid in l]
        for key in truth['errors']:
            fn, err = key.split('/')
            want = '%s -> %s' % (fn, err) + (' stream=%s' % truth['stream'] if fn == 'cuGraphLaunch' else '')
            ok &= expect('log line "%s"' % want, int(any(want in l for l in lines)), 1)
        # Attach failures have no series before the first; the set's probe count carries its label.
        if total(s, 'vigil_agent_probes_attached', require=True, set='cuda') == 0:
            fail("no cuda probe attached, yet the workload's calls were counted")
        ok &= expect('vigil_agent_attach_failures_total{set="cuda"}',
                     declared_total(s, 'vigil_agent_attach_failures_total', set='cuda'), 0)
        ok &= expect('vigil_agent_ringbuf_drops_total{set="cuda"}',
                     total(s, 'vigil_agent_ringbuf_drops_total', require=True, set='cuda'), 0)

        # The size histogram is one per container and program: a second process of the same
        # program adds to it, and what the first counted stays in it after its series are gone.
        w2, truth2 = run_workload(agent, [workload_bin], 'cuda', 'libcuda.so', env=env)
        time.sleep(0.5)
        both = sizes + truth2['sizes']
        ok &= expect_sizes(agent.scrape(), both, 'two processes')
        exit_workload(w)
        time.sleep(GRACE_S + 1.5)
        s = agent.scrape()
        left = [n for n, l, v in s if l.get('pid') == str(pid)]
        ok &= expect('series of the exited pid after the grace period', len(left), 0)
        ok &= expect_sizes(s, both, 'one exited, one alive')
        exit_workload(w2)
        time.sleep(2 * GRACE_S + 2)  # its grace period, then the group's, with no member left
        s = agent.scrape()
        ok &= expect('series of the second pid after the grace period',
                     len([n for n, l, v in s if l.get('pid') == str(truth2['pid'])]), 0)
        ok &= expect('size histogram series once both are gone', len(group_sizes(s)), 0)
        if not ok:
            fail("agent's CUDA metrics differ from what the workload did")
    print("ok")


if __name__ == '__main__':
    main()
