#!/usr/bin/env python3
"""The agent's cost charged to the worker, resolved to the budget: vigil-worker's own CPU time per
generated token with vigil-agent attached and without, each measured against a yardstick that
runs beside it on the other core. Needs root (BPF) and 2 CPUs.

bench/agent_overhead.py measures the worker alone, and on this VM its CPU time per token moves
5-8 % between measurements whatever the agent does (the host's contention): ~1,000 rounds for a
+-0.5 % interval. Here the yardstick takes that out. tests/standins/decode_loop runs the
worker's own CPU decode, one thread, forever, pinned to CPU 1, with no system call per token
(its count of decoded tokens is a store into a shared mapping), so that what the agent adds to a
process (the syscall tracepoints' slow path on every system call, the TCP programs on every
send, the worker's USDT probes) does not reach it, while the host's contention slows it as it
slows the worker, pinned to CPU 0 (1 engine thread, every thread of it; the benchmark's client
and the agent are pinned there too: on CPU 1 their work would slow the yardstick alone, a bias
against the agent's cost, -1.2 % and -1.9 % in the first two rounds tried so). A window is --requests
streamed requests (bench/load.py's: 32-token prompts, 64 tokens out, the same prompts every
time); over it, q = the worker's CPU s per token (utime + stime of all its threads, its process
CPU clock) / the yardstick's CPU s per decoded token. An A/A check without the agent: q moved
0.8 % (sd) from one window to the next, against 4 % for the worker's own figure.

Each round starts a yardstick and a worker, sends the window's requests once uncounted (the
prefix cache then holds their prompts in every window alike), and measures four windows in the
order off, on, on, off or on, off, off, on (alternating between rounds: drift within a round
falls on both sides, and the order's own effect, if any, cancels between rounds). The agent is
started (defaults but the cuda and nccl sets off, as bench/agent_overhead.py's, and the worker's
binary in libraries.usdt) before an "on" window, attached (its log names the worker's binary for
the usdt set, vigil_agent_probes_attached{set="usdt"} > 0) and left 1 s to settle, and stopped
(SIGTERM: every probe detached) before an "off" one. In every "on" window the kernel's run count
of the agent's TCP programs (vigil_agent_bpf_program_runs_total{set="tcp"}) must grow by at least
the worker's streamed tokens (each is a send() its tcp_sendmsg_locked program sees), or the run
fails: the attach did not happen. A lost or duplicated request fails it too.

A round gives d = mean(q on) / mean(q off) - 1. The effect is the mean of the two orders' mean d
(bench/paired_interval.py's crossover_interval: the pooled variance within the orders). After
--min-rounds, and after each round from then on, the interval is computed; the run stops as soon
as its half-width is below --budget (0.5 %: then it resolves a 1 % overhead) and fails, exit 1,
when --max-rounds or --max-minutes come first. --state FILE appends every round to FILE and the
interval is over all rounds in it (a measurement spread over several runs).

usage: sudo bench/run.sh bench/agent_overhead_twin.py [--requests 16] [--min-rounds 12] [--max-rounds 100]
                                         [--max-minutes 30] [--budget 0.5] [--state FILE]
"""
import argparse
import mmap
import os
import statistics
import struct
import subprocess
import tempfile
import time

from vigil_harness.agent import parse_metrics, select
from vigil_harness.fail import fail, require_root

import load
from agent_overhead import (ROOT, Agent, attached, counted_requests, cpu_clock_s, judge, requests, round_options,
                            run_rounds)
from paired_interval import crossover_interval, t_interval

WORKER_CPU, TWIN_CPU = 0, 1
SETTLE_S = 1.0  # after the agent's start: its attach work is done before a window starts


def pin(pid, cpu):
    """Every thread of PID on CPU only (threads it starts later inherit it)."""
    for tid in os.listdir('/proc/%d/task' % pid):
        os.sched_setaffinity(int(tid), {cpu})


class Twin:
    """tests/standins/decode_loop on its own CPU, its decoded tokens read from a shared mapping."""

    def __init__(self, binary, model):
        self.file = tempfile.NamedTemporaryFile()
        self.file.write(b'\0' * 8)
        self.file.flush()
        self.counter = mmap.mmap(self.file.fileno(), 8)
        self.proc = subprocess.Popen([binary, model, self.file.name], stderr=subprocess.PIPE)
        pin(self.proc.pid, TWIN_CPU)
        deadline = time.time() + 60
        while self.tokens() == 0:  # the model is loaded and decoding
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                fail('decode_loop did not start decoding: %s' % self.proc.stderr.read().decode(errors='replace'))
            time.sleep(0.1)

    def tokens(self):
        return struct.unpack('=Q', self.counter[:8])[0]

    def cpu(self):
        return cpu_clock_s(self.proc.pid)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.counter.close()
        self.file.close()


