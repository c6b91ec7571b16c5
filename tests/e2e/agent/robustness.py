#!/usr/bin/env python3
"""Agent robustness on the real kernel with the stand-in libcuda:
- churn: 200 short-lived CUDA processes; every allocation counted, and once the grace period is
  over no series and no kernel or user-space table entry of theirs is left;
- burst: 200 000 failing calls while the agent is stopped (SIGSTOP), so the failure ring buffer
  overflows: the workload is never slowed beyond its own pace (nothing blocks), the kernel's error
  counter is exact, and every event is either read or counted in vigil_agent_ringbuf_drops_total;
- a library deleted on disk while mapped, and one replaced by a new file, are found through
  /proc/PID/map_files and /proc/PID/root and counted exactly; once no process maps those copies
  their probes are detached after the grace period (the configured library stays attached);
- SIGTERM leaves no program or link (checked by the harness on every stop).
usage: robustness.py VIGIL_AGENT CUDA_WORKLOAD FAKE_LIBCUDA"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, select, total
from vigil_harness.fail import fail, require_root
from vigil_harness.wait import wait_for

GRACE_S = 8
CHURN = 200
ALLOCS_EACH = 10
BURST = 200000


def tables(samples):
    """The cuda set's table entries this test reads; each must be exported (absent is not 0)."""
    return {t: total(samples, 'vigil_agent_table_entries', require=True, set='cuda', table=t)
            for t in ('procs', 'live', 'handles', 'errors', 'inflight')}


def churn(agent, workload):
    before = agent.scrape()
    base_tables = tables(before)
    start = time.time()
    pids, running = [], []
    for _ in range(CHURN):
        running.append(subprocess.Popen([workload, 'quick', str(ALLOCS_EACH)], stdout=subprocess.PIPE, text=True))
        if len(running) >= 10:
            p = running.pop(0)
            pids.append(p)
            p.wait(timeout=30)
    for p in running:
        p.wait(timeout=30)
    pids += running
    took = time.time() - start
    outs = [p.stdout.read() for p in pids]
    if any(p.returncode for p in pids) or any('allocs=%d' % ALLOCS_EACH not in o for o in outs):
        fail("a churn process failed")
    pid_set = {str(p.pid) for p in pids}
    time.sleep(0.5)
    s = agent.scrape()
    got = sum(v for l, v in select(s, 'gpu_memory_allocations_total') if l['pid'] in pid_set)
    seen = {l['pid'] for l, _ in select(s, 'gpu_memory_allocations_total') if l['pid'] in pid_set}
    print("churn: %d processes in %.1f s; agent counted %d allocations from %d pids (truth %d from %d)"
          % (CHURN, took, got, len(seen), CHURN * ALLOCS_EACH, CHURN))
    if took > GRACE_S - 1:
        fail("churn took %.1f s, longer than the grace period allows the check to be exact" % took)
    if got != CHURN * ALLOCS_EACH or len(seen) != CHURN:
        fail("churn allocations miscounted")
    time.sleep(GRACE_S + 1.5)
    s = agent.scrape()
    left = {l['pid'] for n, l, v in s if l.get('pid') in pid_set}
    # Other processes on a shared machine may be observed too (a vigil-worker with USDT probes,
    # perhaps in its own grace period): only the churn's pids are known to be gone for good.
    series_pids = {l['pid'] for n, l, v in s if 'pid' in l}
    after_tables = tables(s)
    cuda_pids = {l['pid'] for l, _ in select(s, 'gpu_memory_allocations_total')}
    labels = total(s, 'vigil_agent_table_entries', require=True, set='agent', table='process_labels')
    print("after the grace period: %d churn pids with series; %d pids with series in all; "
          "cuda procs table %d for %d pids; label cache %d"
          % (len(left), len(series_pids), after_tables['procs'], len(cuda_pids), labels))
    if left:
        fail("series left for exited pids: %s" % sorted(left)[:5])
    if after_tables['procs'] != len(cuda_pids):
        fail("cuda procs table holds %d entries for %d live processes" % (after_tables['procs'], len(cuda_pids)))
    for t in ('live', 'handles', 'errors', 'inflight'):
        if after_tables[t] > base_tables[t] and not cuda_pids:
            fail("cuda table %s holds %d entries with no process left" % (t, after_tables[t]))
    # Processes in their grace period without series of their own (seen by another collector)
    # are cached too: a handful at most, against the 200 the churn would leave behind.
    if labels > len(series_pids) + 10:
        fail("label cache holds %d entries for %d observed processes" % (labels, len(series_pids)))


