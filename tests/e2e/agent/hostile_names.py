#!/usr/bin/env python3
"""A hostile neighbour's name cannot blind the node. A process whose name is not UTF-8 (its comm
is the first 15 bytes of the file it exec'd: here 0xFF, "cuda", 0xC0 0x80 an overlong NUL, 0xED
0xA0 0x80 a surrogate) makes CUDA calls beside the agent. Prometheus refuses a whole scrape with
one invalid label value; the agent's scrape must decode as UTF-8, pass promtool, carry the
process under its name with U+FFFD for each bad byte, and count its calls exactly (its own
account). Issue #28, item 3.
usage: hostile_names.py VIGIL_AGENT CUDA_WORKLOAD"""
import os
import shutil
import sys
import tempfile

from vigil_harness.agent import Agent, exit_workload, promtool_check, run_workload, select, total
from vigil_harness.fail import fail, require_root

NAME = b'\xffcuda\xc0\x80\xed\xa0\x80'
SHOWN = '\ufffdcuda\ufffd\ufffd\ufffd\ufffd\ufffd'


def main():
    require_root()
    agent_bin, workload_bin = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp, \
            Agent(agent_bin, 'probes: {tcp: false, nccl: false, usdt: false}\n') as agent:
        hostile = os.path.join(tmp.encode(), NAME)
        shutil.copy(workload_bin, hostile)
        w, truth = run_workload(agent, [hostile], 'cuda', 'libcuda.so')
        with open('/proc/%d/comm' % w.pid, 'rb') as f:
            comm = f.read().rstrip(b'\n')
        print("workload pid %d, comm %r" % (w.pid, comm))
        if comm != NAME:
            fail("the workload's comm is %r, not the hostile name %r" % (comm, NAME))
        try:
            agent.get('/metrics')  # decodes strictly: an invalid byte raises here
        except UnicodeDecodeError as e:
            fail("the scrape is not valid UTF-8 (Prometheus refuses it whole): %s" % e)
        promtool_check(agent)
        s = agent.scrape()
        rows = select(s, 'gpu_memory_allocations_total', pid=w.pid)
        if not rows:
            fail("no gpu_memory_allocations_total for the hostile pid %d" % w.pid)
        names = {l['comm'] for l, _ in rows}
        print("comm label: %r" % names)
        if names != {SHOWN}:
            fail("comm label %r, want %r" % (names, SHOWN))
        got = total(s, 'gpu_memory_allocations_total', require=True, pid=w.pid)
        print("allocations: agent %d, workload %d" % (got, len(truth['sizes'])))
        if got != len(truth['sizes']):
            fail("the hostile-named process's allocations differ from its own count")
        exit_workload(w)
    print("PASS")


if __name__ == '__main__':
    main()