def tcp_runs(agent):
    scrape = parse_metrics(agent.get('/metrics') or '')
    return sum(v for _, v in select(scrape, 'vigil_agent_bpf_program_runs_total', set='tcp'))


def window(server, twin, n_requests, agent):
    """q over N_REQUESTS: (worker CPU s per token) / (twin CPU s per token), and the two parts."""
    pid = server.proc.pid
    runs0 = tcp_runs(agent) if agent else None
    w0, t0, n0 = cpu_clock_s(pid), twin.cpu(), twin.tokens()
    tokens = counted_requests(server, n_requests)
    w1, t1, n1 = cpu_clock_s(pid), twin.cpu(), twin.tokens()
    if agent:
        runs = tcp_runs(agent) - runs0
        if runs < tokens:
            fail("the agent's TCP programs ran %d times over a window of %d streamed tokens: not attached" % (runs, tokens))
    if n1 <= n0:
        fail('the yardstick decoded nothing over a window')
    worker, yardstick = (w1 - w0) / tokens, (t1 - t0) / (n1 - n0)
    return worker / yardstick, worker, yardstick


def one_round(a, order):
    """One yardstick and one worker, four windows in ORDER: [(state, q, worker, yardstick)]."""
    worker_bin = os.path.realpath(load.WORKER)
    twin = Twin(a.twin, load.MODEL)
    agent, got = None, []
    try:
        server = load.Server('vigil', threads=1)
        try:
            pin(server.proc.pid, WORKER_CPU)
            requests(server, a.requests)  # uncounted: the prefix cache holds every window's prompts
            for h in order:
                if h == 'on' and agent is None:
                    agent = Agent(a.agent, worker_bin)
                    attached(agent, worker_bin)
                    time.sleep(SETTLE_S)
                elif h == 'off' and agent is not None:
                    agent.stop()
                    agent = None
                got.append((h,) + window(server, twin, a.requests, agent))
        finally:
            server.stop()
    finally:
        if agent is not None:
            agent.stop()
        twin.stop()
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--requests', type=int, default=16, help='in each window')
    round_options(ap, min_rounds=12, max_rounds=100, max_minutes=30)
    ap.add_argument('--twin', default=os.path.join(ROOT, 'build', 'dev', 'tests', 'standins', 'decode_loop'))
    a = ap.parse_args()
    require_root()
    if not {WORKER_CPU, TWIN_CPU} <= os.sched_getaffinity(0):
        fail('needs CPUs %d and %d (the worker and its yardstick, one each)' % (WORKER_CPU, TWIN_CPU))
    # This process (the client) and the agent it starts share the worker's CPU, as an agent shares
    # a node's with its workloads; on the yardstick's, their work would slow the yardstick alone.
    pin(os.getpid(), WORKER_CPU)
    load.WORKER = os.environ.get('VIGIL_WORKER', os.path.join(ROOT, 'build', 'dev', 'worker', 'vigil-worker'))
    print('%5s %-15s %s' % ('round', 'order', 'window: state q (worker ms/token, yardstick ms/token)'), flush=True)

    def measure(index):
        order = ('off', 'on', 'on', 'off') if index % 2 == 0 else ('on', 'off', 'off', 'on')
        got = one_round(a, order)
        q = {h: statistics.mean(x[1] for x in got if x[0] == h) for h in ('on', 'off')}
        return {'order': '-'.join(order), 'd': q['on'] / q['off'] - 1, 'windows': got, 'requests': a.requests}

    def show(n, r):
        return '%5d %-15s %s  d %+.2f %%' % (n, r['order'], '  '.join(
            '%s %.4f (%.3f, %.3f)' % (h, q, 1e3 * w, 1e3 * y) for h, q, w, y in r['windows']), 100 * r['d'])

    rounds, new, mean, half_width, minutes = run_rounds(a, measure, show, crossover)
    d = [x['d'] for x in rounds]
    pm, ph = t_interval(d)
    print('CPU s per token against the yardstick, on/off - 1 over %d rounds (%d in this run, %.1f min): effect '
          '%+.2f %%, 95 %% interval [%+.2f %%, %+.2f %%] (half-width %.2f %%, by order); plain mean of d %+.2f %%, '
          '95 %% t interval [%+.2f %%, %+.2f %%]; sd of a round %.2f %%'
          % (len(d), new, minutes, 100 * mean, 100 * (mean - half_width), 100 * (mean + half_width),
             100 * half_width, 100 * pm, 100 * (pm - ph), 100 * (pm + ph), 100 * statistics.stdev(d)), flush=True)
    judge(a, len(d), mean, half_width)


def crossover(rounds):
    return crossover_interval([x['d'] for x in rounds if x['order'] == 'off-on-on-off'],
                              [x['d'] for x in rounds if x['order'] == 'on-off-off-on'])


if __name__ == '__main__':
    main()
