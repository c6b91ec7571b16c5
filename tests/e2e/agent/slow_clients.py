#!/usr/bin/env python3
"""No client can starve the agent's endpoint, and liveness follows the work loop (issue #28, item 6).

Phase "deadline": 45 clients trickle a request head one byte a second and 10 open a connection and
send nothing (55, under the cap of 64) for 12 s; phase "cap": 100 tricklers, 30 silent clients (past
the cap) and one client sending a 1 MiB header field, again and again, for 10 s; every client
reconnects a second after the agent cuts it. Meanwhile /healthz, /readyz and /metrics must each
answer within 1 s, every time (latencies printed), the agent's RSS must stay within 16 MiB of its
start, and vigil_agent_http_connections at most 64. The agent's counters are checked against what
the clients saw: every 408 a client read is one rejected{reason="deadline"}, every 1 MiB head one
rejected{reason="too_large"}, and the connections cut at the cap lie between those the clients saw
cut and those plus the ones they closed themselves.

Phase "stall": the housekeeping loop's thread alone is stopped (ptrace PTRACE_SEIZE and
PTRACE_INTERRUPT of the agent's main thread; the HTTP threads run on), as a loop blocked in a
system call would be. /healthz must fail (503, saying why) within the default limit (3 x
poll_interval + 30 s; 30.6 s here) and not before it, and answer 200 again once the thread runs.
usage: slow_clients.py VIGIL_AGENT [PHASES]   (PHASES: comma-separated, default deadline,cap,stall)"""
import asyncio
import ctypes
import os
import socket
import statistics
import sys
import threading
import time

from vigil_harness.agent import Agent, parse_metrics, promtool_check_text, total
from vigil_harness.fail import fail, require_root

CAP = 64
PROBE_LIMIT_S = 1.0
RSS_GROWTH_LIMIT_KIB = 16 * 1024
STALL_LIMIT_S = 3 * 0.2 + 30  # harness poll_interval 200ms, no housekeeping_stall_limit set
PATHS = ('/healthz', '/readyz', '/metrics')
# A head that never ends within the deadline at one byte a second.
TRICKLE = b'GET /metrics HTTP/1.1\r\nHost: agent\r\nX-Slow: ' + b'a' * 4000
BIG = b'GET /metrics HTTP/1.1\r\nHost: agent\r\nX-Big: ' + b'a' * (1 << 20) + b'\r\n\r\n'


class Attack:
    """Slow clients on an asyncio loop of their own thread; counts what they saw."""

    def __init__(self, port, tricklers, silent, big):
        self.port = port
        self.seen = {'connects': 0, 'got_408': 0, 'cut': 0, 'closed_by_us': 0, 'big_sent': 0, 'big_431': 0}
        self.stopping = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete,
                                       args=(self.run(tricklers, silent, big),), daemon=True)
        self.thread.start()

    async def run(self, tricklers, silent, big):
        tasks = [self.slow(True) for _ in range(tricklers)] + [self.slow(False) for _ in range(silent)]
        if big:
            tasks.append(self.big())
        await asyncio.gather(*tasks)

    async def slow(self, trickle):
        while not self.stopping:
            try:
                r, w = await asyncio.open_connection('127.0.0.1', self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            self.seen['connects'] += 1
            answer = asyncio.ensure_future(r.read(4096))  # done when the agent writes or closes
            sent = 0
            while not self.stopping and not answer.done():
                if trickle:
                    w.write(TRICKLE[sent:sent + 1])
                    sent += 1
                await asyncio.wait([answer], timeout=1.0)
            if answer.done():
                try:
                    data = answer.result()
                except OSError:
                    data = b''
                self.seen['got_408' if data.startswith(b'HTTP/1.1 408') else 'cut'] += 1
            else:
                answer.cancel()
                self.seen['closed_by_us'] += 1
            w.close()
            if answer.done() and not self.stopping:
                await asyncio.sleep(1.0)

    async def big(self):
        while not self.stopping:
            try:
                r, w = await asyncio.open_connection('127.0.0.1', self.port)
                self.seen['big_sent'] += 1
                w.write(BIG)
                try:
                    await w.drain()
                except OSError:
                    pass
                data = await asyncio.wait_for(r.read(4096), 5)
                if data.startswith(b'HTTP/1.1 431'):
                    self.seen['big_431'] += 1
                w.close()
            except (OSError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(1.0)

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=10)
        if self.thread.is_alive():
            fail("slow clients did not stop")


def timed_get(port, path, timeout=PROBE_LIMIT_S):
    """(seconds, status, body) of one GET on a fresh connection; raises on timeout."""
    t0 = time.monotonic()
    data = b''
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        s.sendall(b'GET %s HTTP/1.1\r\nHost: agent\r\n\r\n' % path.encode())
        while True:
            left = timeout - (time.monotonic() - t0)
            if left <= 0:
                raise TimeoutError('no full answer in %.1f s' % timeout)
            s.settimeout(left)
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b'\r\n\r\n')
    status = int(head.split()[1]) if head.startswith(b'HTTP/') else 0
    return time.monotonic() - t0, status, body.decode(errors='replace')


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS:'))


