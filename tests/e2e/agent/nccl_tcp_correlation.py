#!/usr/bin/env python3
"""NCCL/TCP correlation test: a process with NCCL state (ncclGetUniqueId on the real libnccl.so.2)
streams over TCP between two network namespaces; the link is then blackholed with nftables. The
agent must report the stall for that pid — tcp_stall_seconds within the kernel's time since the
peer last acknowledged (`lastack` of `ss -ti` in the sender's namespace) less at most the RTO the
socket had before (the first timeout fires one RTO after the last progress) — and
nccl_tcp_timeout_risk_ratio equal to (stall + next wait) / collective timeout, rising towards 1 as
the backoff grows. The ratio is also checked against the kernel's own view of the socket (`lastack` less the RTO before the blackhole,
plus `rto`: the wait the kernel has armed for the next retransmit).
For correlation across nodes, the process's connection is named by its addresses as the kernel
has them (`ss -tn`): nccl_tcp_collective_peers lists that pair, and tcp_peer_stall_seconds gives
that pair's stall while (and only while) it is stalled, equal to the process's tcp_stall_seconds.
A witness of the retransmit tracepoint (pylib/vigil_harness/tcp_witness.py) holds the process's
retransmits to the kernel's RetransSegs at each scrape, and tells a stale stall from a wrong one: if
the kernel did not run the agent's program for the socket's latest retransmit, the agent's state is
the one before it (the witness names the event, and only the agent's own consistency is checked).
usage: nccl_tcp_correlation.py VIGIL_AGENT NCCL_STALL TCP_BULK"""
import subprocess
import sys
import time

from vigil_harness.agent import Agent, declared_total, select, sh, total
from vigil_harness.fail import fail, require_root
from vigil_harness.netns import A_ADDR, B_ADDR, Namespaces, kernel_socket, retrans_segs
from vigil_harness.tcp_witness import TcpWitness, between, possibly_last

TIMEOUT_S = 10
PORT = 5203
STREAM = '%s:%d' % (B_ADDR, PORT)
JIFFY_S = 0.010  # lastack counts whole jiffies (rcv_tstamp): off by under one, 10 ms at CONFIG_HZ=100


def kernel_pairs(ns):
    """(local address, peer) of the stream's connection as the kernel lists it (`ss -tn`)."""
    out = sh('ip', 'netns', 'exec', ns, 'ss', '-Htn', 'dst', '%s:%d' % (B_ADDR, PORT)).stdout
    return {(f[3].rsplit(':', 1)[0], f[4].rsplit(':', 1)[0]) for f in (l.split() for l in out.splitlines()) if len(f) >= 5}


def agent_pairs(samples, name, pid):
    return {(l['local_address'], l['peer']): v for l, v in select(samples, name, pid=pid)}


def lost_where(s):
    """Where a retransmit the agent did not record for the pid went: skipped by the kernel (the program
    already running on that CPU) or recorded with no owner (pid 0; sockets of earlier runs left in
    LAST_ACK retransmit there too)."""
    return ("recursion misses (tcp set) %d, unowned: retransmits to %s %d, rto %.3f s, backoff %d"
            % (total(s, 'vigil_agent_recursion_misses_total', require=True, set='tcp'), B_ADDR,
               total(s, 'tcp_retransmits_total', pid=0, peer=B_ADDR), total(s, 'tcp_rto_seconds', pid=0),
               total(s, 'tcp_backoff', pid=0)))


