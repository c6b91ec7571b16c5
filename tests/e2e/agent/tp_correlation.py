#!/usr/bin/env python3
"""Collective/TCP correlation end to end: two vigil-worker ranks (serve --tp 2) in two network
namespaces joined by a veth pair, the agent on the host.

Clean run: a request completes with no risk and no timeout counted for either rank, and the
agent's retransmits of the processes in each namespace equal the kernel's RetransSegs there (a clean
link has tail-loss probes and spurious timeouts too); then rank 1 is stopped (SIGSTOP), rank 0's collective times out with TCP healthy (the stopped peer's kernel
still acknowledges), and the agent must count that timeout as *uncorrelated*, nothing for rank 1.
Faulty run: random loss on the link while a long generation runs (the agent's retransmits of the
processes in each namespace equal the kernel's RetransSegs there), then a blackhole: the risk
gauge of *both* ranks must pass 0.5 before a collective times out, and both ranks' timeouts must
be counted as correlated, none as uncorrelated, although the rank that only waits to receive
never retransmits itself (its peer's end of the same connection backs off).
Both comparisons with RetransSegs carry a witness of the retransmit tracepoint
(pylib/vigil_harness/tcp_witness.py): equal exactly, unless the kernel skipped the agent's program
for an event of a namespace's sockets that no later event of its socket made up for; it names them.
usage: tp_correlation.py VIGIL_AGENT VIGIL_WORKER MODEL"""
import os
import shutil
import signal
import sys
import tempfile
import time

from vigil_harness.agent import Agent, declared_total, sh, total
from vigil_harness.fail import fail, require_root
from vigil_harness.netns import Namespaces, retrans_segs
from vigil_harness.tcp_witness import SocketsIn, TcpWitness, any_of, between
from vigil_harness.tp_group import complete, start_group

TIMEOUT_S = 8
LOSS_PERCENT = 5


def link_loss(nets, percent):
    """Drops PERCENT % (100: all) of the TCP packets arriving over the veth, in both namespaces.
    Matched on the veth so loopback (rank 0's HTTP) is untouched; dropped on input, so the sender's
    TCP sees a loss and retransmits."""
    for ns, dev in ((nets.a, nets.va), (nets.b, nets.vb)):
        sh('ip', 'netns', 'exec', ns, 'nft', 'flush', 'ruleset')
        if percent:
            sh('ip', 'netns', 'exec', ns, 'nft', 'add table inet vigil_tp')
            sh('ip', 'netns', 'exec', ns, 'nft', 'add chain inet vigil_tp in { type filter hook input priority 0; }')
            sh('ip', 'netns', 'exec', ns, 'nft', 'add rule inet vigil_tp in iifname "%s" meta l4proto tcp %s counter drop'
               % (dev, '' if percent >= 100 else 'numgen random mod 100 lt %d' % percent))


def correlation(samples, pid, name):
    """A rank's timeouts of NAME: no series before its first failed collective (the risk gauge,
    required where it matters, carries the rank's labels), but the family must be declared."""
    return declared_total(samples, name, pid=pid, source='worker', kind='timeout')


def classified(samples, rank):
    """(correlated, uncorrelated) collective timeouts the agent counted for RANK."""
    return (correlation(samples, rank.pid, 'nccl_tcp_correlated_timeouts_total'),
            correlation(samples, rank.pid, 'nccl_tcp_uncorrelated_timeouts_total'))


def own_sockets(r0, r1):
    """Each namespace's own sockets, as the witness sees their retransmits: those `ss` lists there
    (the ranks' connection), and in rank 0's namespace the loopback to its HTTP port (curl's
    connection, whose server end is gone once closed)."""
    return {r0.ns: SocketsIn(r0.ns, also=between(('127.0.0.1',), ports=(r0.port,))), r1.ns: SocketsIn(r1.ns)}


def counts(agent, namespaces):
    """A read of each namespace's RetransSegs and of the agent, for a witness mark."""
    return lambda: ({ns: retrans_segs(ns) for ns in namespaces}, agent.scrape() if agent else None)


def start_mark(witness, nets, limit_s=20):
    """The baseline of a run, taken before its ranks start: the agent's counts of their pids are
    totals since they began (a spurious timeout while they connect is theirs), so the kernel's
    must be counted from before that too; and once no connection of an earlier run is left to
    retransmit in the namespaces (TIME-WAIT sends nothing)."""
    deadline = time.time() + limit_s
    while any(sh('ip', 'netns', 'exec', ns, 'ss', '-Htan', 'state', 'all', 'exclude', 'time-wait',
                 'exclude', 'listening').stdout.strip() for ns in (nets.a, nets.b)):
        if time.time() > deadline:
            fail('connections of the previous run still open %d s after it' % limit_s)
        time.sleep(0.2)
    return witness.mark(counts(None, (nets.a, nets.b)))


