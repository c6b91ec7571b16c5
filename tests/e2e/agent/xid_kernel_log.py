#!/usr/bin/env python3
"""XIDs from the kernel log, end to end (#45). The agent reads a FIFO of records in /dev/kmsg's
format that the test writes (the only seam: `xid.kernel_log`); the test's own list of the lines
it wrote is the record the agent's counts must equal exactly:
- kernel XID lines counted by GPU, code, class and process; a line of the user facility (what a
  process writing to /dev/kmsg gets) is never counted, only reported as forged;
- a restart (SIGTERM, then SIGKILL) on the same pinned state, with the "kernel" handing out its
  whole buffer again plus new records: nothing counted twice, nothing new missed; a gap in the
  sequence numbers is counted as lost records;
- a flood (100,000 records, 20,000 XID lines from 5,000 process names): every XID counted, the
  series bounded (process="" past the limit), the agent's memory bounded, /metrics answering.
The forged line on the real /dev/kmsg is agent_kmsg_reader_test's.
usage: xid_kernel_log.py VIGIL_AGENT"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, parse_metrics, remove_pins, restart_pins, select, total
from vigil_harness.fail import fail, require_root

SERIES_LIMIT = 1024  # XidLedger::kMaxSeries


class KernelLog:
    """A FIFO the agent reads as its kernel log; records numbered as the kernel numbers them."""

    def __init__(self, directory):
        self.path = os.path.join(directory, 'kmsg')
        os.mkfifo(self.path, 0o600)
        self.fd = os.open(self.path, os.O_RDWR)  # held open: the agent never sees the end
        self.buffer = []  # every record "written by the kernel" so far, as the kernel keeps them

    def emit(self, lines, facility=0, level=4, seq=None):
        for text in lines:
            n = len(self.buffer) if seq is None else seq
            self.buffer.append('%d,%d,%d,-;%s\n SUBSYSTEM=pci\n' % (facility * 8 + level, n, 1000 + n, text))
            seq = None
            self._write(self.buffer[-1])

    def replay(self):
        """The whole buffer again, as /dev/kmsg hands it to a reader that just opened it."""
        self._write(''.join(self.buffer))

    def _write(self, data):
        data = data.encode()
        while data:
            data = data[os.write(self.fd, data):]


def xid_line(gpu, code, text, process=None):
    who = 'pid=%d, name=%s, ' % (4242, process) if process else ''
    return 'NVRM: Xid (PCI:%s): %d, %s%s' % (gpu, code, who, text)


def counts(scrape):
    return {(l['gpu'], l['xid'], l['class'], l['process']): v for l, v in select(scrape, 'gpu_xid_errors_total')}


def wait_for(agent, check, timeout=60):
    """The first scrape CHECK accepts, or the last one at TIMEOUT; polled without promtool, the
    scrape returned checked by it."""
    deadline = time.time() + timeout
    while not check(parse_metrics(agent.get('/metrics'))) and time.time() < deadline:
        time.sleep(0.1)
    return agent.scrape()


def expect(agent, want, forged, lost, what):
    s = wait_for(agent, lambda s: counts(s) == want and total(s, 'vigil_agent_xid_forged_lines_total') == forged)
    got = counts(s)
    if got != want:
        fail('%s: gpu_xid_errors_total %s, the lines written say %s' % (what, got, want))
    for name, value in (('vigil_agent_xid_forged_lines_total', forged), ('vigil_agent_kmsg_records_lost_total', lost)):
        if total(s, name) != value:
            fail('%s: %s = %s, expected %s' % (what, name, total(s, name), value))
    print('%s: %s; forged %d, lost %d' % (what, sorted(got.items()), forged, lost), flush=True)


def saved_position(root):
    """The agent's pinned kernel log position (the next record it would read), read with bpftool."""
    r = subprocess.run(['bpftool', '-j', 'map', 'lookup', 'pinned', root + '/v1/xid/kmsg_next_seq', 'key', '0', '0', '0', '0'],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return int.from_bytes(bytes(int(b, 16) for b in json.loads(r.stdout)['value']), 'little')


def halt(agent, sig):
    """Stops AGENT with SIG, its pinned state left for the next one."""
    agent.proc.send_signal(sig)
    agent.proc.wait(timeout=60)
    os.unlink(agent.cfg.name)
    if sig == signal.SIGTERM and agent.proc.returncode != 0:
        fail('agent exited %d after SIGTERM: %s' % (agent.proc.returncode, agent.log_text()))


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS:'))


def main():
    require_root()
    agent_bin = sys.argv[1]
    _, root, pin_args = restart_pins('xid-kernel-log', [])
    tmp = tempfile.mkdtemp(prefix='xid_kernel_log.')
    log = KernelLog(tmp)
    config = 'probes: {tcp: false, cuda: false, nccl: false, usdt: false}\nxid: {kernel_log: %s}\n' % log.path
    a = '0000:cb:00'
    b = '0000:3b:00'
    agent = None
    try:
        log.emit(['usb 1-1: new high-speed USB device number 2',
                  xid_line(a, 79, 'GPU has fallen off the bus.', 'python3'),
                  "NVRM: Xid (PCI:%s): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception" % b,
                  xid_line(b, 13, 'Graphics SM Global Exception'),
                  'NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9).'])
        log.emit([xid_line(a, 48, 'DBE (forged by a process)', 'evil')], facility=1)  # LOG_USER
        want = {(a + '.0', '79', 'fatal', 'python3'): 1, (b + '.0', '13', 'application', ''): 2,
                ('0000:01:00.0', '94', 'hardware', ''): 1}
        agent = Agent(agent_bin, config, pin_args)
        if 'xid: kernel log %s from record 0; tracepoint absent' % log.path not in agent.log_text():
            fail('start line: ' + agent.log_text())
        expect(agent, want, forged=1, lost=0, what='first agent')
        # SIGTERM: a new agent on the same pins reads the whole buffer again, counts only what is new.
        halt(agent, signal.SIGTERM)
        agent = Agent(agent_bin, config, pin_args)
        if 'from record %d;' % len(log.buffer) not in agent.log_text():
            fail('the restarted agent does not resume at record %d: %s' % (len(log.buffer), agent.log_text()))
        log.replay()
        log.emit([xid_line(a, 31, 'MMU Fault: ENGINE GRAPHICS', 'pt_main_thread')])
        want = {(a + '.0', '31', 'application', 'pt_main_thread'): 1}
        expect(agent, want, forged=0, lost=0, what='after SIGTERM (counters restart, old lines not recounted)')
        # SIGKILL: the position saved as it read is enough; 3 records the kernel overwrote count as lost.
        # Killed only once the position is saved past what it counted (it is saved right after each
        # record: a kill between the count and the save would read that one record again).
        deadline = time.time() + 20
        while saved_position(root) != len(log.buffer) and time.time() < deadline:
            time.sleep(0.05)
        if saved_position(root) != len(log.buffer):
            fail('position %s saved, %d read' % (saved_position(root), len(log.buffer)))
        halt(agent, signal.SIGKILL)
        agent = Agent(agent_bin, config, pin_args)
        log.replay()
        n = len(log.buffer)
        log.buffer += ['lost\n'] * 3  # overwritten before anyone read them
        log.emit([xid_line(a, 79, 'GPU has fallen off the bus.', 'python3')])
        want = {(a + '.0', '79', 'fatal', 'python3'): 1}
        expect(agent, want, forged=0, lost=3, what='after SIGKILL, records %d-%d overwritten' % (n, n + 2))

        # A flood: 100,000 records, every fifth an XID line, from 5,000 process names.
        rss_before = rss_kib(agent.proc.pid)
        started = time.time()
        lines = []
        for i in range(100000):
            lines.append(xid_line(b, 43, 'Ch 0000%04x' % (i % 100), 'p%d' % (i // 5 % 5000)) if i % 5 == 0
                         else 'kernel: flood line %d' % i)
        log.emit(lines)
        flood_xids = 20000
        s = wait_for(agent, lambda s: total(s, 'vigil_agent_xid_log_lines_total') >= 1 + flood_xids, timeout=120)
        elapsed = time.time() - started
        got = counts(s)
        flood = {k: v for k, v in got.items() if k[1] == '43'}
        if sum(flood.values()) != flood_xids:
            fail('flood: %d XIDs counted, %d written' % (sum(flood.values()), flood_xids))
        if len(got) > SERIES_LIMIT + 2:
            fail('flood: %d series, more than the limit %d (+ process="")' % (len(got), SERIES_LIMIT))
        dropped = total(s, 'vigil_agent_xid_series_dropped_total')
        if flood.get((b + '.0', '43', 'application', ''), 0) != dropped or dropped == 0:
            fail('flood: process="" holds %s, dropped says %s' % (flood.get((b + '.0', '43', 'application', '')), dropped))
        growth = rss_kib(agent.proc.pid) - rss_before
        if growth > 64 * 1024:
            fail('flood: the agent grew by %d KiB' % growth)
        print('flood: 100000 records, %d XIDs in %.1f s; %d series, %d under process=""; RSS +%d KiB'
              % (flood_xids, elapsed, len(got), dropped, growth), flush=True)
        agent.stop()
    finally:
        if agent and agent.proc.poll() is None:  # a failure above: no agent outlives the test
            agent.proc.kill()
            agent.proc.wait()
        os.close(log.fd)
        os.unlink(log.path)
        os.rmdir(tmp)
        if os.path.exists(root):
            remove_pins(agent_bin, root)
    print('ok')


if __name__ == '__main__':
    main()
