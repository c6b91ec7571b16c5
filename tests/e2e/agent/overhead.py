#!/usr/bin/env python3
"""Overhead benchmark (not a ctest test): nanoseconds the agent adds per probed call (uprobe on
the stand-in libcuda vs USDT), and the agent's CPU and resident memory while a workload makes
10 k and 100 k probed calls per second (each call: an entry and a return probe). Prints a Markdown table for docs/probes-agent.md.
Fails when the agent does not log its cuda and usdt sets attached to FAKE_LIBCUDA and PROBE_BENCH,
or counts none of the calls measured with it.
usage: overhead.py VIGIL_AGENT PROBE_BENCH FAKE_LIBCUDA"""
import os
import subprocess
import sys
import time

from harness import Agent, fail, require_root, total, wait_attached

CLK = os.sysconf('SC_CLK_TCK')


def per_pair(bench, mode, n, runs=5):
    """Best of RUNS: the least disturbed run on a shared machine."""
    return min(float(subprocess.run([bench, mode, str(n)], capture_output=True, text=True, check=True)
                     .stdout.split()[0]) for _ in range(runs))


def cpu_ticks(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        return int(next(l for l in f if l.startswith('VmRSS')).split()[1])


def main():
    require_root()
    agent_bin, bench, fake = sys.argv[1], os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3])
    base_u = per_pair(bench, 'uprobe', 100000)
    base_s = per_pair(bench, 'usdt', 1000000)
    config = ('probes: {tcp: false, nccl: false}\nlibraries: {discover: false, cuda: [%s], usdt: [%s]}\n'
              % (fake, bench))
    rows = []
    with Agent(agent_bin, config) as agent:
        # Measured once both sets say they are attached to the files the benchmark runs, and only
        # if the probes then count its calls: a "with agent" figure of probes that never fired is none.
        wait_attached(agent, 'cuda', fake)
        wait_attached(agent, 'usdt', bench)
        counted = lambda s: total(agent.scrape(), 'vigil_agent_events_total', require=True, set=s)  # noqa: E731
        c0, u0 = counted('cuda'), counted('usdt')
        on_u = per_pair(bench, 'uprobe', 100000)
        on_s = per_pair(bench, 'usdt', 1000000)
        if counted('cuda') == c0 or counted('usdt') == u0:
            fail("the agent counted no event of the calls measured with it (cuda %d, usdt %d)"
                 % (counted('cuda') - c0, counted('usdt') - u0))
        for events in (10000, 100000):
            pairs = events // 2  # a pair is two probed calls: cuMemAlloc_v2 and cuMemFree_v2
            t0, e0 = cpu_ticks(agent.proc.pid), total(agent.scrape(), 'vigil_agent_events_total', require=True, set='cuda')
            start = time.time()
            subprocess.run([bench, 'rate', str(pairs), '10'], check=True)
            wall = time.time() - start
            t1, e1 = cpu_ticks(agent.proc.pid), total(agent.scrape(), 'vigil_agent_events_total', require=True, set='cuda')
            if e1 == e0:
                fail("the agent counted no event at %d calls/s" % events)
            rows.append((events, (e1 - e0) / wall, 100.0 * (t1 - t0) / CLK / wall, rss_kib(agent.proc.pid) / 1024))
    print("| probe | ns per call pair without agent | with agent | added per probed call |")
    print("|---|---|---|---|")
    print("| uprobe + uretprobe per driver call (pair: cuMemAlloc_v2 + cuMemFree_v2) | %.0f | %.0f | %.0f ns |" % (base_u, on_u, (on_u - base_u) / 2))
    print("| USDT per probe (pair: pytorch:malloc + pytorch:free) | %.1f | %.0f | %.0f ns |" % (base_s, on_s, (on_s - base_s) / 2))
    print()
    print("| target probed calls/s | measured (vigil_agent_events_total rate) | agent CPU (% of one core) | agent RSS (MiB) |")
    print("|---|---|---|---|")
    for events, measured, cpu, rss in rows:
        print("| %d | %.0f | %.2f | %.1f |" % (events, measured, cpu, rss))


if __name__ == '__main__':
    main()
