#!/usr/bin/env python3
"""Process events through an exec storm while the agent's discovery is busy (the incident behind
VigilAgentEventsDropped: a build on the node, every compiler an exec and an exit, while the /proc
scan took seconds):
- busy discovery: holder processes with many mappings each, so that reading every /proc/PID/maps
  takes about a second or more (measured and printed);
- a tracked process (the USDT program, which gets series and so a process-table entry): its exit
  reaches the agent through the kernel at once (the proc set's `tracked` map shrinks well within
  the grace period), and its entry goes after the grace period;
- the storm: N children of exec_storm, each one exec and one exit. No proc ring buffer drop;
  every event the kernel sent was read (read == sent); read >= N (every storm exec; other
  processes on a shared machine add theirs, so equality cannot be asserted) and read < 2N (the
  exits of processes the agent does not track are not sent);
- afterwards the process table (labels, exec scans, tracked map) is back to its baseline.
usage: exec_storm.py VIGIL_AGENT EXEC_STORM USDT_PROGRAM"""
import mmap
import os
import signal
import subprocess
import sys
import time

from vigil_harness.agent import Agent, select, total
from vigil_harness.fail import fail, require_root

N = 20000
PARALLEL = 8
GRACE_S = 4
HOLDERS, MAPPINGS = 40, 20000


def start_holders():
    """Processes with MAPPINGS separate mappings each (alternating protections: never merged)."""
    pids = []
    for _ in range(HOLDERS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            keep = [mmap.mmap(-1, 4096, prot=mmap.PROT_READ if i % 2 else mmap.PROT_READ | mmap.PROT_WRITE)
                    for i in range(MAPPINGS)]
            os.write(w, b'1')
            while keep:
                signal.pause()
            os._exit(0)
        os.close(w)
        if os.read(r, 1) != b'1':
            fail("a mapping holder did not start")
        os.close(r)
        pids.append(pid)
    return pids


def maps_scan_seconds():
    """What one full discovery scan reads: every /proc/PID/maps."""
    start = time.time()
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open('/proc/%s/maps' % d) as f:
                    f.read()
            except OSError:
                pass
    return time.time() - start


def proc_counts(s):
    """Events sent, read and dropped by the proc set. The events read have no series before the
    first is read; the first call comes after tracked_exit's exec has been."""
    return (total(s, 'vigil_agent_events_total', require=True, set='proc'),
            total(s, 'vigil_agent_ringbuf_events_total', require=True, set='proc'),
            total(s, 'vigil_agent_ringbuf_drops_total', require=True, set='proc'))


def tables(s):
    return {table: total(s, 'vigil_agent_table_entries', require=True, set=st, table=table)
            for st, table in (('agent', 'process_labels'), ('agent', 'exec_scans'), ('proc', 'tracked'))}


def wait_for(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    return None


def tracked_exit(agent, program):
    """The USDT program gets series (labels, so a table entry and a `tracked` entry); when it exits
    the kernel sends its exit and drops it from `tracked` at once."""
    w = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    w.stdout.readline()
    w.stdin.write('\n')
    w.stdin.flush()
    pid = w.stdout.readline().split('"pid":')[1].split(',')[0].strip()
    s = wait_for(lambda: (lambda s: s if select(s, 'gpu_memory_allocator_block_allocations_total', pid=pid) else None)(
        agent.scrape()), 15)
    if not s:
        fail("no series for the USDT program (pid %s): %s" % (pid, agent.log_text()))
    # The proc set mirrors the table into `tracked` from housekeeping (every 50 ms), never from the
    # scrape that read the labels: a scrape writes no map.
    s = wait_for(lambda: (lambda s: s if tables(s)['tracked'] >= 1 else None)(agent.scrape()), 2) or s
    alive = tables(s)
    if alive['tracked'] < 1:
        fail("the USDT program has series but the kernel tracks no process 2 s later: %s" % alive)
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)
    exited = time.time()
    s = wait_for(lambda: (lambda s: s if tables(s)['tracked'] < alive['tracked'] else None)(agent.scrape()), GRACE_S)
    if not s:
        dump = subprocess.run(['bpftool', 'map', 'dump', 'name', 'tracked'], capture_output=True, text=True).stdout
        fail("tracked processes stayed at %d after pid %s exited (grace period %d s); tracked map: %s"
             % (alive['tracked'], pid, GRACE_S, ' '.join(dump.split())))
    print("tracked process %s: tracked map %d -> %d %.2f s after its exit (grace period %d s); labels %d"
          % (pid, alive['tracked'], tables(s)['tracked'], time.time() - exited, GRACE_S, tables(s)['process_labels']))


def main():
    require_root()
    agent_bin, storm, program = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
    scan_before = maps_scan_seconds()
    holders = start_holders()
    try:
        scan = maps_scan_seconds()
        print("reading every /proc/PID/maps: %.2f s before the holders, %.2f s with %d x %d mappings"
              % (scan_before, scan, HOLDERS, MAPPINGS))
        # Full scans back to back, as on a node where they take longer than the interval.
        config = ('discovery_interval: 1s\ngrace_period: %ds\nprobes: {tcp: false, xid: false}\n'
                  'libraries: {usdt: [%s]}\n' % (GRACE_S, program))
        with Agent(agent_bin, config) as agent:
            base = tables(agent.scrape())
            tracked_exit(agent, program)
            s0 = agent.scrape()
            sent0, read0, drops0 = proc_counts(s0)
            start = time.time()
            r = subprocess.run([storm, str(N), str(PARALLEL)], capture_output=True, text=True, timeout=240)
            took = time.time() - start
            if r.returncode != 0 or 'spawned=%d failed=0' % N not in r.stdout:
                fail("exec_storm: %s%s" % (r.stdout, r.stderr))
            # The reader drains on its own: wait until it has read all the kernel sent.
            def drained():
                s = agent.scrape()
                sent, read, drops = proc_counts(s)
                return s if read + drops >= sent else None
            s1 = wait_for(drained, 30) or agent.scrape()
            sent1, read1, drops1 = proc_counts(s1)
            sent, read, drops = sent1 - sent0, read1 - read0, drops1 - drops0
            print("storm: %s; proc set: %d sent (%.0f/s), %d read, %d dropped; storm execs %d"
                  % (r.stdout.strip(), sent, sent / took, read, drops, N))
            if drops:
                fail("%d proc ring buffer drops during the storm" % drops)
            if read != sent:
                fail("read %d of the %d events the kernel sent" % (read, sent))
            if read < N:
                fail("read %d events, fewer than the storm's %d execs" % (read, N))
            if read >= 2 * N:
                fail("read %d events for %d untracked execs: their exits were sent too" % (read, N))
            # Back to baseline: the storm's processes leave no entry. exec_scans also holds other
            # processes' execs of the last 3 s on a shared machine: allowed 1%% of N above baseline.
            def settled():
                t = tables(agent.scrape())
                ok = (t['process_labels'] <= base['process_labels'] and t['tracked'] <= base['tracked']
                      and t['exec_scans'] <= base['exec_scans'] + N // 100)
                return t if ok else None
            t = wait_for(settled, GRACE_S + 15)
            if not t:
                fail("process table not back to its baseline %s: %s" % (base, tables(agent.scrape())))
            print("tables: baseline %s, after %s" % (base, t))
    finally:
        for pid in holders:
            os.kill(pid, signal.SIGKILL)
        for pid in holders:
            os.waitpid(pid, 0)
    print("ok")


if __name__ == '__main__':
    main()
