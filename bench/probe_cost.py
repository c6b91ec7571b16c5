#!/usr/bin/env python3
"""What one probe hit costs, per probe kind and call rate: the driver uprobes (entry and return,
through the stand-in libcuda), a USDT probe, and the TCP sendmsg tracepoint (a loopback
connection), each paced at the given calls/s on one thread by probe_bench's `paced` mode; also
loopback connections opened and closed (the TCP set's state-change and accept programs), and a
syscall no program watches (getppid: what the syscall tracepoints the agent attaches cost every
other syscall).

For each (kind, rate) it reports
  - ns per program run from the kernel's own run-time statistics (bpf_prog_info run_time_ns /
    run_cnt of the agent's programs, read with bpftool; kernel.bpf_stats_enabled is set to 1 for
    the run and put back as it was): the BPF program's time only, not the trap that enters it;
  - ns per call added to the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID inside
    probe_bench): the same paced run without the agent, before it starts and after it stops
    (their mean), against the run with it;
  - the agent's CPU (% of one core, its process CPU clock over the run) and resident memory.
Fails when the agent does not log its cuda and usdt sets attached to the benchmark's files, or
when a program's run_cnt grew by fewer runs than the calls made (the attach did not happen).
Needs root. A run of the defaults takes about 2 minutes.

usage: sudo bench/run.sh bench/probe_cost.py [--rates 10000,100000,1000000] [--conn-rates 1000,10000] [--seconds 3]
                                [--agent A] [--probe-bench B] [--libcuda L]
"""
import argparse
import json
import os
import subprocess
import time

from vigil_harness.agent import Agent, wait_attached
from vigil_harness.fail import fail, require_root

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BUILD = os.path.join(ROOT, 'build', 'dev')
PAGE = os.sysconf('SC_PAGE_SIZE')
# The programs each kind's calls run, and the fewest runs one call must make of each (the check
# that the attach happened); every program listed is reported with its runs per call.
PROGRAMS = {
    'uprobe': (('cuda_enter', 1), ('cuda_exit', 1)),
    'usdt': (('pytorch_malloc', 0.5), ('pytorch_free', 0.5)),  # calls alternate malloc, free
    'tcp': (('sendmsg_locked', 1),),
    'conn': (('set_state', 1), ('accept4_exit', 1), ('sendmsg_locked', 0), ('send_reset', 0)),
    'syscall': (('accept4_exit', 0), ('accept_exit', 0)),
}
KIND_NAME = {
    'uprobe': 'CUDA driver call: uprobe entry + return',
    'usdt': 'USDT probe (`pytorch:malloc` / `pytorch:free`)',
    'tcp': 'TCP `send()` of 1 byte on loopback',
    'conn': 'TCP connection on loopback: connect, accept, close both ends',
    'syscall': '`getppid()`, a syscall no program watches',
}


def process_cpu_s(pid):
    """PID's CPU time, all threads, from its process CPU clock (clock_getcpuclockid's encoding)."""
    return time.clock_gettime(((~pid) << 3) | 2)


def rss_mib(pid):
    with open('/proc/%d/statm' % pid) as f:
        return int(f.read().split()[1]) * PAGE / 2 ** 20


def paced(bench, kind, rate, seconds):
    out = subprocess.run([bench, 'paced', kind, str(rate), str(seconds)], capture_output=True, text=True,
                         check=True).stdout
    fields = dict(kv.split('=') for kv in out.split())
    return int(fields['calls']), float(fields['wall_s']), float(fields['thread_cpu_s'])


def prog_stats(ids):
    """{name: (run_time_ns, run_cnt)} of the programs with these ids (summed over equal names)."""
    out = {}
    for p in json.loads(subprocess.run(['bpftool', 'prog', 'show', '--json'], capture_output=True, text=True,
                                       check=True).stdout):
        if p['id'] in ids:
            t, n = out.get(p['name'], (0, 0))
            out[p['name']] = (t + p.get('run_time_ns', 0), n + p.get('run_cnt', 0))
    return out