def settled_scrape(agent, witness, ranks, own):
    """A scrape together with each namespace's RetransSegs, read between two retransmits of the
    test's sockets (OWN). Retransmits go on after the loss ends (a tail-loss probe, an RTO already
    armed, a spurious timeout on a loaded machine): one that lands between the scrape and the
    kernel read looks like a miss of the agent's, although the next scrape has it."""
    for sockets in own.values():
        sockets.refresh()
    return witness.settled_mark(counts(agent, [r.ns for r in ranks]), any_of(*own.values()))


def compare_retransmits(phase, witness, start, end, ranks, own):
    """The agent's retransmits in END's scrape of each rank and the other processes in its
    namespace (RANKS: (rank, [pid])) against the kernel's RetransSegs there since START, through
    the witness (OWN: each namespace's sockets). Rank 0's namespace also holds the curl client
    (loopback to rank 0's HTTP port): its sockets are the kernel's too, so they count on both
    sides. A process without retransmits has no series."""
    kernel, s = end.value
    account = None
    for r, others in ranks:
        seen = {pid: total(s, 'tcp_retransmits_total', pid=pid) for pid in [r.pid] + others}
        got = kernel[r.ns] - start.value[0][r.ns]
        print('%s: namespace of rank pid %d: agent %s retransmits, kernel RetransSegs %d' % (phase, r.pid, seen, got))
        print('   by peer: %s; unattributed (no owner known): %d' % (
            [(l.get('peer'), v) for n, l, v in s if n == 'tcp_retransmits_total' and int(l.get('pid', -1)) in seen],
            total(s, 'tcp_retransmits_total', pid=0)))
        account = witness.account(start, end, own[r.ns])
        witness.check('%s, namespace of rank %d' % (phase, r.rank), account, 'tcp_retransmit_skb',
                      sum(seen.values()), got, 'segments')


def clean_run(agent, witness, nets, worker, model, tmp):
    start = start_mark(witness, nets)
    r0, r1 = start_group(nets, worker, model, tmp, 'clean', TIMEOUT_S)
    try:
        own = own_sockets(r0, r1)
        curl, out = complete(r0, 16)
        if out.count('"text"') < 16 or '[DONE]' not in out:
            fail('clean request did not complete: ' + out[-300:])
        end = settled_scrape(agent, witness, (r0, r1), own)
        s = end.value[1]
        compare_retransmits('clean', witness, start, end, ((r0, [curl]), (r1, [])), own)
        for r in (r0, r1):
            risk = select_one(s, 'nccl_tcp_timeout_risk_ratio', r.pid)
            print('clean: pid %d risk %s, retransmits %d, correlated %d, uncorrelated %d' % (
                r.pid, risk, total(s, 'tcp_retransmits_total', pid=r.pid),
                correlation(s, r.pid, 'nccl_tcp_correlated_timeouts_total'),
                correlation(s, r.pid, 'nccl_tcp_uncorrelated_timeouts_total')))
            if risk is None:
                fail('no risk gauge for rank pid %d: the collective probes did not reach the agent' % r.pid)
            print('   latest retransmit: rto %s s, backoff %s, consecutive %s, stall %s s' % tuple(
                select_one(s, n, r.pid) for n in ('tcp_rto_seconds', 'tcp_backoff', 'tcp_consecutive_retransmits',
                                                  'tcp_stall_seconds')))
            if risk != 0:
                fail('risk on a clean link')
            if declared_total(s, 'nccl_tcp_correlated_timeouts_total', pid=r.pid) + \
                    declared_total(s, 'nccl_tcp_uncorrelated_timeouts_total', pid=r.pid) != 0:
                fail('a timeout counted in a clean run')
        # A timeout with TCP healthy: rank 1 stops; rank 0 waits out its collective.
        os.kill(r1.pid, signal.SIGSTOP)
        complete(r0, 8)
        code = r0.wait_exit(TIMEOUT_S + 15)
        if code != 3:
            fail('rank 0 did not exit 3 after its timeout: %s %s' % (code, ''.join(r0.log)[-500:]))
        s = wait_for_counts(agent, (r0,), 1)
        print('stopped peer: rank 0 timeouts counted (correlated, uncorrelated) %s; stopped rank 1 %s' % (
            classified(s, r0), classified(s, r1)))
        if classified(s, r0) != (0, 1):
            fail('a timeout without TCP trouble must be exactly one uncorrelated timeout')
        if classified(s, r1) != (0, 0):
            fail('the stopped rank failed no collective, yet a timeout was counted for it')
    finally:
        r0.kill()
        r1.kill()