def scrape(agent):
    text = agent.get('/metrics')
    promtool_check_text(text)
    return parse_metrics(text)


def counters(s):
    out = {r: total(s, 'vigil_agent_http_rejected_total', require=True, reason=r)
           for r in ('cap', 'deadline', 'too_large', 'bad_request')}
    out['408'] = total(s, 'vigil_agent_http_requests_total', require=True, code=408)
    return out


def hold(agent, name, seconds, tricklers, silent, big):
    """Runs one attack for SECONDS while probing; returns what the clients saw and the counters' deltas."""
    before = scrape(agent)  # read after the attack: an agent without these counters fails on latency first
    base_rss = rss_kib(agent.proc.pid)
    attack = Attack(agent.port, tricklers, silent, big)
    lat = {p: [] for p in PATHS}
    max_rss, max_open = base_rss, 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            for path in PATHS:
                try:
                    took, status, body = timed_get(agent.port, path)
                except OSError as e:
                    fail("%s: %s not answered within %.0f s while %d slow clients hold connections (%s)"
                         % (name, path, PROBE_LIMIT_S, tricklers + silent + big, e))
                if status != 200:
                    fail("%s: %s answered %d: %s" % (name, path, status, body[:200]))
                lat[path].append(took)
                if path == '/metrics':
                    s = parse_metrics(body)
                    max_open = max(max_open, total(s, 'vigil_agent_http_connections', require=True))
            max_rss = max(max_rss, rss_kib(agent.proc.pid))
            time.sleep(0.2)
    finally:
        attack.stop()
    time.sleep(1.5)  # the agent sees the clients' closes
    before, after = counters(before), counters(scrape(agent))
    delta = {k: after[k] - before[k] for k in after}
    print("%s: %d tricklers, %d silent, %d big: clients saw %s" % (name, tricklers, silent, big, attack.seen))
    for path in PATHS:
        v = sorted(lat[path])
        print("  %-8s %3d answers: median %.1f ms, p95 %.1f ms, max %.1f ms" % (
            path, len(v), statistics.median(v) * 1e3, v[int(len(v) * 0.95)] * 1e3, v[-1] * 1e3))
    print("  agent RSS %d KiB at start, %d KiB at most; connections open at most %d; counters moved %s"
          % (base_rss, max_rss, max_open, delta))
    if max_rss - base_rss > RSS_GROWTH_LIMIT_KIB:
        fail("%s: agent RSS grew by %d KiB (limit %d)" % (name, max_rss - base_rss, RSS_GROWTH_LIMIT_KIB))
    if max_open > CAP:
        fail("%s: %d connections open, past the cap of %d" % (name, max_open, CAP))
    return attack.seen, delta


