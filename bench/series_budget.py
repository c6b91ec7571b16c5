#!/usr/bin/env python3
"""The agent's series budget on a crowded node, on the real kernel: what a node costs in the TSDB.

One agent (all probe sets) watches, for --seconds:
  - --gpu-procs stand-in CUDA workloads (tests/standins/cuda_workload on the stand-in libcuda), spread
    over --gpus device ordinals, alive throughout;
  - --tcp-procs processes each holding a TCP connection across a veth pair between two network
    namespaces, of which --lossy send bulk data through 5 % nftables loss (they retransmit);
  - --resets-per-s short-lived clients per second connecting to a closed port (each gets a reset).
Every 10 s it scrapes the agent and counts the series in the scraped text itself (its sample
lines, the agent's three own accounting families apart), and which appeared and went since the
previous scrape: vigil_agent_series, vigil_agent_series_created_total and _removed_total must
agree with those counts exactly (only this benchmark scrapes, so the agent renders once a sample),
and every line must be a series of its own. It prints the series total, the families whose series
count moved, churn per minute (created + removed, counted) and the agent's RSS over the run. Goals
of issue #16, each failing the run (exit 1) when missed: <= 2,000 series, churn <= 100
series/minute after the first minute, RSS flat (grown by at most --rss-growth % over the second
half of the run: a short run, whose allocator arenas are still filling, can miss it).

usage: sudo bench/run.sh bench/series_budget.py VIGIL_AGENT CUDA_WORKLOAD TCP_BULK [--seconds 300]
       [--gpus 8] [--gpu-procs 20] [--tcp-procs 500] [--lossy 20] [--resets-per-s 10]
       [--max-series 2000] [--max-churn 100] [--rss-growth 2]
"""
import argparse
import os
import subprocess
import sys
import time

from vigil_harness.agent import Agent, parse_metrics, run_workload, sh
from vigil_harness.fail import require_root

A_ADDR, B_ADDR = '10.215.0.1', '10.215.0.2'
HOLD_PORT, BULK_PORT, CLOSED_PORT = 7001, 7002, 7003
# The agent's own accounting, which its count excludes.
OWN = ('vigil_agent_series', 'vigil_agent_series_created_total', 'vigil_agent_series_removed_total')


def account(text):
    """One scrape's text: ({family of OWN: its value}, the series in the text: the name and labels
    of every sample line, OWN apart) and the problems found: an OWN family missing or twice, a
    series on two lines."""
    own, series, problems = {}, set(), []
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        key, _, value = line.rpartition(' ')
        name = key.partition('{')[0]
        if name in OWN:
            if name in own:
                problems.append('%s twice' % name)
            own[name] = float(value)
        elif key in series:
            problems.append('series on two lines: %s' % key)
        else:
            series.add(key)
    problems += ['%s missing' % n for n in OWN if n not in own]
    return own, series, problems


def check_scrape(text, previous):
    """The agent's vigil_agent_series and the created/removed counters' moves since the previous
    scrape (PREVIOUS: (own, series) of it, or None) against the series counted in TEXT; returns
    (own, series, created, removed, problems)."""
    own, series, problems = account(text)
    if own.get('vigil_agent_series') is not None and own['vigil_agent_series'] != len(series):
        problems.append('vigil_agent_series %d, the scrape has %d series' % (own['vigil_agent_series'], len(series)))
    created = removed = 0
    if previous is not None and not problems:
        created, removed = len(series - previous[1]), len(previous[1] - series)
        for name, counted in (('vigil_agent_series_created_total', created), ('vigil_agent_series_removed_total', removed)):
            moved = own[name] - previous[0][name]
            if moved != counted:
                problems.append('%s moved by %d since the previous scrape, %d series counted' % (name, moved, counted))
    return own, series, created, removed, problems


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        return int(next(l for l in f if l.startswith('VmRSS:')).split()[1])


def families(series):
    """Series per metric name: where the series, and the churn, are."""
    out = {}
    for key in series:
        n = key.partition('{')[0]
        out[n] = out.get(n, 0) + 1
    return out


def in_ns(ns, argv, **kw):
    return subprocess.Popen(['ip', 'netns', 'exec', ns] + argv, **kw)


