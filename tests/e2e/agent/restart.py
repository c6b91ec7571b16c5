#!/usr/bin/env python3
"""A restart of the agent loses nothing it had counted (#29). A stand-in CUDA process allocates
10 x 1 MiB under one agent; the agent is stopped (SIGTERM in round 1, SIGKILL in round 2) and a new
one started on the same pinned state; the process then frees 5 MiB and allocates 3 x 2 MiB. The
new agent's live bytes and allocation count must equal the process's own account (11 MiB, 13),
no counter may go down across the restart, and the new agent must have adopted the pinned state.
The agent is also killed (SIGKILL) in the middle of a 4-thread allocation burst: after the burst
the next agent's live bytes and allocations equal the workload's account.
A process that was running before the first agent is marked gpu_memory_accounting_complete 0;
one started under an agent is marked 1, also after the restarts. At the end `vigil-agent
--cleanup` removes every pin. Pins of another schema version are removed at start only when no
agent of that version holds its directory's lock. Before #29 (no pinned state; `--no-pins` reproduces it) the
restarted agent reported 6 MiB live and 3 allocations.
usage: restart.py VIGIL_AGENT CUDA_WORKLOAD [--no-pins]"""
import json
import os
import signal
import subprocess
import sys
import time

from vigil_harness.agent import Agent, mapped_path, remove_pins, restart_pins, run_workload, select, total, wait_attached, wait_released
from vigil_harness.fail import fail, require_root

CONFIG = 'probes: {tcp: false, nccl: false, usdt: false}\ndiscovery_interval: 1s\n'
COUNTERS = ('gpu_memory_allocations_total', 'gpu_memory_small_allocations_total')
BURST_ITERATIONS = 30000  # per thread: about 1 s of calls under the probes here; 60,000 live, within the per-process cap


def step(w):
    """One line to a `restart` workload, and the account it answers."""
    w.stdin.write('\n')
    w.stdin.flush()
    return json.loads(w.stdout.readline())


def finish(w):
    """The last line a `restart` workload waits for: it exits."""
    w.stdin.write('\n')
    w.stdin.flush()
    w.wait(timeout=10)


def view(agent, pid):
    s = agent.scrape()
    return {'live_bytes': total(s, 'gpu_memory_driver_allocated_bytes', pid=pid),
            'allocs': total(s, 'gpu_memory_allocations_total', pid=pid),
            'complete': [v for _, v in select(s, 'gpu_memory_accounting_complete', pid=pid)],
            'counters': {name: total(s, name, pid=pid) for name in COUNTERS}}


def wait_attached_since(agent, path, t0):
    """Seconds from T0 until AGENT logs its cuda probes attached to PATH (polled every 5 ms)."""
    while time.time() < t0 + 20:
        if any('cuda: ' in l and 'probes attached in' in l and l.endswith(path) for l in agent.log_text().splitlines()):
            return time.time() - t0
        time.sleep(0.005)
    fail('the new agent did not attach to %s in 20 s: %s' % (path, agent.log_text()))


def stop(agent, how, held):
    """Stops AGENT with signal HOW (its ids added to HELD, for the final check)."""
    for kind, ids in agent.held_bpf_ids().items():
        held.setdefault(kind, set()).update(ids)
    if how == signal.SIGTERM:
        agent.stop()
    else:
        agent.proc.send_signal(how)
        agent.proc.wait(timeout=60)
        os.unlink(agent.cfg.name)
    return time.time()


