#!/usr/bin/env python3
"""Which rank is stuck, end to end (issue #34): four ranks on the stand-in libnccl.so.2
(tests/standins/fake_libnccl.c: a collective completes when every rank has entered it), initialised
with one ncclUniqueId that this test draws, ranks 0-2 through ncclCommInitRank and rank 3 through
ncclCommInitRankConfig. The agent's view is scraped by a real Prometheus running the mixin's rules
(windows shortened), alerting a real Alertmanager whose receivers are this test's webhook.
  1. The communicator label of all four ranks is FNV-1a 64 of the id's 128 bytes, computed here;
     each rank's rank and nranks are the ones it was given; 50 collectives (every position of
     the communicator argument) count 50 on each. A fifth process creates 100 more communicators
     than that: the agent keeps 64 of its communicators and counts the other 37 as untracked
     (and as table-full events), the four ranks' series unchanged.
  2. The ranks run collectives; rank 2 gets SIGSTOP: VigilCollectiveRankStuck pages for rank 2
     (its pid, state running) and no other rank, within the wait threshold + `for` + 2 scrapes
     and evaluations (+ Alertmanager's group_wait); its description lists ranks 0, 1 and 3 as
     waiting. SIGCONT: the alert resolves.
     While it pages, the NCCL/TCP dashboard's "Stuck collectives" table (its generated JSON, the
     query as Grafana sends it) shows rank 2 alone, linking to its node's dashboard, and "Time
     since the last collective, by rank" has the four ranks.
  3. Rank 1 is killed: once the agent drops its series, the alert pages for rank 1 with state
     gone (its labels from its last series), and for no other rank.
usage: rank_stuck.py VIGIL_AGENT NCCL_RANKS"""
import json
import os
import signal
import subprocess
import sys
import time

from vigil_harness.agent import Agent, mapped_path, select, wait_attached
from vigil_harness.dashboard_queries import substitute
from vigil_harness.fail import fail, require_root
from vigil_harness.rank_stuck_pages import (NODE, RULE_OVERRIDES, WAIT_S, agent_scrape, check_quiet, check_waiting,
                                            page_budget, wait_page, wait_resolved)
from vigil_harness.stack import Stack
from vigil_harness.wait import wait_for

NRANKS = 4
COMMS_PER_PROCESS = 64  # NCCL_COMMS_PER_PROCESS, bpf/nccl_events.h
HOSTILE_COMMS = 100
STOPPED, KILLED = 2, 1
NCCL_DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..',
                              'dashboards', 'generated', 'vigil-nccl-tcp.json')


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return '%016x' % h


class Rank:
    def __init__(self, binary, rank, unique_id, nranks=NRANKS):
        argv = [binary, str(rank), str(nranks), unique_id.hex()] + (['config'] if rank == 3 else [])
        self.rank = rank
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith('loaded pid='):
            fail("rank %d did not start: %r" % (rank, line))
        self.pid = self.p.pid

    def send(self, line):
        self.p.stdin.write(line + '\n')
        self.p.stdin.flush()

    def expect(self, want):
        line = self.p.stdout.readline().strip()
        if line != want:
            fail("rank %d: %r, expected %r" % (self.rank, line, want))


def segments(unique_id, others=0):
    """The stand-in's shared-memory files (fake_libnccl.c) of UNIQUE_ID's communicator and of the
    OTHERS that nccl_ranks' `comms` derives from it: only this test's, other stand-ins may run."""
    out = []
    for i in range(others + 1):
        head = bytearray(unique_id[:8])
        head[0] ^= i & 0xff
        head[1] ^= i >> 8
        out.append('/dev/shm/vigil-fake-nccl-' + head.hex())
    return out


def check_cap(agent, binary, ranks, unique_id, hostile_id):
    """A process with 1 + HOSTILE_COMMS communicators (ids of its own): COMMS_PER_PROCESS tracked,
    the rest counted; the ranks' series as before."""
    before = agent.scrape()
    full_before = sum(v for _, v in select(before, 'vigil_agent_table_full_total', set='nccl'))
    hostile = Rank(binary, 0, hostile_id, nranks=1)
    try:
        hostile.send('init')
        hostile.expect('ready')
        hostile.send('comms %d' % HOSTILE_COMMS)
        hostile.expect('comms %d' % HOSTILE_COMMS)
        time.sleep(0.5)
        s = agent.scrape()
        tracked = len(select(s, 'nccl_comm_collectives_total', pid=hostile.pid))
        untracked = sum(v for _, v in select(s, 'nccl_comms_untracked_total', pid=hostile.pid))
        full = sum(v for _, v in select(s, 'vigil_agent_table_full_total', set='nccl')) - full_before
        print("a process with %d communicators: %d tracked, %g untracked, %g table-full events"
              % (1 + HOSTILE_COMMS, tracked, untracked, full))
        refused = 1 + HOSTILE_COMMS - COMMS_PER_PROCESS
        if (tracked, untracked, full) != (COMMS_PER_PROCESS, refused, refused):
            fail("expected %d tracked, %d untracked and table-full" % (COMMS_PER_PROCESS, refused))
        check_ids(agent, ranks, unique_id)
    finally:
        hostile.p.kill()
        hostile.p.wait()