def burst(agent, workload):
    w = subprocess.Popen([workload, 'burst', str(BURST)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(w.stdout.readline().split('pid=')[1])
    before = agent.scrape()
    read0 = total(before, 'vigil_agent_ringbuf_events_total', set='cuda')
    drop0 = total(before, 'vigil_agent_ringbuf_drops_total', require=True, set='cuda')
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        w.stdin.write('\n')
        w.stdin.flush()
        line = w.stdout.readline()
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    failed = int(line.split('failed=')[1].split()[0])
    seconds = float(line.split('seconds=')[1])
    time.sleep(1.0)
    s = agent.scrape()
    counted = total(s, 'cuda_driver_errors_total', pid=pid, function='cuMemAlloc_v2', error='CUDA_ERROR_OUT_OF_MEMORY')
    read = total(s, 'vigil_agent_ringbuf_events_total', set='cuda') - read0
    dropped = total(s, 'vigil_agent_ringbuf_drops_total', set='cuda') - drop0
    print("burst: %d failures in %.2f s with the agent stopped; kernel counted %d; ring buffer: %d read + %d dropped"
          % (failed, seconds, counted, read, dropped))
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)
    if failed != BURST or counted != failed:
        fail("failure counter %d, workload failed %d times" % (counted, failed))
    if dropped == 0:
        fail("no drop counted although the ring buffer could not hold %d events" % failed)
    if read + dropped != failed:
        fail("events read (%d) + dropped (%d) != failures (%d)" % (read, dropped, failed))


def run_full(agent, workload, libdir, before_go):
    """Runs the full workload on the libcuda in LIBDIR; before_go() runs once it has mapped it."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    w = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    w.stdout.readline()
    before_go()
    # The copy is reached through this process: its map_files link once deleted, else its root.
    wait_for("the agent to attach to the workload's libcuda in " + libdir,
             lambda: any('cuda: ' in l and 'probes attached in /proc/%d/' % w.pid in l
                         for l in agent.log_text().splitlines()), 20, step=0.2)
    w.stdin.write('\n')
    w.stdin.flush()
    truth = json.loads(w.stdout.readline())
    time.sleep(0.3)
    s = agent.scrape()
    got = total(s, 'gpu_memory_allocations_total', pid=truth['pid'])
    launches = total(s, 'cuda_graph_launches_total', pid=truth['pid'])
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)
    return got, len(truth['sizes']), launches, truth['calls']['cuGraphLaunch'], truth['pid']


def replaced_libraries(agent, workload, fake_lib):
    libdir = tempfile.mkdtemp(prefix='vigil-lib-')
    lib = os.path.join(libdir, 'libcuda.so.1')
    try:
        shutil.copy(fake_lib, lib)
        got, want, l1, l2, pid1 = run_full(agent, workload, libdir, lambda: os.unlink(lib))
        print("deleted while mapped: agent %d allocations, %d launches; workload %d, %d" % (got, l1, want, l2))
        if (got, l1) != (want, l2):
            fail("miscounted on a library deleted on disk")
        if '/map_files/' not in agent.log_text():
            fail("the deleted library was not opened through /proc/PID/map_files")
        shutil.copy(fake_lib, lib + '.new')
        os.rename(lib + '.new', lib)  # a new inode at the same path, as a package upgrade does
        got, want, l1, l2, pid2 = run_full(agent, workload, libdir, lambda: None)
        print("replaced on disk: agent %d allocations, %d launches; workload %d, %d" % (got, l1, want, l2))
        if (got, l1) != (want, l2):
            fail("miscounted on a replaced library")
        return pid1, pid2
    finally:
        shutil.rmtree(libdir)


def main():
    require_root()
    agent_bin, workload, fake_lib = sys.argv[1:4]
    config = ('probes: {tcp: false, nccl: false}\ngrace_period: %ds\ndiscovery_interval: 1s\n'
              'libraries: {cuda: [%s]}\n' % (GRACE_S, os.path.realpath(fake_lib)))
    with Agent(agent_bin, config) as agent:
        pinned = total(agent.scrape(), 'vigil_agent_probes_attached', require=True, set='cuda')
        if pinned == 0:
            fail("libraries.cuda path not attached at start: " + agent.log_text())
        churn(agent, workload)
        pids = replaced_libraries(agent, workload, fake_lib)
        peak = total(agent.scrape(), 'vigil_agent_probes_attached', set='cuda')
        wait_for("the probes of the two unmapped library copies to be detached",
                 lambda: sum('no process maps' in l and any('/proc/%d/' % p in l for p in pids)
                             for l in agent.log_text().splitlines()) == 2, GRACE_S + 10, step=0.2)
        print("cuda links: %d with the copies mapped, %d once no process maps them (configured library: %d)"
              % (peak, total(agent.scrape(), 'vigil_agent_probes_attached', set='cuda'), pinned))
    # The ring buffer's counters are global: without discovery only this build's stand-in is
    # probed, so no other process on a shared machine adds failure events to the count.
    with Agent(agent_bin, config.replace('libraries: {', 'libraries: {discover: false, ')) as agent:
        burst(agent, workload)
    print("ok")


if __name__ == '__main__':
    main()
