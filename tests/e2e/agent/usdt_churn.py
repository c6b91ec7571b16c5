#!/usr/bin/env python3
"""Links are released and the USDT spec ids never run out (#28 item 5). 120 distinct copies of a
program with the five allocator probes (usdt_allocator, named vigil-worker so discovery takes it
for the worker) run in batches of 20 and exit; every copy must have its probes attached, which
the program itself sees: the kernel sets its USDT semaphores only for an attached probe. Each copy
costs 5 of libbpf's 256 spec ids per BPF object, so without detaching the probes of files no
process maps any more the attachments fail from about the 52nd copy on. Once every copy has
exited, no link is left. Then a file with 100 sites of one probe, each with its own argument (100
spec ids and 100 uprobes), is refused and counted, and a legitimate copy after it still attaches.
usage: usdt_churn.py VIGIL_AGENT USDT_ALLOCATOR USDT_MANY_SITES"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, total, wait_attached
from vigil_harness.fail import fail, require_root

COPIES, BATCH = 120, 20
GRACE_S = 1


def start(path):
    w = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if not w.stdout.readline().startswith('ready'):
        fail('%s did not start' % path)
    return w


def finish(w):
    """Lets a usdt_allocator copy run its allocations; returns its account after it exits."""
    w.stdin.write('\n')
    w.stdin.flush()
    truth = json.loads(w.stdout.readline())
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)
    return truth


ATTACHED = re.compile(r'^vigil-agent: usdt: (\d+) probes attached in (.*)$')
DETACHED = re.compile(r'^vigil-agent: usdt: no process maps (.*) any more; detaching its (\d+) probes$')


def links_by_file(agent):
    """{file: USDT links held} by the agent's log, attached minus detached; files are named as the
    agent names them ("/proc/PID/map_files/RANGE -> PATH", the path as the first process mapping
    it was seen)."""
    held = {}
    for line in agent.log_text().splitlines():
        m = ATTACHED.match(line)
        if m:
            held[m.group(2)] = held.get(m.group(2), 0) + int(m.group(1))
        m = DETACHED.match(line)
        if m:
            held[m.group(1)] = held.get(m.group(1), 0) - int(m.group(2))
    return held


def attached(agent, root):
    """The USDT links the agent holds on this test's own copies (under ROOT), by its log. Other
    vigil-worker processes on the machine are attached too and are none of this test's business
    (#47: two unrelated workers once kept their 3 links and failed it); total_matches_log() ties
    the log to the agent's own count."""
    return sum(n for f, n in links_by_file(agent).items() if f.rpartition(' -> ')[2].startswith(root + '/'))


def total_matches_log(agent, timeout=5):
    """The agent's vigil_agent_probes_attached{set=usdt} equals the links its log says it holds.
    Called when this test's copies are settled; another process starting or exiting meanwhile can
    move both between the two reads, hence a few tries."""
    deadline = time.time() + timeout
    while True:
        held = links_by_file(agent)
        metric = total(agent.scrape(), 'vigil_agent_probes_attached', require=True, set='usdt')
        if metric == sum(held.values()) and held == links_by_file(agent):
            return
        if time.time() > deadline:
            fail('the agent counts %d USDT links, its log accounts for %d: %s' % (metric, sum(held.values()), held))
        time.sleep(0.5)


def wait_released(agent, root, stall=20):
    """Waits until the agent holds no link on this test's copies. Detaching is serial and each
    uprobe link waits for an RCU grace period: 100 links took 20 s beside a CPU burner (0.2 s
    each, #47), so the wait ends on progress, not a fixed time: it fails once STALL seconds pass
    with no link released."""
    start = time.time()
    held, since = attached(agent, root), time.time()
    while held != 0:
        if time.time() - since > stall:
            files = [f for f, n in links_by_file(agent).items() if n and f.rpartition(' -> ')[2].startswith(root + '/')]
            paths = {f.rpartition(' -> ')[2] for f in files}
            lines = [l for l in agent.log_text().splitlines() if any(p in l for p in paths)]
            fail('%d USDT links on this test\'s copies still held, none released for %d s (%.0f s after every process '
                 'mapping them exited): %s; the agent\'s lines on them:\n%s'
                 % (held, stall, time.time() - start, files, '\n'.join(lines)))
        time.sleep(0.5)
        now = attached(agent, root)
        if now < held:
            held, since = now, time.time()
    total_matches_log(agent)
    return time.time() - start


def copy(src, root, i):
    d = os.path.join(root, 'c%03d' % i)
    os.mkdir(d)
    path = os.path.join(d, 'vigil-worker')
    shutil.copy2(src, path)  # a distinct inode: a distinct file to the agent
    return path


def main():
    require_root()
    agent_bin, program, many_sites = sys.argv[1], os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3])
    root = tempfile.mkdtemp(prefix='vigil-usdt-churn-')
    config = ('probes: {cuda: false, nccl: false, tcp: false}\ngrace_period: %ds\ndiscovery_interval: 1s\n' % GRACE_S)
    try:
        with Agent(agent_bin, config) as agent:
            for first in range(0, COPIES, BATCH):
                batch = [start(copy(program, root, i)) for i in range(first, first + BATCH)]
                for i, w in zip(range(first, first + BATCH), batch):
                    wait_attached(agent, 'usdt', os.path.join(root, 'c%03d' % i, 'vigil-worker'), timeout=20)
                unset = [i for i, w in zip(range(first, first + BATCH), batch) if not finish(w)['semaphores_enabled']]
                failures = {l['reason']: v for n, l, v in agent.scrape()
                            if n == 'vigil_agent_attach_failures_total' and l.get('set') == 'usdt' and v}
                print('copies %d-%d: attached, semaphores set in %d of %d; usdt attach failures %s'
                      % (first, first + BATCH - 1, BATCH - len(unset), BATCH, failures or 'none'))
                if unset or failures:
                    fail('copies %s ran without their probes (failures %s)' % (unset, failures))
                took = wait_released(agent, root)
                print('copies %d-%d: released in %.1f s' % (first, first + BATCH - 1, took))
            print('%d distinct copies attached and released; links held on them now: %d' % (COPIES, attached(agent, root)))

            d = os.path.join(root, 'many')
            os.mkdir(d)
            crafted = os.path.join(d, 'vigil-worker')
            shutil.copy2(many_sites, crafted)
            w = start(crafted)
            deadline = time.time() + 15  # a few discovery intervals: found, then refused or attached
            while True:
                s = agent.scrape()
                refused = total(s, 'vigil_agent_attach_failures_total', set='usdt', reason='usdt_notes')
                links = attached(agent, root)
                if refused or links or time.time() > deadline:
                    break
                time.sleep(0.3)
            print('a file with 100 sites of vigil:alloc_snapshot: usdt_notes refusals %d, links held %d' % (refused, links))
            if refused != 1 or links != 0:
                fail('the file with 100 sites was not refused (refusals %d, links %d)' % (refused, links))
            legit = start(copy(program, root, COPIES))
            wait_attached(agent, 'usdt', os.path.join(root, 'c%03d' % COPIES, 'vigil-worker'), timeout=20)
            ok = finish(legit)['semaphores_enabled']
            w.stdin.write('\n')
            w.stdin.flush()
            w.wait(timeout=10)
            print('a legitimate copy after it: semaphores set %s' % ok)
            if not ok:
                fail('a legitimate copy after the refused file ran without its probes')
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print('ok')


if __name__ == '__main__':
    main()
