#!/usr/bin/env python3
"""TCP truth test: two network namespaces on a veth pair, random loss injected with nftables on a
bulk transfer. The agent's retransmits for the sending pid must equal the kernel's RetransSegs
(/proc/net/snmp read inside the sending namespace), on the right peer, for a connecting sender
and for an accepted (server-side) sender; a listener's SYN-ACK retransmits must equal the kernel's
TCPSynRetrans and name the connecting peer (not the listener's own 0.0.0.0); RTO and backoff must
rise while the link is blackholed, each one timeout behind the kernel's own (`ss -ti`); clients
refused by a reset are counted per program, equal to the kernel's AttemptFails, and their counts
outlive them by a grace period (no per-process series for them).
The retransmit counts are held to the kernel's through a witness of their own (tracefs and the
programs' run counts, pylib/vigil_harness/tcp_witness.py): equal exactly, unless the kernel did
not run the agent's program for an event of the test's, which the witness then names.
usage: tcp_retransmits.py VIGIL_AGENT TCP_BULK"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, promtool_check, select, sh, total
from vigil_harness.fail import fail, require_root
from vigil_harness.netns import A_ADDR, B_ADDR, LOSS_PERCENT, Namespaces, kernel_socket, retrans_segs, tcp_ext
from vigil_harness.tcp_witness import TcpWitness, between
from vigil_harness.wait import wait_for

GRACE_S = 4  # long enough for a scrape after a sender exits, short enough to see it expire
BYTES = 20 * 1024 * 1024
TCP_RTO_MAX_S = 120  # net.ipv4.tcp_rto_max_ms, 120000 by default
MAP_READER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'bpf_map_reader.py')


TRANSFER_PORT = 5201


def transfer(nets, bulk, sender_listens):
    """Runs one lossy transfer from namespace A to B; returns the sender's pid."""
    port = str(TRANSFER_PORT)
    nets.nft(nets.b, LOSS_PERCENT)
    if sender_listens:
        server = subprocess.Popen(['ip', 'netns', 'exec', nets.a, bulk, 'listen', port, str(BYTES)],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        client = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'connect', A_ADDR, port, '0'],
                                  stdout=subprocess.PIPE, text=True)
        sender, receiver = server, client
    else:
        server = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'listen', port, '0'],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        client = subprocess.Popen(['ip', 'netns', 'exec', nets.a, bulk, 'connect', B_ADDR, port, str(BYTES)],
                                  stdout=subprocess.PIPE, text=True)
        sender, receiver = client, server
    out_s, _ = sender.communicate(timeout=90)
    out_r, _ = receiver.communicate(timeout=90)
    counters = sh('ip', 'netns', 'exec', nets.b, 'nft', 'list', 'ruleset').stdout
    if sender.returncode or receiver.returncode:
        fail("transfer failed: %r %r" % (out_s, out_r))
    if 'received=%d' % BYTES not in out_r:
        fail("receiver did not get all bytes: " + out_r)
    nets.nft(nets.b, 0)
    print('loss rule: ' + ' '.join(l.strip() for l in counters.splitlines() if 'counter' in l))
    time.sleep(1.0)  # let TIME_WAIT/FIN handling settle; nothing of ours retransmits after EOF
    return int(out_s.split('pid=')[1].split()[0])


