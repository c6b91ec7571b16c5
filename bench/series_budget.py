#!/usr/bin/env python3
"""The agent's series budget on a crowded node, on the real kernel: what a node costs in the TSDB.

One agent (all probe sets) watches, for --seconds:
  - --gpu-procs stand-in CUDA workloads (tests/agent/cuda_workload on the stand-in libcuda), spread
    over --gpus device ordinals, alive throughout;
  - --tcp-procs processes each holding a TCP connection across a veth pair between two network
    namespaces, of which --lossy send bulk data through 5 % nftables loss (they retransmit);
  - --resets-per-s short-lived clients per second connecting to a closed port (each gets a reset).
Every 10 s it reads the agent's own vigil_agent_series, vigil_agent_series_created_total and
_removed_total and the agent's RSS; it prints the series total, the families whose series count
moved, churn per minute (created + removed) and RSS over the run. Goal of issue #16: <= 2,000 series, churn <= 100 series/minute,
RSS flat.

usage: sudo bench/series_budget.py VIGIL_AGENT CUDA_WORKLOAD TCP_BULK [--seconds 300]
       [--gpus 8] [--gpu-procs 20] [--tcp-procs 500] [--lossy 20] [--resets-per-s 10]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'e2e', 'agent'))
from harness import Agent, require_root, run_workload, sh, total  # noqa: E402

A_ADDR, B_ADDR = '10.215.0.1', '10.215.0.2'
HOLD_PORT, BULK_PORT, CLOSED_PORT = 7001, 7002, 7003


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        return int(next(l for l in f if l.startswith('VmRSS:')).split()[1])


def families(samples):
    """Series per metric name: where the series, and the churn, are."""
    out = {}
    for n, _, _ in samples:
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
    a = ap.parse_args()
    require_root()
    tag = str(os.getpid() % 100000)
    na, nb = 'vigil-sba-' + tag, 'vigil-sbb-' + tag
    procs = []
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
            rows, last_counts = [], {}
            while time.time() - start < a.seconds:
                now = time.time()
                if now >= next_reset:
                    in_ns(na, [sys.executable, '-c', 'import socket\ntry:\n socket.create_connection(("%s", %d), 2)\n'
                               'except OSError:\n pass' % (B_ADDR, CLOSED_PORT)], stderr=subprocess.DEVNULL)
                    next_reset += 1.0 / a.resets_per_s
                if now >= next_sample:
                    s = agent.scrape()
                    row = (now - start, total(s, 'vigil_agent_series'), total(s, 'vigil_agent_series_created_total'),
                           total(s, 'vigil_agent_series_removed_total'), rss_kib(agent.proc.pid))
                    rows.append(row)
                    counts = families(s)
                    moved = ', '.join('%s %+d' % (n, counts.get(n, 0) - last_counts.get(n, 0))
                                      for n in sorted(set(counts) | set(last_counts))
                                      if counts.get(n, 0) != last_counts.get(n, 0)) if last_counts else ''
                    last_counts = counts
                    print('%6.0f %8d %9d %9d %10d  %s' % (row + (moved,)), flush=True)
                    next_sample += 10
                time.sleep(0.01)
            final = agent.scrape()
            by_family = families(final)
            print('tcp_resets_total groups: ' + ', '.join(sorted(
                '%s/%s' % (l.get('container_id', '')[:12] or 'host', l.get('comm')) for n, l, _ in final
                if n == 'tcp_resets_total' and l.get('direction') == 'sent')))
            print('largest families at the end: ' + ', '.join(
                '%s %d' % kv for kv in sorted(by_family.items(), key=lambda kv: -kv[1])[:8]))
            if len(rows) >= 2:
                warm = [r for r in rows if r[0] >= 60] or rows  # after one grace period
                minutes = (warm[-1][0] - warm[0][0]) / 60 or 1
                churn = (warm[-1][2] - warm[0][2] + warm[-1][3] - warm[0][3]) / minutes
                print('series: max %d, last %d; churn after the first minute %.0f series/minute; '
                      'RSS %d -> %d KiB (goal: <= 2000, <= 100/min, flat)'
                      % (max(r[1] for r in rows), rows[-1][1], churn, rows[0][4], rows[-1][4]))
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
    return 0


if __name__ == '__main__':
    sys.exit(main())