def phase_deadline(agent):
    seen, d = hold(agent, 'deadline', 12, 45, 10, 0)
    if seen['got_408'] < 55 or d['deadline'] != seen['got_408'] or d['408'] != seen['got_408']:
        fail("deadline: the clients read %d 408s (want >= 55); the agent counted %d deadline cuts and %d 408s"
             % (seen['got_408'], d['deadline'], d['408']))
    if d['cap'] != 0 or seen['cut'] != 0:
        fail("deadline: under the cap, yet %d cut at the cap (clients saw %d cut)" % (d['cap'], seen['cut']))


def phase_cap(agent):
    seen, d = hold(agent, 'cap', 10, 100, 30, 1)
    if not seen['cut'] <= d['cap'] <= seen['cut'] + seen['closed_by_us'] or seen['cut'] < 100 - CAP:
        fail("cap: the clients saw %d connections cut (and closed %d themselves); the agent counted %d"
             % (seen['cut'], seen['closed_by_us'], d['cap']))
    if seen['big_sent'] < 2 or d['too_large'] != seen['big_sent']:
        fail("cap: %d 1 MiB heads sent, the agent counted %d too_large" % (seen['big_sent'], d['too_large']))


def phase_stall(agent):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000
    tid = agent.proc.pid  # the main thread: it runs the housekeeping loop (agent/agent.cpp)
    if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0 or libc.ptrace(PTRACE_INTERRUPT, tid, None, None) != 0:
        fail("stall: ptrace: %s" % os.strerror(ctypes.get_errno()))
    os.waitpid(tid, WALL)
    stalled_at = time.monotonic()
    try:
        with open('/proc/%d/task/%d/stat' % (tid, tid)) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
        print("stall: main thread %d stopped (state %s); other threads run" % (tid, state))
        failed_after, reason, probes = None, '', []
        while time.monotonic() - stalled_at < STALL_LIMIT_S + 5:
            took, status, body = timed_get(agent.port, '/healthz')
            probes.append(took)
            if status == 503:
                failed_after, reason = time.monotonic() - stalled_at, body.strip()
                break
            if status != 200:
                fail("stall: /healthz answered %d: %s" % (status, body))
            time.sleep(0.25)
        took, ready_status, _ = timed_get(agent.port, '/readyz')
    finally:
        libc.ptrace(PTRACE_DETACH, tid, None, None)
    print("stall: /healthz answered %d times (max %.1f ms) while the loop was stopped" % (
        len(probes), max(probes) * 1e3))
    if failed_after is None:
        fail("stall: /healthz still 200 %.0f s after the housekeeping loop stopped (limit %.1f s)"
             % (time.monotonic() - stalled_at, STALL_LIMIT_S))
    print("stall: /healthz 503 %.1f s after the loop stopped (limit %.1f s): %s; /readyz %d"
          % (failed_after, STALL_LIMIT_S, reason, ready_status))
    if not STALL_LIMIT_S - 1 <= failed_after <= STALL_LIMIT_S + 2 or 'housekeeping loop stalled' not in reason:
        fail("stall: /healthz failed after %.1f s, want %.1f s +-1 with the reason" % (failed_after, STALL_LIMIT_S))
    deadline = time.monotonic() + 5
    while timed_get(agent.port, '/healthz')[1] != 200:
        if time.monotonic() > deadline:
            fail("stall: /healthz not 200 again 5 s after the loop was released")
        time.sleep(0.1)
    age = total(scrape(agent), 'vigil_agent_housekeeping_last_tick_age_seconds', require=True)
    print("stall: released; /healthz 200 again, last tick %.2f s ago" % age)


def main():
    require_root()
    phases = (sys.argv[2] if len(sys.argv) > 2 else 'deadline,cap,stall').split(',')
    with Agent(sys.argv[1]) as agent:
        for phase in phases:
            {'deadline': phase_deadline, 'cap': phase_cap, 'stall': phase_stall}[phase](agent)
    print("PASS")


if __name__ == '__main__':
    main()