def check_transfer(agent, nets, bulk, sender_listens, witness):
    kind = 'accepted (server-side)' if sender_listens else 'connecting'
    own = between((A_ADDR, B_ADDR), ports=(TRANSFER_PORT,))
    start = witness.mark(read=lambda: retrans_segs(nets.a))
    pid = transfer(nets, bulk, sender_listens)
    # The kernel's counter and the agent read together, between two events of the test's sockets.
    end = witness.settled_mark(lambda: (retrans_segs(nets.a), agent.scrape()), own)
    kernel, samples = end.value[0] - start.value, end.value[1]
    rows = select(samples, 'tcp_retransmits_total', pid=pid)
    ours = sum(v for _, v in rows)
    peers = {l['peer'] for l, v in rows if v > 0}
    comm = {l['comm'] for l, _ in rows}
    print("%s sender pid %d: kernel RetransSegs %d, agent tcp_retransmits_total %d, peers %s, comm %s"
          % (kind, pid, kernel, ours, sorted(peers), sorted(comm)))
    if kernel < 10:
        fail("only %d retransmits with %d%% loss: the loss rule did not work" % (kernel, LOSS_PERCENT))
    # The sender's socket closed under the agent: an event the kernel skipped is settled at close
    # (bpf/tcp.bpf.c settle_at_close), so the count must be exact whatever the witness shows.
    witness.check('%s sender' % kind, witness.account(start, end, own), 'tcp_retransmit_skb', ours, kernel,
                  'segments', recovered=lambda e: True)
    if peers != {B_ADDR}:
        fail("retransmits attributed to peers %s, expected %s" % (peers, B_ADDR))
    if comm != {'tcp_bulk'}:
        fail("comm %s, expected tcp_bulk" % comm)


def check_synack(agent, nets, bulk, witness):
    """The listener in A retransmits its SYN-ACKs while B drops them; then the handshake completes."""
    own = between((A_ADDR, B_ADDR), ports=(5203,))
    start = witness.mark(read=lambda: tcp_ext(nets.a, 'TCPSynRetrans'))
    nets.drop_synacks(nets.b)
    server = subprocess.Popen(['ip', 'netns', 'exec', nets.a, bulk, 'listen', '5203', '0'],
                              stdout=subprocess.PIPE, text=True)
    server.stdout.readline()
    # A map reader on every CPU while the SYN-ACKs are retransmitted (they fire in softirq, on
    # whichever CPU): a program skipped while the kernel copies a map for user space is a lost
    # count (bpf_map_reader.py says why).
    readers = [subprocess.Popen(['taskset', '-c', str(cpu), sys.executable, MAP_READER, '2.5'],
                                stdout=subprocess.PIPE, text=True) for cpu in sorted(os.sched_getaffinity(0))]
    for r in readers:
        r.stdout.readline()
    client = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'connect', A_ADDR, '5203', '0'],
                              stdout=subprocess.PIPE, text=True)
    time.sleep(2.5)  # the first SYN-ACK retransmit comes after 1 s, the next after 3 s
    nets.nft(nets.b, 0)
    print('map readers beside: %s batch reads' % [int(r.communicate(timeout=30)[0]) for r in readers])
    out_s, _ = server.communicate(timeout=60)
    out_c, _ = client.communicate(timeout=60)
    if server.returncode or client.returncode:
        fail("handshake never completed: %r %r" % (out_s, out_c))
    # TCPSynRetrans counts SYN-ACK retransmits (and SYN retransmits: the client is in B, it counts there).
    end = witness.settled_mark(lambda: (tcp_ext(nets.a, 'TCPSynRetrans'), agent.scrape()), own)
    kernel, scrape = end.value[0] - start.value, end.value[1]
    rows = select(scrape, 'tcp_synack_retransmits_total', pid=server.pid)
    ours = sum(v for _, v in rows)
    peers = {l['peer'] for l, v in rows if v > 0}
    print("listener pid %d: kernel TCPSynRetrans %d, agent tcp_synack_retransmits_total %d, peers %s"
          % (server.pid, kernel, ours, sorted(peers)))
    if kernel < 1:
        fail("no SYN-ACK was retransmitted: the drop rule did not work")
    # One count per event: a listener has no per-socket total to settle a skipped one from.
    witness.check('listener', witness.account(start, end, own), 'tcp_retransmit_synack', ours, kernel, 'events')
    if peers != {B_ADDR}:
        fail("SYN-ACK retransmits attributed to peers %s, expected %s" % (peers, B_ADDR))


def one(samples, name, pid):
    """The value of PID's one series of NAME; fails when there is none (absent is not 0)."""
    rows = select(samples, name, pid=pid)
    if len(rows) != 1:
        fail('want one %s series for pid %d, got %s' % (name, pid, rows))
    return rows[0][1]


