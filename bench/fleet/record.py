#!/usr/bin/env python3
"""Records the real vigil-agent's /metrics for the fleet simulator (bench/fleet/simulate.py).

One agent watches two stand-in workloads, as the alerting test does (tests/e2e/alerting):
  - a GPU process on the stand-in libcuda (tests/standins/fake_libcuda.c) making mostly large
    allocations with successful graph launches; at the fault, 1 KiB allocations only while its
    cuGraphLaunch calls fail (the fragmentation + graph-failure P1);
  - an NCCL process (the real libnccl.so.2) streaming over a veth pair between two network
    namespaces; at the fault the link is blackholed until the risk gauge passes 0.5, then the
    process aborts its communicator while TCP backs off (the correlated-timeout P1).
It saves two scrapes 5 s apart per state, so the simulator can take counter rates from them:
  recordings/healthy.prom, healthy.later.prom, fault.prom, fault.later.prom
Each file starts with `# vigil-fleet gpu_pid=N nccl_pid=M time=T`: which pids are the workloads.
usage: sudo bench/run.sh bench/fleet/record.py VIGIL_AGENT LIBCUDA TCP_BULK [--out bench/fleet/recordings]"""
import argparse
import ctypes
import os
import select
import subprocess
import sys
import time

from vigil_harness.agent import Agent, total
from vigil_harness.fail import require_root
from vigil_harness.netns import B_ADDR, Namespaces
from vigil_harness.wait import wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(HERE, '..', '..', 'tests', 'standins')

NCCL_LIB = '/usr/local/cuda/lib64/libnccl.so.2'
CUDA_ERROR_LAUNCH_FAILED = 719
LATER_S = 5


def gpu_workload(libcuda):
    """The GPU process (run as `record.py gpu LIBCUDA`): every 0.25 s four 8 MiB allocations and one
    1 KiB one (freed again) and a graph launch; after a line "fault" on stdin, 1 KiB allocations
    only and every launch fails. End of input exits."""
    cuda = ctypes.CDLL(libcuda)
    if cuda.cuInit(0) != 0:
        sys.exit("cuInit failed")
    ptr = ctypes.c_uint64()
    # One captured and instantiated graph, launched every round as a serving step would be.
    stream, graph, graph_exec = ctypes.c_void_p(0x5157), ctypes.c_void_p(), ctypes.c_void_p()
    if (cuda.cuStreamBeginCapture_v2(stream, 0) or cuda.cuStreamEndCapture(stream, ctypes.byref(graph))
            or cuda.cuGraphInstantiateWithFlags(ctypes.byref(graph_exec), graph, ctypes.c_ulonglong(0))):
        sys.exit("graph capture failed")
    print("ready pid=%d" % os.getpid(), flush=True)
    sizes = [8 << 20] * 4 + [1024]
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.25)
        if ready:
            line = sys.stdin.readline()
            if not line:
                return
            if line.strip() == 'fault':
                sizes = [1024] * 4
                os.environ['VIGIL_FAKE_CUDA_FAIL'] = 'cuGraphLaunch=%d' % CUDA_ERROR_LAUNCH_FAILED
        for size in sizes:
            if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0:
                cuda.cuMemFree_v2(ptr)
        cuda.cuGraphLaunch(graph_exec, stream)


def save(agent, out, name, header):
    text = agent.get('/metrics')
    with open(os.path.join(out, name), 'w') as f:
        f.write(header + '\n' + text)
    print("recorded %s: %d lines" % (name, text.count('\n')), flush=True)


def record_state(agent, out, state, header):
    save(agent, out, state + '.prom', header + ' time=%.3f' % time.time())
    time.sleep(LATER_S)
    save(agent, out, state + '.later.prom', header + ' time=%.3f' % time.time())


def main():
    if len(sys.argv) == 3 and sys.argv[1] == 'gpu':
        return gpu_workload(sys.argv[2])
    ap = argparse.ArgumentParser()
    for a in ('agent', 'libcuda', 'tcp_bulk'):
        ap.add_argument(a)
    ap.add_argument('--out', default=os.path.join(HERE, 'recordings'))
    args = ap.parse_args()
    require_root()
    os.makedirs(args.out, exist_ok=True)
    # The alerting test's agent config, minus its libm stand-in (no probe set is left detached).
    config = ('grace_period: 10s\nwindows: {fragmentation: 10s}\nprobes: {xid: false}\n'
              'correlation: {collective_timeout: 10s}\nlibraries: {cuda: [%s], nccl: [%s]}\n'
              % (os.path.abspath(args.libcuda), NCCL_LIB))
    with Agent(args.agent, config) as agent, Namespaces() as nets:
        gpu = subprocess.Popen([sys.executable, os.path.abspath(__file__), 'gpu', os.path.abspath(args.libcuda)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        server = subprocess.Popen(['ip', 'netns', 'exec', nets.b, args.tcp_bulk, 'listen', '5301', '0'],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        nccl = subprocess.Popen(['ip', 'netns', 'exec', nets.a, sys.executable,
                                 os.path.join(STANDINS, 'nccl_tcp_fault.py'), NCCL_LIB, B_ADDR, '5301'],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            gpu_pid = int(gpu.stdout.readline().split('pid=')[1])
            nccl_pid = int(nccl.stdout.readline().split('pid=')[1].split()[0])
            header = '# vigil-fleet gpu_pid=%d nccl_pid=%d' % (gpu_pid, nccl_pid)
            wait_for('agent sees both workloads', lambda: total(agent.scrape(), 'gpu_memory_allocations_total', pid=gpu_pid) > 0
                     and [s for s in agent.scrape() if s[0] == 'nccl_tcp_timeout_risk_ratio' and s[1].get('pid') == str(nccl_pid)], 30)
            time.sleep(11)  # one fragmentation window of steady state
            record_state(agent, args.out, 'healthy', header)
            gpu.stdin.write('fault\n')
            gpu.stdin.flush()
            nets.nft(nets.b, 100)
            wait_for('risk above 0.5', lambda: total(agent.scrape(), 'nccl_tcp_timeout_risk_ratio', pid=nccl_pid) > 0.5, 60)
            nccl.stdin.write('abort\n')
            nccl.stdin.flush()
            nccl.stdout.readline()
            wait_for('correlated timeout counted', lambda: total(agent.scrape(), 'nccl_tcp_correlated_timeouts_total', pid=nccl_pid) > 0, 30)
            record_state(agent, args.out, 'fault', header)
        finally:
            for p in (gpu, nccl, server):
                p.kill()
                p.wait()


if __name__ == '__main__':
    main()
