#!/usr/bin/env python3
"""NCCL truth test on the real libnccl.so.2: the workload calls ncclGetUniqueId (succeeds),
ncclCommInitRank (fails without a GPU) and ncclAllReduce on no communicator (fails at enqueue)
and prints each result. The agent, attached through /proc discovery, must count each call under
the same function and result name, log the failures, and count no communicator.
With FETCH_NVIDIA_LIBS the workload loads the NCCL that torch 2.15.0 pins (PyPI nvidia-nccl-cu13
2.30.7, fetched and verified by scripts/fetch_nvidia_libs.py) instead of the CUDA toolkit's.
usage: nccl_real.py VIGIL_AGENT NCCL_WORKLOAD [FETCH_NVIDIA_LIBS]"""
import json
import os
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, mapped_path, select, total, wait_attached
from vigil_harness.fail import fail, require_root


def main():
    require_root()
    agent_bin, workload_bin = sys.argv[1], sys.argv[2]
    if len(sys.argv) == 3:
        check(agent_bin, workload_bin, None, None)
        return
    got = subprocess.run([sys.argv[3], '--verify-only'], capture_output=True, text=True)
    if got.returncode != 0:
        fail("the real NVIDIA libraries are not in place (the nvidia_libs test fetches them): " + got.stderr.strip())
    # Only NCCL comes from there (the cache also holds a real libcuda.so.1, which as root would
    # create /dev/nvidiactl): a folder of its own holds a link to it.
    want_lib = os.path.realpath(os.path.join(got.stdout.strip(), 'libnccl.so.2'))
    with tempfile.TemporaryDirectory(prefix='vigil-nccl-') as nccl_dir:
        os.symlink(want_lib, os.path.join(nccl_dir, 'libnccl.so.2'))
        check(agent_bin, workload_bin, dict(os.environ, LD_LIBRARY_PATH=nccl_dir), want_lib)


def check(agent_bin, workload_bin, env, want_lib):
    """The workload on the NCCL its environment ENV loads (WANT_LIB, when given) under the agent."""
    with Agent(agent_bin, 'probes: {tcp: false, cuda: false}\ngrace_period: 1s\n') as agent:
        w = subprocess.Popen([workload_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if not w.stdout.readline().startswith('ready'):
            fail("workload did not start")
        mapped = os.path.realpath(mapped_path(w.pid, 'libnccl.so'))
        print("NCCL library: %s" % mapped)
        if want_lib and mapped != want_lib:
            fail("the workload mapped %s, not %s" % (mapped, want_lib))
        start = time.time()
        wait_attached(agent, 'nccl', mapped_path(w.pid, 'libnccl.so'), timeout=30)
        print("attached to libnccl.so.2 %.1f s after the workload started" % (time.time() - start))
        w.stdin.write('\n')
        w.stdin.flush()
        truth = json.loads(w.stdout.readline())
        pid = truth['pid']
        time.sleep(0.5)
        s = agent.scrape()
        got = {'%s/%s' % (l['function'], l['result']): v for l, v in select(s, 'nccl_calls_total', pid=pid)}
        print("workload: %s\nagent:    %s" % (truth['calls'], got))
        if got != truth['calls']:
            fail("nccl_calls_total differs from the workload's results")
        if truth['calls'].get('ncclGetUniqueId/ncclSuccess') != 1:
            fail("ncclGetUniqueId did not succeed here; the test expects a host without a GPU")
        # Both are exported at 0: the communicators per NCCL process, the bytes per collective called.
        if total(s, 'nccl_communicators', require=True, pid=pid) != 0:
            fail("a failed ncclCommInitRank was counted as a communicator")
        if total(s, 'nccl_bytes_total', require=True, pid=pid, op='AllReduce') != 0:
            fail("bytes counted for a collective that failed at enqueue")
        log = agent.log_text()
        for key in truth['calls']:
            fn, result = key.split('/')
            if result != 'ncclSuccess' and ('nccl failure: pid=%d' % pid not in log or '%s -> %s' % (fn, result) not in log):
                fail("failure of %s (%s) not in the agent's log:\n%s" % (fn, result, log))
        w.stdin.write('\n')
        w.stdin.flush()
        w.wait(timeout=10)
    print("ok")


if __name__ == '__main__':
    main()