def timer_against_kernel(agent, ns, dst, pid, witness, own):
    """A scrape's tcp_rto_seconds and tcp_backoff of PID (one socket, to DST in namespace NS)
    against the kernel's, read with `ss -ti` just before and just after the scrape. The agent's are
    those of the timeout that just fired, read at its retransmit; tcp_retransmit_timer then sets
    icsk_backoff + 1 and icsk_rto = min(2 x RTO, TCP_RTO_MAX), which ss shows. A timeout firing
    between the two reads moves the kernel's by one step, so the agent's must be within them.
    The agent may be k timeouts behind only when the witness names the socket's last k retransmits
    (OWN) as run by no BPF program (the kernel's skip, docs/probes-agent.md): then it holds the
    state before them. Returns the agent's state, moved on by those k timeouts."""
    before = kernel_socket(ns, dst)
    s = agent.scrape()
    after = kernel_socket(ns, dst)
    rto, backoff = one(s, 'tcp_rto_seconds', pid), one(s, 'tcp_backoff', pid)
    print("blackholed sender pid %d: agent rto %.3f s, backoff %d; kernel (ss -ti) before/after the scrape: "
          "rto %.3f/%.3f s, backoff %d/%d" % (pid, rto, backoff, before[0], after[0], before[2], after[2]))
    lag = 0
    if not before[2] <= backoff + 1 <= after[2]:
        tail = witness.unrun_tail(own)
        print("blackholed sender: the socket's latest retransmits that no BPF program ran for (%d): %s"
              % (len(tail), [e.line for e in tail]), flush=True)
        if not tail or not before[2] <= backoff + len(tail) + 1 <= after[2]:
            fail("tcp_backoff %d: the kernel's backoff after that timeout (%d..%d) less one is not it, "
                 "and %d skipped retransmits do not explain it" % (backoff, before[2], after[2], len(tail)))
        lag = len(tail)
        print("blackholed sender: the agent is %d timeout(s) behind the kernel, each skipped by it" % lag)
    for _ in range(lag):
        rto = min(2 * rto, TCP_RTO_MAX_S)
    if not before[0] - 1e-6 <= min(2 * rto, TCP_RTO_MAX_S) <= after[0] + 1e-6:
        fail("tcp_rto_seconds %.3f: the kernel's rto after that timeout (%.3f..%.3f s) is not twice it"
             % (rto, before[0], after[0]))
    return rto, backoff + lag


