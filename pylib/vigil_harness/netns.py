"""Two network namespaces joined by a veth pair (A_ADDR, B_ADDR), nftables loss on either side,
and the kernel's own TCP counters and socket state read inside a namespace: what the TCP tests,
the alerting e2e and the fleet recording put traffic through."""
import os
import re
import time

from vigil_harness.agent import sh
from vigil_harness.fail import fail

LOSS_PERCENT = 5
A_ADDR, B_ADDR = '10.213.0.1', '10.213.0.2'


def retrans_segs(ns):
    """RetransSegs from the Tcp: lines of /proc/net/snmp as seen inside namespace NS."""
    text = sh('ip', 'netns', 'exec', ns, 'cat', '/proc/net/snmp').stdout
    tcp = [l.split() for l in text.splitlines() if l.startswith('Tcp:')]
    return int(tcp[1][tcp[0].index('RetransSegs')])


def kernel_socket(ns, dst):
    """rto, lastack and backoff (seconds, seconds, count) of the one socket to DST (address:port)
    in namespace NS, from the kernel's tcp_info as `ss -ti` prints it."""
    out = sh('ip', 'netns', 'exec', ns, 'ss', '-tin', 'dst', dst).stdout
    rto = re.findall(r'\brto:([\d.]+)', out)
    if len(rto) != 1:
        fail('want one socket to %s with an rto in `ss -ti`: %s' % (dst, out))
    # ss leaves out lastack and backoff while they are 0 (an ack this millisecond, no timeout yet).
    lastack, backoff = re.search(r'\blastack:(\d+)', out), re.search(r'\bbackoff:(\d+)', out)
    return (float(rto[0]) / 1e3, float(lastack.group(1)) / 1e3 if lastack else 0.0,
            int(backoff.group(1)) if backoff else 0)


def tcp_ext(ns, field):
    """A TcpExt: counter of /proc/net/netstat as seen inside namespace NS."""
    text = sh('ip', 'netns', 'exec', ns, 'cat', '/proc/net/netstat').stdout
    ext = [l.split() for l in text.splitlines() if l.startswith('TcpExt:')]
    return int(ext[1][ext[0].index(field)])


class Namespaces:
    def __init__(self):
        tag = '%d%04d' % (os.getpid() % 100000, int(time.time()) % 10000)
        self.a, self.b = 'vigil-a-' + tag, 'vigil-b-' + tag
        self.va, self.vb = 'vga' + tag[-8:], 'vgb' + tag[-8:]

    def __enter__(self):
        for ns in (self.a, self.b):
            sh('ip', 'netns', 'add', ns)
        sh('ip', 'link', 'add', self.va, 'netns', self.a, 'type', 'veth', 'peer', 'name', self.vb, 'netns', self.b)
        for ns, dev, addr in ((self.a, self.va, A_ADDR), (self.b, self.vb, B_ADDR)):
            sh('ip', '-n', ns, 'addr', 'add', addr + '/24', 'dev', dev)
            sh('ip', '-n', ns, 'link', 'set', dev, 'up')
            sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
        return self

    def nft(self, ns, percent):
        """Drops PERCENT % of TCP packets arriving in namespace NS (100 = blackhole), none at 0.
        Drops happen on the receiving side: a drop in the sender's own output hook is reported
        back to TCP, which then sends the segment again as new data, not as a retransmit."""
        sh('ip', 'netns', 'exec', ns, 'nft', 'flush', 'ruleset')
        if percent:
            for cmd in ('add table inet vigil',
                        'add chain inet vigil in { type filter hook input priority 0; }',
                        'add rule inet vigil in meta l4proto tcp %s counter drop'
                        % ('' if percent >= 100 else 'numgen random mod 100 lt %d' % percent)):
                sh('ip', 'netns', 'exec', ns, 'nft', cmd)

    def dropped(self, ns):
        """Packets the loss rule of namespace NS has dropped since nft() set it (its own counter):
        the witness that a test's loss happened, apart from what TCP made of it."""
        out = sh('ip', 'netns', 'exec', ns, 'nft', 'list', 'ruleset').stdout
        counts = re.findall(r'counter packets (\d+) bytes \d+ drop', out)
        return int(counts[0]) if counts else 0

    def drop_synacks(self, ns):
        """Drops every SYN-ACK arriving in namespace NS, until the next nft() call."""
        sh('ip', 'netns', 'exec', ns, 'nft', 'flush', 'ruleset')
        for cmd in ('add table inet vigil',
                    'add chain inet vigil in { type filter hook input priority 0; }',
                    'add rule inet vigil in tcp flags & (syn | ack) == syn | ack counter drop'):
            sh('ip', 'netns', 'exec', ns, 'nft', cmd)

    def __exit__(self, *exc):
        for ns in (self.a, self.b):
            sh('ip', 'netns', 'del', ns, check=False)