def check_ids(agent, ranks, unique_id):
    want = fnv1a64(unique_id)
    s = agent.scrape()
    for r in ranks:
        got = select(s, 'nccl_comm_collectives_total', pid=r.pid)
        if len(got) != 1:
            fail("rank %d (pid %d): %d communicator series, expected 1: %s" % (r.rank, r.pid, len(got), got))
        labels, value = got[0]
        print("rank %d pid %d: communicator=%s rank=%s nranks=%s collectives=%g" %
              (r.rank, r.pid, labels['communicator'], labels['rank'], labels['nranks'], value))
        if labels['communicator'] != want:
            fail("rank %d: communicator %s, FNV-1a 64 of the unique id is %s" % (r.rank, labels['communicator'], want))
        if (labels['rank'], labels['nranks'], value) != (str(r.rank), str(NRANKS), 50):
            fail("rank %d: rank=%s nranks=%s collectives=%g, expected %d %d 50"
                 % (r.rank, labels['rank'], labels['nranks'], value, r.rank, NRANKS))


def check_stuck_panels(stack, rank, comm):
    """The node dashboard's stuck-collective panels while RANK is stuck, their rows of this test's
    communicator COMM (other processes on the machine may have their own): the table names it
    alone and links to its node's dashboard; the age panel has every rank."""
    panels = {p['title']: p for p in json.load(open(NCCL_DASHBOARD))['panels']}
    table, ages = panels['Stuck collectives'], panels['Time since the last collective, by rank']
    rows = [r for r in stack.query(substitute(table['targets'][0]['expr'])) if r['metric'].get('communicator') == comm]
    named = sorted((r['metric'].get('rank'), r['metric'].get('node'), r['metric'].get('state')) for r in rows)
    print("dashboard 'Stuck collectives': %s" % named)
    if named != [(str(rank.rank), NODE, 'running')]:
        fail("'Stuck collectives' shows %s, expected rank %d on %s, running" % (named, rank.rank, NODE))
    links = [link['url'] for link in table['fieldConfig']['defaults']['links']]
    if not any('/d/vigil-nccl-tcp/' in u and 'var-node=${__data.fields.node}' in u for u in links):
        fail("'Stuck collectives' has no link to the laggard node's dashboard: %s" % links)
    got = sorted(r['metric'].get('rank') for r in stack.query(substitute(ages['targets'][0]['expr']))
                 if r['metric'].get('communicator') == comm)
    if got != [str(r) for r in range(NRANKS)]:
        fail("'%s' shows ranks %s, expected 0-%d" % (ages['title'], got, NRANKS - 1))


def main():
    require_root()
    agent_bin, ranks_bin = sys.argv[1], sys.argv[2]
    unique_id, hostile_id = os.urandom(128), os.urandom(128)
    ranks = []
    try:
        with Agent(agent_bin, 'probes: {tcp: false, cuda: false}\ngrace_period: 1s\n') as agent:
            ranks = [Rank(ranks_bin, r, unique_id) for r in range(NRANKS)]
            wait_attached(agent, 'nccl', mapped_path(ranks[0].pid, 'libnccl.so'), timeout=30)
            for r in ranks:
                r.send('init')
            for r in ranks:
                r.expect('ready')
            for r in ranks:
                r.send('50')
            for r in ranks:
                r.expect('done 50')
            time.sleep(0.5)
            check_ids(agent, ranks, unique_id)
            check_cap(agent, ranks_bin, ranks, unique_id, hostile_id)

            comm = fnv1a64(unique_id)
            with Stack(agent_scrape(agent), RULE_OVERRIDES) as stack:
                wait_for('agent target up', lambda: stack.targets_up(['vigil-agent']), 30)
                for r in ranks:
                    r.send('loop')
                time.sleep(WAIT_S + 2)  # running longer than the threshold: nobody is named
                check_quiet(stack, 'while every rank runs', comm)

                stopped = ranks[STOPPED]
                since = time.time()
                os.kill(stopped.pid, signal.SIGSTOP)
                alert = wait_page(stack, since, stopped, 'running', page_budget(2), comm)
                check_stuck_panels(stack, stopped, comm)
                check_waiting(alert, ranks, stopped)

                since = time.time()
                os.kill(stopped.pid, signal.SIGCONT)
                wait_resolved(stack, since, comm)

                killed = ranks[KILLED]
                since = time.time()
                killed.p.kill()
                killed.p.wait()
                wait_page(stack, since, killed, 'gone', page_budget(4), comm)
    finally:
        for r in ranks:
            if r.p.poll() is None:
                r.p.kill()
                r.p.wait()
        for path in segments(unique_id) + segments(hostile_id, HOSTILE_COMMS):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    print("ok")


if __name__ == '__main__':
    main()