def check_blackhole(agent, nets, bulk, witness):
    server = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'listen', '5202', '0'],
                              stdout=subprocess.PIPE, text=True)
    server.stdout.readline()
    # Far more than fits in 0.5 s: the sender is still sending when the link goes dark.
    client = subprocess.Popen(['ip', 'netns', 'exec', nets.a, bulk, 'connect', B_ADDR, '5202', str(1 << 40)],
                              stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        nets.nft(nets.b, 100)
        pid = client.pid  # ip netns exec execs the program in place: same pid
        dst = '%s:5202' % B_ADDR
        own = between((A_ADDR, B_ADDR), ports=(5202,), saddr=A_ADDR)
        time.sleep(1.0)
        rto1, bo1 = timer_against_kernel(agent, nets.a, dst, pid, witness, own)
        time.sleep(3.5)
        rto2, bo2 = timer_against_kernel(agent, nets.a, dst, pid, witness, own)
        if not (rto2 > rto1 and bo2 > bo1 and bo2 >= 2):
            fail("RTO/backoff did not rise while blackholed")
    finally:
        client.kill()
        server.kill()
        client.wait()
        server.wait()


def check_refused(agent, nets, bulk, clients=20):
    """Short-lived clients connect to a closed port: each receives a reset in SYN_SENT (the kernel
    counts AttemptFails). The agent counts them per container and program, not per process; the
    clients run as a copy of tcp_bulk named refused_client, so no other test's reset counts."""
    nets.nft(nets.b, 0)  # no loss: every SYN is answered
    client = os.path.join(tempfile.mkdtemp(prefix='vigil-refused-'), 'refused_client')
    shutil.copy(bulk, client)
    try:
        q = dict(comm='refused_client', direction='received')
        before_kernel = tcp_snmp(nets.a, 'AttemptFails')
        for _ in range(clients):
            p = subprocess.run(['ip', 'netns', 'exec', nets.a, client, 'connect', B_ADDR, '5999', '0'],
                               capture_output=True, text=True)
            if p.returncode == 0:
                fail("a connect to a closed port succeeded")
        kernel = tcp_snmp(nets.a, 'AttemptFails') - before_kernel
        time.sleep(0.5)
        s = agent.scrape()
        ours = total(s, 'tcp_resets_total', **q)
        print("refused clients: kernel AttemptFails %d, agent tcp_resets_total{comm=refused_client,direction=received} %d"
              % (kernel, ours))
        if kernel != clients or ours != kernel:
            fail("resets received: agent %d, kernel AttemptFails %d, clients %d" % (ours, kernel, clients))
        if any(l.get('pid') for n, l, _ in s if n == 'tcp_resets_total'):
            fail("tcp_resets_total carries pid: one series per refused client")
        if any(l.get('comm') == 'refused_client' for n, l, _ in s if n != 'tcp_resets_total'):
            fail("refused clients have series of their own besides the reset count")
        # Past the grace period the clients' kernel state is dropped and the count stays; one grace
        # period after that the group, with no member left, is dropped too (series stay bounded).
        exited = time.time()
        while time.time() - exited < GRACE_S + 1.5:
            after = total(agent.scrape(), 'tcp_resets_total', **q)
            if after != ours:
                fail("tcp_resets_total went from %d to %d %.1f s after the clients exited" % (ours, after, time.time() - exited))
            time.sleep(0.5)
        # The agent expires on its housekeeping ticks: the clients are retired at the first tick
        # one grace period after their exit events, their group dropped at the first tick one
        # grace period after that. Each stage is waited out in wall time and then in two whole
        # ticks counted by the agent itself, so a machine that delays the ticks delays the checks
        # with them (a stress run beside a CPU-bound benchmark saw the group still there at 11.4 s
        # when the second stage was a fixed sleep).
        whole_ticks(agent)  # the clients are retired by now
        time.sleep(GRACE_S)
        whole_ticks(agent)
        s = agent.scrape()
        left = select(s, 'tcp_resets_total', comm='refused_client')
        if left:
            fail("tcp_resets_total of refused_client still there %.1f s after its last member exited (two grace "
                 "periods, each followed by two whole housekeeping ticks; the last started %.2f s late)"
                 % (time.time() - exited, total(s, 'vigil_agent_housekeeping_lag_seconds')))
        print("refused clients: count kept past their grace period, group gone after the next (%.1f s after they "
              "exited)" % (time.time() - exited))
    finally:
        shutil.rmtree(os.path.dirname(client))


def whole_ticks(agent, n=2):
    """Returns once the agent has completed N housekeeping ticks that started after the call (one
    more than N completed: the first may have been running already)."""
    seen = total(agent.scrape(), 'vigil_agent_housekeeping_ticks_total', require=True)
    wait_for('%d more housekeeping ticks of the agent' % (n + 1),
             lambda: total(agent.scrape(), 'vigil_agent_housekeeping_ticks_total', require=True) >= seen + n + 1, 60)


def tcp_snmp(ns, field):
    text = sh('ip', 'netns', 'exec', ns, 'cat', '/proc/net/snmp').stdout
    tcp = [l.split() for l in text.splitlines() if l.startswith('Tcp:')]
    return int(tcp[1][tcp[0].index(field)])


def main():
    require_root()
    agent_bin, bulk = sys.argv[1], sys.argv[2]
    with TcpWitness('tcp-retransmits') as witness, Namespaces() as nets, \
            Agent(agent_bin, 'probes: {cuda: false, nccl: false}\ngrace_period: %ds\n' % GRACE_S) as agent:
        witness.watch(agent.proc.pid)
        check_transfer(agent, nets, bulk, False, witness)
        check_transfer(agent, nets, bulk, True, witness)
        check_synack(agent, nets, bulk, witness)
        witness.unwatch()
        check_blackhole(agent, nets, bulk, witness)
        check_refused(agent, nets, bulk)
        promtool_check(agent)
    print("ok")


if __name__ == '__main__':
    main()