def wait_for_counts(agent, ranks, n, limit_s=5):
    """A scrape once each of RANKS has N timeouts counted (the agent reads failures within its
    poll interval), or the last scrape at the limit."""
    deadline = time.time() + limit_s
    while True:
        s = agent.scrape()
        if all(sum(classified(s, r)) >= n for r in ranks) or time.time() > deadline:
            return s
        time.sleep(0.1)


def select_one(samples, name, pid):
    rows = [v for n, l, v in samples if n == name and l.get('pid') == str(pid)]
    return rows[0] if rows else None


def faulty_run(agent, witness, nets, worker, model, tmp):
    start = start_mark(witness, nets)
    r0, r1 = start_group(nets, worker, model, tmp, 'faulty', TIMEOUT_S)
    client = None
    try:
        own = own_sockets(r0, r1)
        client = complete(r0, 1500, background=True)  # within the 2048-token context
        time.sleep(2)
        link_loss(nets, LOSS_PERCENT)
        time.sleep(6)
        link_loss(nets, 0)
        end = settled_scrape(agent, witness, (r0, r1), own)
        compare_retransmits('loss %d%%' % LOSS_PERCENT, witness, start, end, ((r0, [client.pid]), (r1, [])), own)
        if any(end.value[0][r.ns] == start.value[0][r.ns] for r in (r0, r1)):
            fail('no retransmit in a namespace under %d%% loss: the loss rule did not work' % LOSS_PERCENT)
        if r0.proc.poll() is not None:
            fail('rank 0 died under %d%% loss: %s' % (LOSS_PERCENT, ''.join(r0.log)[-500:]))
        link_loss(nets, 100)
        blackhole = time.time()
        crossed = {}
        while time.time() - blackhole < TIMEOUT_S + 15:
            s = agent.scrape()
            failed = sum(sum(classified(s, r)) for r in (r0, r1))
            for r in (r0, r1):
                risk = select_one(s, 'nccl_tcp_timeout_risk_ratio', r.pid) or 0
                if r.pid not in crossed and risk > 0.5:
                    crossed[r.pid] = time.time() - blackhole
                    print('rank pid %d: risk %.3f > 0.5 at %.1f s after the blackhole, %d timeouts counted so far' % (
                        r.pid, risk, crossed[r.pid], failed))
                    if failed:
                        fail('the risk gauge passed 0.5 only after a timeout was counted')
            if all(sum(classified(s, r)) for r in (r0, r1)):
                break
            time.sleep(0.25)
        took = time.time() - blackhole
        codes = (r0.wait_exit(5), r1.wait_exit(5))
        s = wait_for_counts(agent, (r0, r1), 1)
        print('blackhole: ranks exit %s after %.1f s; timeouts (correlated, uncorrelated): rank 0 %s, rank 1 %s' % (
            codes, took, classified(s, r0), classified(s, r1)))
        for r in (r0, r1):
            if r.pid not in crossed:
                fail('the risk gauge of rank pid %d never passed 0.5' % r.pid)
        if codes[0] != 3:
            fail('rank 0 did not exit 3 after its collective timed out: %s' % ''.join(r0.log)[-500:])
        for i, r in enumerate((r0, r1)):
            if classified(s, r) != (1, 0):
                fail("rank %d's collective timeout must be exactly one correlated timeout" % i)
    finally:
        if client:
            client.kill()
            client.wait()
        r0.kill()
        r1.kill()


def main():
    require_root()
    agent_bin, worker, model = sys.argv[1:4]
    tmp = tempfile.mkdtemp(prefix='vigil-tp-corr-')
    with open(os.path.join(tmp, 'worker.yaml'), 'w') as f:
        f.write('engine:\n  threads: 1\n')
    config = 'probes: {cuda: false, nccl: false}\nlibraries: {usdt: [%s]}\n' % os.path.realpath(worker)
    try:
        with TcpWitness('tp-correlation') as witness, Namespaces() as nets, Agent(agent_bin, config) as agent:
            witness.watch(agent.proc.pid)
            clean_run(agent, witness, nets, worker, model, tmp)
            faulty_run(agent, witness, nets, worker, model, tmp)
            witness.unwatch()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print('ok')


if __name__ == '__main__':
    main()