def main():
    require_root()
    agent_bin, stall_bin, bulk = sys.argv[1:4]
    # libnccl attached at start: the process calls NCCL right after exec, before a scan finds it.
    config = ('probes: {cuda: false, usdt: false}\ncorrelation: {collective_timeout: %ds}\n'
              'libraries: {nccl: [/usr/local/cuda/lib64/libnccl.so.2]}\n' % TIMEOUT_S)
    own = between((A_ADDR, B_ADDR), ports=(PORT,), saddr=A_ADDR)  # the stream's sender end, in namespace A
    with TcpWitness('nccl-tcp') as witness, Namespaces() as nets, Agent(agent_bin, config) as agent:
        witness.watch(agent.proc.pid)
        server = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'listen', str(PORT), '0'],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        client = subprocess.Popen(['ip', 'netns', 'exec', nets.a, stall_bin, B_ADDR, str(PORT)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            line = client.stdout.readline()
            pid = int(line.split('pid=')[1].split()[0])
            time.sleep(0.5)
            before = agent.scrape()
            if total(before, 'nccl_calls_total', pid=pid, function='ncclGetUniqueId', result='ncclSuccess') != 1:
                fail("the agent did not see the process's ncclGetUniqueId: " + line)
            risk0 = total(before, 'nccl_tcp_timeout_risk_ratio', require=True, pid=pid)
            # A connection's retransmit series starts at its first retransmit: none yet is right.
            if declared_total(before, 'tcp_retransmits_total', pid=pid) != 0:
                fail("retransmits before the blackhole (a lossy link): the stall's start would be ambiguous")
            rto_before = kernel_socket(nets.a, STREAM)[0]
            pairs = kernel_pairs(nets.a)
            if set(agent_pairs(before, 'nccl_tcp_collective_peers', pid)) != pairs:
                fail("nccl_tcp_collective_peers %s, the kernel's connection %s"
                     % (agent_pairs(before, 'nccl_tcp_collective_peers', pid), pairs))
            if agent_pairs(before, 'tcp_peer_stall_seconds', pid):
                fail("tcp_peer_stall_seconds before the blackhole: %s" % agent_pairs(before, 'tcp_peer_stall_seconds', pid))
            print("nccl_tcp_collective_peers = the kernel's %s" % sorted(pairs))
            start = witness.mark(read=lambda: retrans_segs(nets.a))
            blackhole = time.time()
            nets.nft(nets.b, 100)
            results = []
            for wait in (2.5, 6.0):
                time.sleep(blackhole + wait - time.time())
                # lastack at the scrape lies between the two reads (nothing is acknowledged now).
                first = kernel_socket(nets.a, STREAM)
                scraped = witness.mark(read=agent.scrape)  # nothing else between the two reads of the kernel
                s = scraped.value
                elapsed = time.time() - blackhole
                k_rto, k_lastack, k_backoff = kernel_socket(nets.a, STREAM)
                stall = total(s, 'tcp_stall_seconds', require=True, pid=pid)
                rto = total(s, 'tcp_rto_seconds', require=True, pid=pid)
                backoff = total(s, 'tcp_backoff', require=True, pid=pid)
                risk = total(s, 'nccl_tcp_timeout_risk_ratio', require=True, pid=pid)
                want = (stall + min(2 * rto, 120)) / TIMEOUT_S
                kernel_risk = (k_lastack - rto_before + min(k_rto, 120)) / TIMEOUT_S
                print("%.1f s after the blackhole: tcp_stall_seconds %.3f, tcp_rto_seconds %.3f, tcp_backoff %d, "
                      "nccl_tcp_timeout_risk_ratio %.4f (from stall and rto: %.4f)"
                      % (elapsed, stall, rto, backoff, risk, want))
                print("   kernel (ss -ti): rto %.3f s, lastack %.3f..%.3f s, backoff %d: risk %.4f; "
                      "lastack - stall %.3f..%.3f s, rto before %.3f s" % (
                          k_rto, first[1], k_lastack, k_backoff, kernel_risk, first[1] - stall, k_lastack - stall,
                          rto_before))
                # The counts, read again together between two retransmits of the stream (the socket
                # backs off: one may fire at any read).
                counted = witness.settled_mark(lambda: (retrans_segs(nets.a), agent.scrape()), own)
                witness.check('%.1f s after the blackhole' % wait, witness.account(start, counted, own),
                              'tcp_retransmit_skb', total(counted.value[1], 'tcp_retransmits_total', pid=pid),
                              counted.value[0] - start.value, 'segments')
                # Skipped events of the socket before the scrape that no later one made up for: the
                # agent's latest state may be the one before them.
                stale = possibly_last(witness.account(start, scraped, own)['tcp_retransmit_skb'])
                # The stall runs from the run's first retransmit: a tail-loss probe (10 to 40 ms after the last
                # ack, measured) or else the first timeout, one RTO after it.
                if not (first[1] - rto_before - JIFFY_S <= stall <= k_lastack + JIFFY_S):
                    if not stale:
                        fail("stall %.3f s is not within the kernel's lastack %.3f..%.3f s less at most the RTO "
                             "before the blackhole %.3f s; %s" % (stall, first[1], k_lastack, rto_before, lost_where(s)))
                    print("   stall %.3f s is an earlier retransmit's: the kernel ran no program of ours for %s"
                          % (stall, [e.line for e in stale]))
                if abs(risk - want) > 1e-3:
                    fail("risk ratio %.4f differs from (stall + next wait) / timeout = %.4f" % (risk, want))
                # The two reads are a few ms apart; the first timeout's exact moment is within one
                # RTO of the last progress.
                if abs(risk - kernel_risk) > (rto_before + 0.1) / TIMEOUT_S and not stale:
                    fail("risk ratio %.4f differs from the kernel's view %.4f" % (risk, kernel_risk))
                peer_stall = agent_pairs(s, 'tcp_peer_stall_seconds', pid)
                print("   tcp_peer_stall_seconds %s" % peer_stall)
                if set(peer_stall) != pairs or any(abs(v - stall) > 0.05 for v in peer_stall.values()):
                    fail("tcp_peer_stall_seconds %s: want the kernel's pair %s at the process's stall %.3f"
                         % (peer_stall, pairs, stall))
                results.append(risk)
            print("risk before the blackhole %.4f" % risk0)
            if not (risk0 == 0 and results[0] < results[1]):
                fail("risk did not start at 0 and rise while blackholed")
        finally:
            witness.unwatch()
            client.kill()
            server.kill()
            client.wait()
            server.wait()
    print("ok")


if __name__ == '__main__':
    main()