HOLDER = r'''
import os, socket, sys, time
n, addr, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        s = socket.create_connection((addr, port))
        time.sleep(10 ** 6)
    kids.append(pid)
print('holding', flush=True)
time.sleep(10 ** 6)
'''
ACCEPTOR = r'''
import socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('0.0.0.0', int(sys.argv[1]))); l.listen(4096)
held = []
print('listening', flush=True)
while True:
    held.append(l.accept()[0])
'''
SINK = r'''
import os, socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('0.0.0.0', int(sys.argv[1]))); l.listen(256)
print('sinking', flush=True)
while True:
    c = l.accept()[0]
    if os.fork() == 0:
        while c.recv(1 << 16):
            pass
        os._exit(0)
    c.close()
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('agent')
    ap.add_argument('cuda_workload')
    ap.add_argument('tcp_bulk')
    ap.add_argument('--seconds', type=int, default=300)
    ap.add_argument('--gpus', type=int, default=8)
    ap.add_argument('--gpu-procs', type=int, default=20)
    ap.add_argument('--tcp-procs', type=int, default=500)
    ap.add_argument('--lossy', type=int, default=20)
    ap.add_argument('--resets-per-s', type=float, default=10)
    ap.add_argument('--max-series', type=int, default=2000)
    ap.add_argument('--max-churn', type=float, default=100, help='series created + removed a minute')
    ap.add_argument('--rss-growth', type=float, default=2,
                    help='%% the agent\'s RSS may grow over the second half of the run')
    a = ap.parse_args()
    require_root()
    tag = str(os.getpid() % 100000)
    na, nb = 'vigil-sba-' + tag, 'vigil-sbb-' + tag
    procs, missed = [], []
    try:
        for ns in (na, nb):
            sh('ip', 'netns', 'add', ns)
        sh('ip', 'link', 'add', 'sba' + tag, 'netns', na, 'type', 'veth', 'peer', 'name', 'sbb' + tag, 'netns', nb)
        for ns, dev, addr in ((na, 'sba' + tag, A_ADDR), (nb, 'sbb' + tag, B_ADDR)):
            sh('ip', '-n', ns, 'addr', 'add', addr + '/24', 'dev', dev)
            sh('ip', '-n', ns, 'link', 'set', dev, 'up')
            sh('ip', '-n', ns, 'link', 'set', 'lo', 'up')
        for cmd in ('add table inet vigil', 'add chain inet vigil in { type filter hook input priority 0; }',
                    'add rule inet vigil in tcp dport %d numgen random mod 100 lt 5 drop' % BULK_PORT):
            sh('ip', 'netns', 'exec', nb, 'nft', cmd)
        with Agent(a.agent, 'grace_period: 60s\n') as agent:
            for script, port in ((ACCEPTOR, HOLD_PORT), (SINK, BULK_PORT)):
                p = in_ns(nb, [sys.executable, '-c', script, str(port)], stdout=subprocess.PIPE, text=True)
                p.stdout.readline()
                procs.append(p)
            holder = in_ns(na, [sys.executable, '-c', HOLDER, str(a.tcp_procs - a.lossy), B_ADDR, str(HOLD_PORT)],
                           stdout=subprocess.PIPE, text=True)
            holder.stdout.readline()
            procs.append(holder)
            bulk_env = dict(os.environ, TCP_BULK_DEADLINE_S=str(a.seconds + 600))
            for _ in range(a.lossy):  # long transfers through the loss: they retransmit all run long
                procs.append(in_ns(na, [a.tcp_bulk, 'connect', B_ADDR, str(BULK_PORT), str(1 << 40)], env=bulk_env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            devices = set()
            for i in range(a.gpu_procs):  # each runs once the agent has attached to its driver, then waits
                env = dict(os.environ, CUDA_WORKLOAD_DEVICE=str(i % a.gpus))
                w, truth = run_workload(agent, [a.cuda_workload], 'cuda', 'libcuda.so', env=env, timeout=30)
                devices.add(truth['device'])
                procs.append(w)
            print('node: %d GPU processes on %d devices, %d TCP holders (%d through loss), %.0f resets/s, %d s'
                  % (a.gpu_procs, len(devices), a.tcp_procs, a.lossy, a.resets_per_s, a.seconds), flush=True)
            print('%6s %8s %9s %9s %10s' % ('t (s)', 'series', 'created', 'removed', 'RSS (KiB)'))
            start = time.time()
            next_reset, next_sample = start, start
            rows, last_counts, previous = [], {}, None
            while time.time() - start < a.seconds:
                now = time.time()
                if now >= next_reset:
                    in_ns(na, [sys.executable, '-c', 'import socket\ntry:\n socket.create_connection(("%s", %d), 2)\n'
                               'except OSError:\n pass' % (B_ADDR, CLOSED_PORT)], stderr=subprocess.DEVNULL)
                    next_reset += 1.0 / a.resets_per_s
                if now >= next_sample:
                    own, series, created, removed, problems = check_scrape(agent.get('/metrics'), previous)
                    if problems:
                        missed.append('t = %.0f s: %s' % (now - start, '; '.join(problems)))
                        print('MISMATCH ' + missed[-1], flush=True)
                    previous = (own, series)
                    base = rows[-1] if rows else (0, 0, 0, 0)
                    row = (now - start, len(series), base[2] + created, base[3] + removed, rss_kib(agent.proc.pid))
                    rows.append(row)
                    counts = families(series)
                    moved = ', '.join('%s %+d' % (n, counts.get(n, 0) - last_counts.get(n, 0))
                                      for n in sorted(set(counts) | set(last_counts))
                                      if counts.get(n, 0) != last_counts.get(n, 0)) if last_counts else ''
                    last_counts = counts
                    print('%6.0f %8d %9d %9d %10d  %s' % (row + (moved,)), flush=True)
                    next_sample += 10
                time.sleep(0.01)
            final = parse_metrics(agent.get('/metrics'))
            by_family = {}
            for n, _, _ in final:
                by_family[n] = by_family.get(n, 0) + 1
            print('tcp_resets_total groups: ' + ', '.join(sorted(
                '%s/%s' % (l.get('container_id', '')[:12] or 'host', l.get('comm')) for n, l, _ in final
                if n == 'tcp_resets_total' and l.get('direction') == 'sent')))
            print('largest families at the end: ' + ', '.join(
                '%s %d' % kv for kv in sorted(by_family.items(), key=lambda kv: -kv[1])[:8]))
            warm = [r for r in rows if r[0] >= 60]  # after one grace period
            if len(warm) < 2:
                missed.append('run too short: fewer than 2 samples after the first minute (--seconds > 70)')
            else:
                churn = (warm[-1][2] - warm[0][2] + warm[-1][3] - warm[0][3]) / ((warm[-1][0] - warm[0][0]) / 60)
                half = [r for r in rows if r[0] >= rows[-1][0] / 2]
                growth = 100.0 * (half[-1][4] - half[0][4]) / half[0][4]
                peak = max(r[1] for r in rows)
                print('series: max %d, last %d (counted in the scrapes); churn after the first minute %.0f series/minute; '
                      'RSS %d -> %d KiB, %+.1f %% over the second half (goals: <= %d, <= %.0f/min, <= %+.1f %%)'
                      % (peak, rows[-1][1], churn, rows[0][4], rows[-1][4], growth, a.max_series, a.max_churn, a.rss_growth))
                for bad, what in ((peak > a.max_series, 'series %d > %d' % (peak, a.max_series)),
                                  (churn > a.max_churn, 'churn %.0f > %.0f series/minute' % (churn, a.max_churn)),
                                  (growth > a.rss_growth, 'RSS grew %.1f %% > %.1f %% over the second half' % (growth, a.rss_growth))):
                    if bad:
                        missed.append(what)
    finally:
        for p in procs:
            p.kill()
        subprocess.run(['pkill', '-f', 'vigil-sb[ab]-' + tag], check=False)
        for ns in (na, nb):
            pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            sh('ip', 'netns', 'del', ns, check=False)
    for m in missed:
        print('FAIL: ' + m)
    return 1 if missed else 0


if __name__ == '__main__':
    sys.exit(main())
