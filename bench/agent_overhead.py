#!/usr/bin/env python3
"""The agent's cost charged to the worker: vigil-worker's own CPU time per generated token with
vigil-agent attached and without, in paired rounds, until a 95 % confidence interval of the
relative difference is narrower than the budget. Needs root (BPF).

Each round starts one worker (bench/load.py's server: CPU backend, 2 engine threads), sends it
one request not counted, and measures it twice, once with the agent attached and once without,
each time over --requests requests one after another (32-token prompts, 64 tokens out,
streamed; the same prompts every time): the worker's CPU time (utime + stime of all its
threads, from its process CPU clock, exact to the nanosecond; /proc/PID/stat's tick-rounded
utime + stime is printed beside it) before and after, and the generated tokens from the
server's own usage counts. One worker per round because a fresh worker's CPU time per token
differs from the last one's by up to ~15 % on this VM (where its memory landed), which a
comparison across two processes would carry. The order alternates between rounds (on-off,
off-on, ...) so that warm-up and drift fall on both sides. On first: the agent starts and serves
/readyz before the worker starts, and is stopped (SIGTERM: every probe detached) before the
"off" measurement; off first: the agent starts beside the running worker after it. Either way
the "on" measurement starts only once the agent has logged its USDT set attached to the
worker's binary and vigil_agent_probes_attached{set="usdt"} is above 0, and the worker's
gpu_memory_allocator_block_allocations_total + ..._block_frees_total{pid=<worker>} on the agent's
/metrics must grow while it is attached (on first: the worker's
allocator probes at its start-up; off first: the agent stays until the worker has stopped, and
the frees of its shutdown), or the run fails.
The agent runs its default configuration except the cuda and nccl sets, off (this CPU worker
maps neither library, and on a shared machine those sets attach to other processes'
libraries, whose detach took 5 s each time), and with the worker's binary in libraries.usdt,
so that its probes are in place before a worker starts (discovery would attach them a moment
after the exec, after the start-up allocations). A lost or duplicated request fails the run too.

Each round gives d = on / off - 1 of CPU seconds per token (positive: the worker spends more with
the agent). The second measurement in a worker is cheaper than the first whatever it is (4-6 %
here: the worker still warming), so the rounds are analysed as the two-period crossover they
are (bench/paired_interval.py's crossover_interval): the effect is the mean of the off-on
rounds' mean d and the on-off rounds' mean d, its 95 % interval from the pooled variance within
the two groups, which the period effect does not widen. After --min-rounds rounds, and after
each round from then on, the interval is computed; the run stops as soon as its half-width is
below --budget (0.5 %: then it resolves a 1 % overhead) and fails, exit 1, when --max-rounds or
--max-minutes are reached first. With --state FILE every round is appended to FILE and the
interval is over all rounds in it, so that one measurement can be spread over several runs,
each short enough to share the machine (rounds are independent; the order keeps alternating
across runs). Printed beside it: the plain paired t interval of the mean of d (which the period
effect widens) and a 95 % percentile bootstrap interval of that mean, which does not assume d
normal.

usage: sudo bench/run.sh bench/agent_overhead.py [--requests 8] [--min-rounds 6] [--max-rounds 200]
                                    [--max-minutes 9] [--budget 0.5] [--state FILE]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

from vigil_harness.agent import parse_metrics, select, wait_attached
from vigil_harness.fail import fail, require_root
from vigil_harness.ports import listen_port

import load
from paired_interval import bootstrap_interval, crossover_interval, t_interval

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

START_TIMEOUT_S = 60  # a loaded 2-core machine: the agent's start and attach can take seconds
CLK = os.sysconf('SC_CLK_TCK')


class Agent:
    """vigil-agent with its defaults but the cuda and nccl sets off, the worker's binary named in
    libraries.usdt and no pinned state, its log kept for the attach line."""

    def __init__(self, binary, worker):
        self.port = listen_port()
        self.log = tempfile.TemporaryFile()
        self.cfg = tempfile.NamedTemporaryFile('w', suffix='.yaml')
        self.cfg.write('probes: {cuda: false, nccl: false}\nlibraries: {usdt: [%s]}\n' % worker)
        self.cfg.flush()
        # No pinned state: a benchmark leaves nothing in /sys/fs/bpf (each start makes its maps anew).
        self.proc = subprocess.Popen([binary, '--listen', '127.0.0.1:%d' % self.port, '--config', self.cfg.name,
                                      '--bpf-pin-root', ''],
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

    def usdt(self, family):
        found = select(parse_metrics(self.get('/metrics') or ''), family, set='usdt')
        if not found:
            fail('the agent exports no %s{set="usdt"}' % family)
        return found[0][1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail('agent did not stop within 60 s of SIGTERM')
        finally:
            self.cfg.close()


def cpu_clock_s(pid):
    """PID's CPU time, all threads, from its process CPU clock (clock_getcpuclockid's encoding)."""
    return time.clock_gettime(((~pid) << 3) | 2)


def stat_cpu_s(pid):
    """utime + stime from /proc/PID/stat (clock ticks)."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def requests(server, n):
    """N streamed requests one after another; their records (load.py's accounting)."""
    results, lock = [], threading.Lock()
    for i in range(n):
        load.one_request(server.port, server.model_name, i, 32, 64, 0, i, results, lock)
    return results


