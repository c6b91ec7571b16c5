#!/usr/bin/env python3
"""The agent against NVIDIA's real driver library on a machine without a GPU: Debian's libcuda1
(driver 535, fetched and verified by scripts/fetch_nvidia_libs.py) under a workload that calls one
function of every probed family. Without a device the driver's own code answers: cuInit
CUDA_ERROR_NO_DEVICE, every later call CUDA_ERROR_NOT_INITIALIZED. The agent's
cuda_driver_calls_total by function and its failure families by error name must equal the
workload's record exactly, every probe must attach to the real library (a probe-list symbol it
lacks is an attach failure), and its failure log must carry each call.
The workload runs in a private /dev: as root the real cuInit creates /dev/nvidiactl.
usage: cuda_real_libs.py VIGIL_AGENT CUDA_WORKLOAD FETCH_NVIDIA_LIBS"""
import os
import subprocess
import sys
import time

from vigil_harness.agent import Agent, declared_total, exit_workload, mapped_path, named_copy, run_workload, select, total
from vigil_harness.fail import fail, require_root

COMM = 'cudareal-%d' % (os.getpid() % 100000)
FAMILIES = (('gpu_memory_allocation_failures_total', ('cuMemAlloc_v2', 'cuMemAllocPitch_v2', 'cuMemAllocAsync',
                                                      'cuMemAllocManaged', 'cuMemCreate')),
            ('cuda_graph_launch_failures_total', ('cuGraphLaunch',)),
            ('cuda_graph_instantiate_failures_total', ('cuGraphInstantiateWithFlags',)),
            ('cuda_stream_capture_failures_total', ('cuStreamBeginCapture_v2', 'cuStreamEndCapture')),
            ('cuda_graph_exec_update_failures_total', ('cuGraphExecUpdate_v2',)))
# The agent counts every cuGraphInstantiate* entry point under one function label
# (agent/probes/cuda_probe.cpp gives them one id); the workload records the symbol it called.
AGENT_LABEL = {'cuGraphInstantiateWithFlags': 'cuGraphInstantiate'}


def main():
    require_root()
    agent_bin, workload, fetch = sys.argv[1:4]
    got = subprocess.run([fetch, '--verify-only'], capture_output=True, text=True)
    if got.returncode != 0:
        fail("the real NVIDIA libraries are not in place (the nvidia_libs test fetches them): " + got.stderr.strip())
    libdir = got.stdout.strip()
    real = os.path.realpath(os.path.join(libdir, 'libcuda.so.1'))
    print("driver library: " + os.path.basename(real))
    config = 'probes: {tcp: false, nccl: false}\ngrace_period: 1s\n'
    with named_copy(workload, COMM) as workload_bin, Agent(agent_bin, config) as agent:
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        argv = ['unshare', '-m', 'sh', '-c', 'mount -t tmpfs vigil-no-dev /dev && exec "$0" nodevice', workload_bin]
        w, truth = run_workload(agent, argv, 'cuda', 'libcuda.so', env=env)
        pid = truth['pid']
        mapped = os.path.realpath(mapped_path(pid, 'libcuda.so'))
        if mapped != real:
            fail("the workload mapped %s, not the real driver %s" % (mapped, real))
        if truth['cuInit'] != 'CUDA_ERROR_NO_DEVICE':
            fail("cuInit returned %s: a GPU here? this test is for machines without one" % truth['cuInit'])
        time.sleep(0.5)
        s = agent.scrape()
        ok = True
        calls = {l['function']: v for l, v in select(s, 'cuda_driver_calls_total', pid=str(pid))}
        want = {}
        for fn, n in truth['calls'].items():
            label = AGENT_LABEL.get(fn, fn)
            want[label] = want.get(label, 0.0) + float(n)
        print("cuda_driver_calls_total  agent %s\n                         workload %s" % (calls, want))
        ok &= calls == want
        for family, fns in FAMILIES:
            mine = {}
            for key, n in truth['errors'].items():
                fn, err = key.split('/')
                if fn in fns:
                    mine[err] = mine.get(err, 0) + float(n)
            if not mine:
                fail("the workload made no call that %s counts" % family)
            theirs = {l['error']: v for l, v in select(s, family, pid=str(pid))}
            print("%-40s agent %s workload %s" % (family, theirs, mine))
            ok &= theirs == mine
        log = agent.log_text()
        logged = log.count('cuda failure: pid=%d ' % pid)
        print("failure lines in the log: %d, failed calls: %d" % (logged, sum(truth['errors'].values())))
        ok &= logged == sum(truth['errors'].values())
        attached = total(s, 'vigil_agent_probes_attached', require=True, set='cuda')
        failures = declared_total(s, 'vigil_agent_attach_failures_total', set='cuda')
        print("cuda probes attached: %d, attach failures: %d (%s)" % (attached, failures, os.path.basename(real)))
        ok &= attached > 0 and failures == 0
        exit_workload(w)
        if not ok:
            fail("the agent's account of the real driver's calls differs from the workload's")
    print("ok")


if __name__ == '__main__':
    main()