class StatsEnabled:
    """kernel.bpf_stats_enabled = 1 for the block, then its old value."""
    PATH = '/proc/sys/kernel/bpf_stats_enabled'

    def __enter__(self):
        with open(self.PATH) as f:
            self.old = f.read().strip()
        with open(self.PATH, 'w') as f:
            f.write('1')

    def __exit__(self, *exc):
        with open(self.PATH, 'w') as f:
            f.write(self.old)


def measure_on(agent, bench, kind, rate, seconds):
    ids = agent.held_bpf_ids()['prog_id']
    s0, c0 = prog_stats(ids), process_cpu_s(agent.proc.pid)
    calls, wall, cpu = paced(bench, kind, rate, seconds)
    s1, c1 = prog_stats(ids), process_cpu_s(agent.proc.pid)
    progs = []
    for name, per_call in PROGRAMS[kind]:
        if name not in s1:
            fail('the agent holds no program %s (it holds %s)' % (name, sorted(s1)))
        dt, dn = s1[name][0] - s0.get(name, (0, 0))[0], s1[name][1] - s0.get(name, (0, 0))[1]
        if dn < int(calls * per_call):
            fail('%s ran %d times for %d %s calls: the attach did not happen' % (name, dn, calls, kind))
        progs.append((name, dn / calls, dt / dn if dn else 0))
    return {'calls': calls, 'wall': wall, 'cpu': cpu, 'progs': progs,
            'agent_cpu': 100 * (c1 - c0) / wall, 'agent_rss': rss_mib(agent.proc.pid)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rates', default='10000,100000,1000000', help='probed calls per second')
    ap.add_argument('--conn-rates', default='1000,10000', help='loopback connections per second')
    ap.add_argument('--seconds', type=float, default=3)
    ap.add_argument('--agent', default=os.path.join(BUILD, 'agent', 'vigil-agent'))
    ap.add_argument('--probe-bench', default=os.path.join(BUILD, 'tests', 'standins', 'probe_bench'))
    ap.add_argument('--libcuda', default=os.path.join(BUILD, 'tests', 'standins', 'fake_cuda', 'libcuda.so.1'))
    a = ap.parse_args()
    require_root()
    bench, libcuda = os.path.realpath(a.probe_bench), os.path.realpath(a.libcuda)
    runs = [(k, int(r)) for k in PROGRAMS if k != 'conn' for r in a.rates.split(',')]
    runs += [('conn', int(r)) for r in a.conn_rates.split(',')]
    off = {run: [paced(bench, *run, a.seconds)] for run in runs}
    config = ('probes: {tcp: true, cuda: true, nccl: false, usdt: true, xid: false}\n'
              'libraries: {discover: false, cuda: [%s], usdt: [%s]}\n' % (libcuda, bench))
    with StatsEnabled():
        with Agent(a.agent, config) as agent:
            wait_attached(agent, 'cuda', libcuda)
            wait_attached(agent, 'usdt', bench)
            on = {run: measure_on(agent, bench, *run, a.seconds) for run in runs}
    for run in runs:
        off[run].append(paced(bench, *run, a.seconds))

    print('| call | target calls/s | achieved with agent | programs: runs per call × ns per run '
          '(kernel run_time_ns / run_cnt) | calling thread CPU, ns per call: without → with agent '
          '| added ns per call | agent CPU (% of a core) | agent RSS (MiB) |')
    print('|---|---|---|---|---|---|---|---|')
    for kind, rate in runs:
        r = on[(kind, rate)]
        base = sum(cpu / calls for calls, _, cpu in off[(kind, rate)]) / 2 * 1e9
        with_agent = r['cpu'] / r['calls'] * 1e9
        print('| %s | %d | %.0f | %s | %.0f → %.0f | %.0f | %.2f | %.1f |' % (
            KIND_NAME[kind], rate, r['calls'] / r['wall'],
            ', '.join('`%s` %.2g × %.0f' % p for p in r['progs']),
            base, with_agent, with_agent - base, r['agent_cpu'], r['agent_rss']))
    print('\nwithout the agent, before / after (calls/s achieved, thread CPU ns per call):')
    for run in runs:
        print('  %s %d: %s' % (run[0], run[1], ' / '.join('%.0f, %.0f' % (c / w, cpu / c * 1e9)
                                                          for c, w, cpu in off[run])))


if __name__ == '__main__':
    main()
