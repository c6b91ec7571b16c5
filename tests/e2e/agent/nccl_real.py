#!/usr/bin/env python3
"""NCCL truth test on the real libnccl.so.2: the workload calls ncclGetUniqueId (succeeds),
ncclCommInitRank (fails without a GPU) and ncclAllReduce on no communicator (fails at enqueue)
and prints each result. The agent, attached through /proc discovery, must count each call under
the same function and result name, log the failures, and count no communicator.
usage: nccl_real.py VIGIL_AGENT NCCL_WORKLOAD"""
import json
import subprocess
import sys
import time

from vigil_harness.agent import Agent, mapped_path, select, total, wait_attached
from vigil_harness.fail import fail, require_root


def main():
    require_root()
    agent_bin, workload_bin = sys.argv[1], sys.argv[2]
    with Agent(agent_bin, 'probes: {tcp: false, cuda: false}\ngrace_period: 1s\n') as agent:
        w = subprocess.Popen([workload_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if not w.stdout.readline().startswith('ready'):
            fail("workload did not start")
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
