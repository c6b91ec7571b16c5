#!/usr/bin/env python3
"""A restart of the agent loses no NCCL accounting (#29 item 1, the nccl and collective sets). Four
ranks on the stand-in libnccl.so.2 (tests/standins/fake_libnccl.c) initialise one communicator under
the first agent and run batches of collectives; the agent is stopped with SIGTERM, then with SIGKILL,
a batch runs while no agent runs (only the pinned links see it), a new agent starts on the same pins
and another batch runs beside the previous agent's links (until it releases them). After each
restart, and once the last agent has released the previous links:
  - nccl_comm_collectives_total of each rank equals the count the rank printed itself,
  - each rank's communicator series is still there with the id (FNV-1a 64 of the 128 bytes this
    test drew), rank and nranks it was given: the ranks initialised before the restart only,
  - no nccl_*_total series of a rank went down.
The collective set's maps are pinned beside (procs, probe_stats, failures). Without pins
(`--no-pins`: what the agent did before) the communicator series are gone after the first restart.
usage: nccl_restart.py VIGIL_AGENT NCCL_RANKS [--no-pins]"""
import os
import signal
import subprocess
import sys
import time

from vigil_harness.agent import Agent, mapped_path, remove_pins, restart_pins, select, wait_attached, wait_released
from vigil_harness.fail import fail, require_root

# tcp on: the collective set and the correlation set load only with it.
CONFIG = 'probes: {cuda: false}\ndiscovery_interval: 1s\n'
NRANKS = 4
BATCH = 40  # collectives per rank per batch: 8 of each of the five kinds
COLLECTIVE_PINS = {'procs', 'groups', 'probe_stats', 'failures'}


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return '%016x' % h


def start_rank(binary, rank, unique_id):
    p = subprocess.Popen([binary, str(rank), str(NRANKS), unique_id.hex()], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if not p.stdout.readline().startswith('loaded pid='):
        fail('rank %d did not start' % rank)
    return p


def tell_all(ranks, line, answer):
    """LINE to every rank at once (a collective completes when all have entered it); returns what
    each answered, after checking it starts with ANSWER."""
    for p in ranks:
        p.stdin.write(line + '\n')
        p.stdin.flush()
    got = [p.stdout.readline().strip() for p in ranks]
    if not all(g.startswith(answer) for g in got):
        fail('ranks answered %s to %r' % (got, line))
    return got


def batch(ranks):
    """BATCH collectives on every rank; the total each has run, by its own count."""
    return [int(g.split()[1]) for g in tell_all(ranks, str(BATCH), 'done ')]


def view(agent, ranks):
    """Per rank: its communicator series (labels, value) and every nccl_*_total series of its pid."""
    s = agent.scrape()
    out = []
    for p in ranks:
        comms = [(l['communicator'], l['rank'], l['nranks'], v)
                 for l, v in select(s, 'nccl_comm_collectives_total', pid=str(p.pid))]
        counters = {(name, tuple(sorted(l.items()))): v for name, l, v in
                    ((n, l, v) for n, l, v in s if n.startswith('nccl_') and n.endswith('_total')
                     and l.get('pid') == str(p.pid))}
        out.append((comms, counters))
    return out


def check(label, agent, ranks, done, want_id, before, failures):
    time.sleep(0.5)
    now = view(agent, ranks)
    for r, ((comms, counters), total) in enumerate(zip(now, done)):
        print('%s: rank %d ran %d collectives; the agent: %s' % (label, r, total, comms))
        if comms != [(want_id, str(r), str(NRANKS), total)]:
            failures.append('%s: rank %d: the agent has %s, expected communicator %s rank %d nranks %d with %d '
                            'collectives' % (label, r, comms, want_id, r, NRANKS, total))
        if before:
            down = ['%s%s %g -> %g' % (k[0], dict(k[1]), v, counters.get(k, 0)) for k, v in before[r][1].items()
                    if counters.get(k, 0) < v]
            if down:
                failures.append('%s: rank %d: counters went down: %s' % (label, r, down))
    return now


def main():
    require_root()
    agent_bin, ranks_bin = sys.argv[1], sys.argv[2]
    pins, root, args = restart_pins('nccl-restart', sys.argv[3:])
    unique_id = os.urandom(128)
    want_id = fnv1a64(unique_id)
    failures = []
    held = {}
    agent = Agent(agent_bin, CONFIG, args)
    ranks = [start_rank(ranks_bin, r, unique_id) for r in range(NRANKS)]
    try:
        library = mapped_path(ranks[0].pid, 'libnccl.so')
        wait_attached(agent, 'nccl', library, timeout=30)
        tell_all(ranks, 'init', 'ready')
        if pins:
            pinned = set(os.listdir(os.path.join(root, 'v1', 'collective')))
            print('the collective set pinned: %s' % sorted(pinned))
            if not COLLECTIVE_PINS <= pinned:
                failures.append('the collective set pinned %s, expected %s' % (sorted(pinned), sorted(COLLECTIVE_PINS)))
        done = batch(ranks)
        seen = check('first agent', agent, ranks, done, want_id, None, failures)
        links = os.path.join(root, 'v1', 'nccl', 'links')
        for name, how in (('SIGTERM', signal.SIGTERM), ('SIGKILL', signal.SIGKILL)):
            for kind, ids in agent.held_bpf_ids().items():
                held.setdefault(kind, set()).update(ids)
            if how == signal.SIGTERM:
                agent.stop()
            else:
                agent.proc.kill()
                agent.proc.wait(timeout=60)
                os.unlink(agent.cfg.name)
            done = batch(ranks)
            print('%s: a batch ran while no agent ran' % name)
            agent = Agent(agent_bin, CONFIG, args)
            wait_attached(agent, 'nccl', library, timeout=30)
            done = batch(ranks)
            if pins:
                # The batch ran on both agents' links (each entry and return program twice):
                # counted once all the same.
                beside = len(os.listdir(links)) - 1
                print("%s: the batch ran beside %d previous agents' pinned links" % (name, beside))
                if beside < 1:
                    failures.append('%s: the previous links were released before the batch' % name)
            seen = check('after %s' % name, agent, ranks, done, want_id, seen, failures)
        if pins:
            deadline = time.time() + 30
            while len(os.listdir(links)) > 1 and time.time() < deadline:
                time.sleep(0.2)
            released = [l for l in agent.log_text().splitlines() if 'nccl: released' in l]
            print('nccl link directories left: %d; the last agent: %s' % (len(os.listdir(links)), released))
            if len(os.listdir(links)) != 1 or not released:
                failures.append('the previous agents\' nccl links were not released: %s' % os.listdir(links))
        done = batch(ranks)
        check('previous links released', agent, ranks, done, want_id, seen, failures)
        tell_all(ranks, 'exit', '')
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
            p.wait()
        for kind, ids in agent.held_bpf_ids().items():
            held.setdefault(kind, set()).update(ids)
        agent.stop()
    if pins:
        removed = remove_pins(agent_bin, root)
        print('vigil-agent --cleanup removed %d pins' % removed)
        wait_released(held)
    if failures:
        fail('; '.join(failures))
    print('ok')


if __name__ == '__main__':
    main()
