#!/usr/bin/env python3
"""The agent's cost to the worker: vigil-worker's single-stream generation throughput with
vigil-agent attached and without, in paired rounds, with a confidence interval. Needs root (BPF).

Each half of a round starts a worker (bench/load.py's server: CPU backend, 2 engine threads),
runs load.py's closed loop of one stream (32-token prompts, 64 tokens out) for --warmup seconds
not counted, then for --seconds counted, and stops it. The "on" half first starts the agent with
its default configuration and waits until it serves /readyz (it watches exec events), then starts
the worker, and counts only once the agent has logged that its USDT set is attached to the
worker's binary; at the end the agent's vigil_agent_events_total{set="usdt"} must be above 0 (the
worker's allocator probes fired into it: they fire at allocator changes, the worker's start-up),
or the run fails. A lost or duplicated request (load.py's accounting) fails it too. The order of
the halves alternates between rounds (off-on, on-off, ...) so that a drift of the machine falls
on both sides.

Each round gives d = on / off - 1, the relative change of tokens/s (negative: slower with the
agent). Reported: the mean of d with a 95 % Student-t interval over the rounds, and a 95 %
percentile bootstrap interval of the mean (10,000 resamples of the rounds, fixed seed), which does
not assume d normal.

usage: sudo bench/agent_overhead.py [--rounds 16] [--seconds 10] [--warmup 2]
"""
import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'e2e', 'agent'))
sys.path.insert(0, os.path.join(ROOT, 'bench'))
from harness import fail, listen_port, mapped_path, parse_metrics, require_root, select, wait_attached  # noqa: E402
import load  # noqa: E402

START_TIMEOUT_S = 60  # a loaded 2-core machine: the agent's start and attach can take seconds


class Agent:
    """vigil-agent with its defaults (only the listen address set), its log kept for the attach line."""

    def __init__(self, binary):
        self.port = listen_port()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, '--listen', '127.0.0.1:%d' % self.port],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + START_TIMEOUT_S
        while self.get('/readyz') != 'ready\n':
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                fail('agent not ready: ' + self.log_text())
            time.sleep(0.1)

    def get(self, path):
        try:
            with urllib.request.urlopen('http://127.0.0.1:%d%s' % (self.port, path), timeout=10) as r:
                return r.read().decode()
        except OSError:
            return None

    def log_text(self):
        self.log.seek(0)
        return self.log.read().decode(errors='replace')

    def usdt_events(self):
        found = select(parse_metrics(self.get('/metrics') or ''), 'vigil_agent_events_total', set='usdt')
        if not found:
            fail('the agent exports no vigil_agent_events_total{set="usdt"}')
        return found[0][1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail('agent did not stop within 60 s of SIGTERM')


def half(agent_bin, seconds, warmup):
    """One half of a round: tokens/s of a fresh worker, with the agent when AGENT_BIN is given;
    returns (tokens/s, the agent's USDT events or None)."""
    agent = Agent(agent_bin) if agent_bin else None
    try:
        server = load.Server('vigil')
        try:
            if agent:
                wait_attached(agent, 'usdt', mapped_path(server.proc.pid, 'vigil-worker'), START_TIMEOUT_S)
            load.closed_loop(server.port, server.model_name, 1, warmup)
            res, wall = load.closed_loop(server.port, server.model_name, 1, seconds)
        finally:
            server.stop()
        events = agent.usdt_events() if agent else None
    finally:
        if agent:
            agent.stop()
    s = load.summarize(res, wall)
    if s['lost'] or s['duplicated']:
        fail('%d requests lost, %d duplicated' % (s['lost'], s['duplicated']))
    if agent and events <= 0:
        fail('the agent counted no USDT event of the worker it attached to')
    return s['gen_tps'], events


def t_quantile(p, df):
    """Student t's P quantile (P > 0.5): bisection on its CDF, the density integrated by Simpson's
    rule (no scipy on the machines this runs on)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))

    def cdf(x, n=2000):
        h = x / n
        f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(n + 1)]
        return 0.5 + h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2]))
    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def intervals(d):
    """(mean, 95 % t interval, 95 % bootstrap percentile interval) of the mean of D."""
    m, n = statistics.mean(d), len(d)
    half_width = t_quantile(0.975, n - 1) * statistics.stdev(d) / math.sqrt(n)
    rng = random.Random(26)
    means = sorted(statistics.mean(rng.choices(d, k=n)) for _ in range(10000))
    return m, (m - half_width, m + half_width), (means[249], means[9749])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=16)
    ap.add_argument('--seconds', type=float, default=10, help='counted, in each half')
    ap.add_argument('--warmup', type=float, default=2, help='not counted, in each half')
    ap.add_argument('--agent', default=os.path.join(ROOT, 'build', 'dev', 'agent', 'vigil-agent'))
    a = ap.parse_args()
    if a.rounds < 2:
        fail('--rounds: at least 2 (an interval needs them)')
    require_root()
    load.WORKER = os.environ.get('VIGIL_WORKER', os.path.join(ROOT, 'build', 'dev', 'worker', 'vigil-worker'))
    print('%5s %7s %10s %10s %8s %12s' % ('round', 'order', 'off tok/s', 'on tok/s', 'on/off', 'usdt events'), flush=True)
    d = []
    for r in range(a.rounds):
        order = ('off', 'on') if r % 2 == 0 else ('on', 'off')
        got = {h: half(a.agent if h == 'on' else None, a.seconds, a.warmup) for h in order}
        d.append(got['on'][0] / got['off'][0] - 1)
        print('%5d %7s %10.1f %10.1f %8.4f %12d' % (r + 1, '-'.join(order), got['off'][0], got['on'][0], 1 + d[-1],
                                                   got['on'][1]), flush=True)
    m, t_ci, boot_ci = intervals(d)
    print('on/off - 1 over %d paired rounds of %.0f s: mean %+.2f %%, 95 %% t interval [%+.2f %%, %+.2f %%], '
          '95 %% bootstrap interval [%+.2f %%, %+.2f %%] (sd of a round %.2f %%)'
          % (len(d), a.seconds, 100 * m, 100 * t_ci[0], 100 * t_ci[1], 100 * boot_ci[0], 100 * boot_ci[1],
             100 * statistics.stdev(d)))


if __name__ == '__main__':
    main()