def main():
    require_root()
    agent_bin, workload_bin = sys.argv[1], sys.argv[2]
    pins, root, args = restart_pins('restart', sys.argv[3:])
    failures = []
    held = {}
    # Running before any agent: whatever it did before, no agent saw.
    early = subprocess.Popen([workload_bin, 'restart'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if not early.stdout.readline().startswith('ready'):
        fail('workload did not start')
    time.sleep(0.05)  # its start tick strictly before the agent's
    agent = Agent(agent_bin, CONFIG, args)
    try:
        # SIGTERM and SIGKILL: the workload's second step under the new agent (while the old
        # agent's pinned links still run beside its own: counted once); 'none': the second step
        # while no agent runs at all (only pinned links can see it).
        for name, how, during_gap in (('SIGTERM', signal.SIGTERM, False), ('SIGKILL', signal.SIGKILL, False),
                                      ('no agent', signal.SIGKILL, True)):
            w, truth = run_workload(agent, [workload_bin, 'restart'], 'cuda', 'libcuda.so')
            library = mapped_path(w.pid, 'libcuda.so')
            time.sleep(0.5)
            before = view(agent, truth['pid'])
            print('%s round, before: workload %s; agent %s' % (name, truth, before))
            gone = stop(agent, how, held)
            if during_gap:
                truth = step(w)
                print('%s round: the workload freed and allocated with no agent running' % name)
            agent = Agent(agent_bin, CONFIG, args)
            gap = wait_attached_since(agent, library, gone)
            print('%s round: the new agent was ready, its probes attached, %.3f s after the old one exited' % (name, gap))
            if pins and 'pinned accounting adopted' not in agent.log_text():
                failures.append('%s: the new agent did not adopt the pinned state' % name)
            if not during_gap:
                truth = step(w)
            time.sleep(0.5)
            after = view(agent, truth['pid'])
            print('%s round, after: workload %s; agent %s' % (name, truth, after))
            if (after['live_bytes'], after['allocs']) != (truth['live_bytes'], truth['allocs']):
                failures.append('%s: after the restart the agent reports %d bytes live and %d allocations; the '
                                'workload holds %d bytes after %d allocations'
                                % (name, after['live_bytes'], after['allocs'], truth['live_bytes'], truth['allocs']))
            for counter in COUNTERS:
                if after['counters'][counter] < before['counters'][counter]:
                    failures.append('%s: %s went down across the restart: %d -> %d'
                                    % (name, counter, before['counters'][counter], after['counters'][counter]))
            if after['complete'] != [1]:
                failures.append('%s: a process started under an agent is marked %s, not complete'
                                % (name, after['complete']))
            finish(w)
        if pins:
            # The last agent, past its second full scan, has released the previous agents' links.
            links = os.path.join(root, 'v1', 'cuda', 'links')
            deadline = time.time() + 30
            while len(os.listdir(links)) > 1 and time.time() < deadline:
                time.sleep(0.2)
            released = [l for l in agent.log_text().splitlines() if 'pinned links of a previous agent' in l]
            print('link directories left: %d; the last agent: %s' % (len(os.listdir(links)), released))
            if len(os.listdir(links)) != 1 or not released:
                failures.append('the previous agents\' links were not released: %s' % os.listdir(links))
        agent = burst_round(agent, agent_bin, workload_bin, args, held, failures)
        step(early)
        time.sleep(0.5)
        marked = view(agent, early.pid)['complete']
        print('process running before the first agent (pid %d): gpu_memory_accounting_complete %s' % (early.pid, marked))
        if marked != [0]:
            failures.append('a process older than every agent is marked %s, not incomplete' % marked)
        step(early)
        finish(early)
    finally:
        if early.poll() is None:
            early.kill()
        stop(agent, signal.SIGTERM, held)
    if pins:
        removed = remove_pins(agent_bin, root)
        print('vigil-agent --cleanup removed %d pins; %s is gone' % (removed, root))
        if removed < 6:
            failures.append('--cleanup removed %d pins, expected at least the 6 maps of the cuda set' % removed)
        wait_released(held)
        print('every program and link of the %d agents left the kernel after the cleanup' % 4)
        mismatch(agent_bin, failures)
        other_versions(agent_bin, failures)
    if failures:
        fail('; '.join(failures))
    print('ok')


def burst_round(agent, agent_bin, workload_bin, args, held, failures):
    """SIGKILL of the agent in the middle of an allocation burst (4 threads allocating and
    freeing, calls in flight at the kill): once the burst is over, the next agent's live bytes and
    allocation count equal the workload's account. Returns the agent now running."""
    w = subprocess.Popen([workload_bin, 'threads', '4', str(BURST_ITERATIONS)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if not w.stdout.readline().startswith('ready'):
        fail('burst workload did not start')
    wait_attached(agent, 'cuda', mapped_path(w.pid, 'libcuda.so'))
    w.stdin.write('\n')
    w.stdin.flush()
    time.sleep(0.3)
    before = view(agent, w.pid)
    stop(agent, signal.SIGKILL, held)
    agent = Agent(agent_bin, CONFIG, args)
    truth = json.loads(w.stdout.readline())
    time.sleep(0.5)
    after = view(agent, w.pid)
    print('SIGKILL in a burst: %d allocations counted when the agent was killed; after the burst: workload %s; '
          'agent %s' % (before['allocs'], truth, after))
    if before['allocs'] in (0, truth['allocs']):
        failures.append('the agent was not killed in the middle of the burst (%d of %d allocations counted)'
                        % (before['allocs'], truth['allocs']))
    if (after['live_bytes'], after['allocs']) != (truth['live_bytes'], truth['allocs']):
        failures.append('SIGKILL in a burst: the agent reports %d bytes live and %d allocations; the workload '
                        'holds %d bytes after %d allocations'
                        % (after['live_bytes'], after['allocs'], truth['live_bytes'], truth['allocs']))
    finish(w)
    return agent


def mismatch(agent_bin, failures):
    """A pinned map of another layout under the same schema (libbpf's map_is_reuse_compat says
    no): the agent says so in one line and counts without pins instead of failing the CUDA set."""
    root = '/sys/fs/bpf/vigil-test-mismatch-%d' % os.getpid()
    os.makedirs(os.path.join(root, 'v1', 'cuda'))
    try:
        subprocess.run(['bpftool', 'map', 'create', os.path.join(root, 'v1', 'cuda', 'procs'), 'type', 'hash',
                        'key', '4', 'value', '8', 'entries', '1', 'name', 'procs'], check=True)
        agent = Agent(agent_bin, CONFIG, ['--bpf-pin-root', root])
        said = [l for l in agent.log_text().splitlines() if 'do not match this build' in l]
        s = agent.scrape()
        enabled = [v for _, v in select(s, 'vigil_agent_probe_set_enabled', set='cuda')]
        agent.stop()
        print('a pinned procs map of another layout: %s; cuda set enabled %s' % (said, enabled))
        if len(said) != 1 or enabled != [1]:
            failures.append('a mismatching pinned map: said %s, cuda set enabled %s' % (said, enabled))
    finally:
        remove_pins(agent_bin, root)


HOLD_LOCK = 'import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH); ' \
            'print("held", flush=True); sys.stdin.read()'


def other_versions(agent_bin, failures):
    """Pins of another schema version: removed by a starting agent when no agent of that version
    holds its directory (a shared flock, as every agent takes on its own), kept while one does,
    and said in one line."""
    root = '/sys/fs/bpf/vigil-test-versions-%d' % os.getpid()
    for version in ('v0', 'v7'):
        os.makedirs(os.path.join(root, version, 'cuda'))
        subprocess.run(['bpftool', 'map', 'create', os.path.join(root, version, 'cuda', 'procs'), 'type', 'hash',
                        'key', '4', 'value', '8', 'entries', '1', 'name', 'procs'], check=True)
    holder = subprocess.Popen([sys.executable, '-c', HOLD_LOCK, os.path.join(root, 'v7')], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        for round_, held in (('v7 held by a running agent', True), ('v7 no longer held', False)):
            if not held:
                holder.stdin.close()
                holder.wait(timeout=10)
            agent = Agent(agent_bin, CONFIG, ['--bpf-pin-root', root])
            said = [l for l in agent.log_text().splitlines() if 'pinned state: schema' in l]
            agent.stop()
            left = sorted(os.listdir(root))
            print('%s: the agent said %s; left under the root: %s' % (round_, said, left))
            want = ['v1', 'v7'] if held else ['v1']
            if len(said) != 1 or left != want or ('kept, an agent of it runs' in said[0]) != held:
                failures.append('%s: the agent said %s and left %s, expected %s' % (round_, said, left, want))
    finally:
        if holder.poll() is None:
            holder.kill()
        remove_pins(agent_bin, root)


if __name__ == '__main__':
    main()