def counted_requests(server, n):
    """N streamed requests one after another; the tokens they generated. Fails on a request lost
    or duplicated."""
    t0 = time.perf_counter()
    res = requests(server, n)
    s = load.summarize(res, time.perf_counter() - t0)
    if s['lost'] or s['duplicated']:
        fail('%d requests lost, %d duplicated' % (s['lost'], s['duplicated']))
    return sum(r['usage_tokens'] for r in res)


def measure(server, n_requests):
    """The worker's (CPU s per token by its CPU clock, by /proc/PID/stat, tokens) over N_REQUESTS."""
    pid = server.proc.pid
    clock0, stat0 = cpu_clock_s(pid), stat_cpu_s(pid)
    tokens = counted_requests(server, n_requests)
    clock1, stat1 = cpu_clock_s(pid), stat_cpu_s(pid)
    return (clock1 - clock0) / tokens, (stat1 - stat0) / tokens, tokens


def attached(agent, worker):
    """Fails unless the agent has logged its USDT set attached to WORKER's file and
    vigil_agent_probes_attached{set="usdt"} is above 0."""
    wait_attached(agent, 'usdt', worker, START_TIMEOUT_S)
    if agent.usdt('vigil_agent_probes_attached') <= 0:
        fail('the agent logged its usdt set attached to %s but exports no usdt link' % worker)


def worker_events(agent, pid):
    """The worker's allocator blocks handed out and given back as the agent counted them: its own
    USDT events, not other processes' (series stay a grace period after the worker exits)."""
    scrape = parse_metrics(agent.get('/metrics') or '')
    return sum(v for family in ('gpu_memory_allocator_block_allocations_total', 'gpu_memory_allocator_block_frees_total')
               for _, v in select(scrape, family, pid=pid, allocator='vigil'))


def one_round(agent_bin, order, n_requests, threads):
    """One worker, measured with the agent and without it in ORDER: {'on'|'off': measure()}. The
    agent's USDT events must grow while it is attached: on first, the worker starts after the
    agent and its allocator's start-up probes fire into it; off first, the agent stays attached
    until the worker has stopped, and the frees of its shutdown fire into it."""
    worker = os.path.realpath(load.WORKER)
    got, agent = {}, None
    try:
        if order[0] == 'on':
            agent = Agent(agent_bin, worker)
            attached(agent, worker)
        server = load.Server('vigil', threads=threads)
        pid = server.proc.pid
        try:
            requests(server, 1)  # not counted: the first request's one-time work
            for h in order:
                if h == 'on' and agent is None:
                    agent = Agent(agent_bin, worker)
                    attached(agent, worker)
                    events0 = worker_events(agent, pid)
                elif h == 'off' and agent is not None:
                    check_events(agent, pid, 0)
                    agent.stop()
                    agent = None
                got[h] = measure(server, n_requests)
        finally:
            server.stop()
        if agent is not None:
            check_events(agent, pid, events0)
    finally:
        if agent is not None:
            agent.stop()
    return got


def check_events(agent, pid, before):
    now = worker_events(agent, pid)
    if now <= before:
        fail("the agent counted no allocator event of the worker (pid %d) while attached (%d -> %d): its USDT "
             "probes did not fire" % (pid, before, now))


def by_order(rounds, order, on, off):
    return [x[on] / x[off] - 1 for x in rounds if x['order'] == order]


def crossover(rounds, on, off):
    """(effect, half-width) of on/off - 1 over ROUNDS, with keys ON and OFF, as a crossover."""
    return crossover_interval(by_order(rounds, 'off-on', on, off), by_order(rounds, 'on-off', on, off))


def load_rounds(path):
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def round_options(ap, min_rounds, max_rounds, max_minutes):
    """The options of a benchmark of rounds judged by an interval (this one's and
    agent_overhead_twin.py's)."""
    ap.add_argument('--min-rounds', type=int, default=min_rounds)
    ap.add_argument('--max-rounds', type=int, default=max_rounds, help='in all, with the rounds of --state')
    ap.add_argument('--max-minutes', type=float, default=max_minutes, help='no round is started that would end later')
    ap.add_argument('--budget', type=float, default=0.5, help='largest half-width of the interval, %%')
    ap.add_argument('--state', help='a file of rounds (JSON lines): read at start, each new round appended')
    ap.add_argument('--agent', default=os.path.join(ROOT, 'build', 'dev', 'agent', 'vigil-agent'))


