#!/usr/bin/env python3
"""A neighbour reset by 20,000 addresses cannot fill the TCP set's table of (process, peer)
counters (16,384 for the node) and blind it for everyone else (#28 item 4). In namespace A a
flooder connects once to each of 20,000 addresses of a /16 that namespace B answers for (a local
route: every address refuses with a reset); then a victim, a copy of tcp_bulk named
refused_victim, is refused 20 times by B's own address. Both must be counted exactly against
their own records: the flooder's refusals all in its reset count (past 1,024 peers, in one
"other" entry of its own), the victim's 20 equal to the kernel's AttemptFails; no insert into a
full table. Before, the flooder's 16,384th peer filled the table and every later reset on the
node, the victim's included, was not counted.
usage: peer_flood.py VIGIL_AGENT TCP_BULK"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, sh, total
from vigil_harness.fail import fail, require_root

A_ADDR, B_ADDR = '10.215.0.1', '10.215.0.2'
FLOOD_NET = '10.61'  # B answers for 10.61.0.0/16
ADDRESSES = 20000
VICTIM_TRIES = 20

# Connects once to each address, without waiting for one before the next; counts the refusals
# it sees itself (its truth). Named peer_flood (its comm) so its series are its own.
FLOODER = r'''
import ctypes, errno, select, socket, sys
ctypes.CDLL(None).prctl(15, b"peer_flood", 0, 0, 0)
net, n = sys.argv[1], int(sys.argv[2])
refused = 0
for first in range(0, n, 500):
    socks = []
    for i in range(first, min(n, first + 500)):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(('%s.%d.%d' % (net, 1 + i // 250, 1 + i % 250), 9))
        socks.append(s)
    pending = list(socks)
    while pending:
        _, ready, _ = select.select([], pending, [], 5)
        if not ready:
            break
        for s in ready:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED:
                refused += 1
            pending.remove(s)
    for s in socks:
        s.close()
print(refused)
'''


def netns(tag):
    a, b, va, vb = 'vigil-fa-' + tag, 'vigil-fb-' + tag, 'vfa' + tag[-8:], 'vfb' + tag[-8:]
    for ns in (a, b):
        sh('ip', 'netns', 'add', ns)
    sh('ip', 'link', 'add', va, 'netns', a, 'type', 'veth', 'peer', 'name', vb, 'netns', b)
    for ns, dev, addr in ((a, va, A_ADDR), (b, vb, B_ADDR)):
        sh('ip', '-n', ns, 'addr', 'add', addr + '/24', 'dev', dev)
        sh('ip', '-n', ns, 'link', 'set', dev, 'up')
        sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
    sh('ip', '-n', b, 'route', 'add', 'local', FLOOD_NET + '.0.0/16', 'dev', 'lo')
    sh('ip', '-n', a, 'route', 'add', FLOOD_NET + '.0.0/16', 'via', B_ADDR)
    return a, b


def attempt_fails(ns):
    text = sh('ip', 'netns', 'exec', ns, 'cat', '/proc/net/snmp').stdout
    tcp = [l.split() for l in text.splitlines() if l.startswith('Tcp:')]
    return int(tcp[1][tcp[0].index('AttemptFails')])


def main():
    require_root()
    agent_bin, bulk = sys.argv[1], sys.argv[2]
    tag = '%d%04d' % (os.getpid() % 100000, int(time.time()) % 10000)
    a, b = netns(tag)
    victim = os.path.join(tempfile.mkdtemp(prefix='vigil-flood-'), 'refused_victim')
    shutil.copy(bulk, victim)
    try:
        with Agent(agent_bin, 'probes: {cuda: false, nccl: false}\n') as agent:
            before = attempt_fails(a)
            out = subprocess.run(['ip', 'netns', 'exec', a, sys.executable, '-c', FLOODER, FLOOD_NET, str(ADDRESSES)],
                                 capture_output=True, text=True, timeout=240)
            refused = int(out.stdout.strip() or 0)
            victim_before = attempt_fails(a)
            for _ in range(VICTIM_TRIES):
                if subprocess.run(['ip', 'netns', 'exec', a, victim, 'connect', B_ADDR, '5999', '0'],
                                  capture_output=True).returncode == 0:
                    fail('a connect to a closed port succeeded')
            victim_kernel = attempt_fails(a) - victim_before
            time.sleep(1.0)
            s = agent.scrape()
            flood = total(s, 'tcp_resets_total', comm='peer_flood', direction='received')
            ours = total(s, 'tcp_resets_total', comm='refused_victim', direction='received')
            print('flooder: %d addresses, %d refusals seen by itself, kernel AttemptFails %d; agent: resets received %d'
                  % (ADDRESSES, refused, victim_before - before, flood))
            print('victim: kernel AttemptFails %d; agent: resets received %d' % (victim_kernel, ours))
            if refused < ADDRESSES * 0.99:
                fail('only %d of %d addresses refused the flooder: the local route did not work' % (refused, ADDRESSES))
            if flood != refused:
                fail("the flooder's resets: agent %d, its own count %d" % (flood, refused))
            if victim_kernel != VICTIM_TRIES or ours != victim_kernel:
                fail('the victim beside the flooder: agent %d, kernel %d' % (ours, victim_kernel))
            full = total(s, 'vigil_agent_table_full_total', require=True, set='tcp')
            print('inserts refused by a full tcp table: %d' % full)
            if full:
                fail('%d inserts refused by a full tcp table: one process filled it' % full)
    finally:
        for ns in (a, b):
            sh('ip', 'netns', 'del', ns, check=False)
        shutil.rmtree(os.path.dirname(victim), ignore_errors=True)
    print('ok')


if __name__ == '__main__':
    main()