def run_rounds(a, measure, show, interval):
    """The rounds of A.state, then new ones: MEASURE(order index) gives a round (a dict), SHOW(its
    number, round) its line. After A.min_rounds and every round from then on, INTERVAL(rounds)
    gives (effect, half-width); it stops once the half-width is under A.budget, or at A.max_rounds,
    or before a round that would end after A.max_minutes. (rounds, new rounds, effect, half-width,
    minutes); fails without an interval."""
    if a.min_rounds < 4:
        fail('--min-rounds: at least 4 (two of each order)')
    rounds = load_rounds(a.state)
    print('%d rounds from %s' % (len(rounds), a.state) if rounds else 'no earlier rounds', flush=True)
    start, new = time.time(), 0
    mean = half_width = None
    while len(rounds) < a.max_rounds:
        elapsed = time.time() - start
        if new and elapsed + elapsed / new > 60 * a.max_minutes:
            break
        r = dict(measure(len(rounds)), at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
        rounds.append(r)
        new += 1
        if a.state:
            with open(a.state, 'a') as f:
                f.write(json.dumps(r) + '\n')
        print(show(len(rounds), r), flush=True)
        if len(rounds) >= a.min_rounds:
            mean, half_width = interval(rounds)
            if 100 * half_width < a.budget:
                break
    if mean is None:
        fail('only %d rounds: no interval' % len(rounds))
    return rounds, new, mean, half_width, (time.time() - start) / 60


def judge(a, n, mean, half_width):
    """Fails unless the interval resolves the budget; then says whether the 1 % goal holds."""
    if 100 * half_width >= a.budget:
        fail('the interval does not resolve the budget: half-width %.2f %% >= %.2f %% after %d rounds%s'
             % (100 * half_width, a.budget, n, ' (run again with the same --state to add rounds)'
                if a.state and n < a.max_rounds else ''))
    verdict = 'holds' if mean + half_width <= 0.01 else 'is not shown'
    print('overhead <= 1 %% %s: the upper end of the interval is %+.2f %%' % (verdict, 100 * (mean + half_width)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--requests', type=int, default=8, help='counted, in each half')
    ap.add_argument('--threads', type=int, default=2, help="the worker's engine threads")
    round_options(ap, min_rounds=6, max_rounds=200, max_minutes=9)
    a = ap.parse_args()
    require_root()
    load.WORKER = os.environ.get('VIGIL_WORKER', os.path.join(ROOT, 'build', 'dev', 'worker', 'vigil-worker'))
    print('%5s %7s %13s %13s %8s %10s %7s' % ('round', 'order', 'off ms/token', 'on ms/token', 'on/off',
                                              'stat on/off', 'tokens'), flush=True)

    def measure(index):
        order = ('off', 'on') if index % 2 == 0 else ('on', 'off')
        got = one_round(a.agent, order, a.requests, a.threads)
        return {'order': '-'.join(order), 'off': got['off'][0], 'on': got['on'][0], 'off_stat': got['off'][1],
                'on_stat': got['on'][1], 'tokens': got['on'][2], 'threads': a.threads, 'requests': a.requests}

    def show(n, r):
        return '%5d %7s %13.4f %13.4f %8.4f %10.4f %7d' % (n, r['order'], 1e3 * r['off'], 1e3 * r['on'], r['on'] / r['off'],
                                                            r['on_stat'] / r['off_stat'], r['tokens'])

    rounds, new, mean, half_width, minutes = run_rounds(a, measure, show, lambda rs: crossover(rs, 'on', 'off'))
    d = [x['on'] / x['off'] - 1 for x in rounds]
    pm, ph = t_interval(d)
    boot = bootstrap_interval(d)
    ms, hs = crossover(rounds, 'on_stat', 'off_stat')
    period = (statistics.mean(by_order(rounds, 'on-off', 'on', 'off')) -
              statistics.mean(by_order(rounds, 'off-on', 'on', 'off'))) / 2
    print('CPU s per token, on/off - 1 over %d rounds (%d in this run, %.1f min): crossover effect %+.2f %%, '
          '95 %% interval [%+.2f %%, %+.2f %%] (half-width %.2f %%); second-period effect %+.2f %%; '
          'by /proc/PID/stat utime+stime [%+.2f %%, %+.2f %%]; plain mean of d %+.2f %%, 95 %% t interval '
          '[%+.2f %%, %+.2f %%], bootstrap [%+.2f %%, %+.2f %%], sd of a round %.2f %%'
          % (len(d), new, minutes, 100 * mean, 100 * (mean - half_width),
             100 * (mean + half_width), 100 * half_width, -100 * period, 100 * (ms - hs), 100 * (ms + hs),
             100 * pm, 100 * (pm - ph), 100 * (pm + ph), 100 * boot[0], 100 * boot[1], 100 * statistics.stdev(d)),
          flush=True)
    judge(a, len(d), mean, half_width)


if __name__ == '__main__':
    main()
