#!/usr/bin/env python3
"""What the agent costs, checked against sources it does not produce. A stand-in CUDA workload
makes a known number of driver calls (its own account): the kernel's run count of the CUDA set's
entry and return programs (vigil_agent_bpf_program_runs_total) must grow by exactly that number,
and their run time must grow. The agent's process_* families must equal what /proc says of its
pid. A probe named in probes.disable is not attached (two links fewer) and its calls are not run;
an unknown name stops the agent with an error that lists the set's probes; with bpf_stats off the
agent says so and holds no statistics fd, and the run counts stand still unless another process
keeps the kernel counting. The workload runs on a private copy of the stand-in libcuda, the only
library the agent probes: links are per file, so no other process's calls reach these programs.
usage: cost.py VIGIL_AGENT CUDA_WORKLOAD FAKE_LIBCUDA"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, exit_workload, promtool_check, run_workload, total
from vigil_harness.fail import fail, require_root

STATS_FD = 'anon_inode:bpf-stats'  # what BPF_ENABLE_STATS returns (kernel/bpf/syscall.c)


def config(lib, disable='', extra=''):
    """The agent's config: the CUDA set on LIB alone, DISABLE its probes.disable list."""
    return ('probes: {tcp: false, nccl: false, usdt: false%s}\nlibraries: {discover: false, cuda: [%s]}\n%s'
            % (', disable: [%s]' % disable if disable else '', lib, extra))


def runs(agent, program):
    s = agent.scrape()
    return (total(s, 'vigil_agent_bpf_program_runs_total', require=True, set='cuda', program=program),
            total(s, 'vigil_agent_bpf_program_run_seconds_total', require=True, set='cuda', program=program))


def workload_calls(agent, workload_bin, libdir):
    """Runs the workload to its end on the libcuda in LIBDIR; returns its own count of driver
    calls, by function."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    w, truth = run_workload(agent, [workload_bin], 'cuda', 'libcuda.so', env=env)
    exit_workload(w)
    return truth['calls']


def check(what, got, want):
    print("%-58s agent %-10s truth %-10s %s" % (what, got, want, "ok" if got == want else "MISMATCH"))
    return got == want


def proc_truth(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    tick = os.sysconf('SC_CLK_TCK')
    cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime: fields 14, 15 of proc(5)
    with open('/proc/%d/status' % pid) as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS:'))
    return cpu, rss, len(os.listdir('/proc/%d/task' % pid)), len(os.listdir('/proc/%d/fd' % pid))


def stats_holders():
    """Pids holding a BPF_ENABLE_STATS fd: while one does, the kernel counts every program's runs
    (the sysctl shows only its own setting)."""
    pids = set()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            fds = os.listdir('/proc/%s/fd' % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink('/proc/%s/fd/%s' % (pid, fd)) == STATS_FD:
                    pids.add(int(pid))
                    break
            except OSError:
                pass
    return pids


def check_process_families(agent):
    """process_* against /proc/PID of the agent, read just before and after the scrape."""
    pid = agent.proc.pid
    cpu0, rss0, threads0, fds0 = proc_truth(pid)
    s = agent.scrape()
    cpu1, rss1, threads1, fds1 = proc_truth(pid)
    cpu = total(s, 'process_cpu_seconds_total', require=True)
    rss = total(s, 'process_resident_memory_bytes', require=True)
    threads = total(s, 'process_threads', require=True)
    fds = total(s, 'process_open_fds', require=True)
    start = total(s, 'process_start_time_seconds', require=True)
    ok = check('process_cpu_seconds_total within /proc before..after', cpu0 <= cpu <= cpu1 + 0.011, True)
    ok &= check('process_resident_memory_bytes within 10 %% of VmRSS (%d)' % rss1,
                abs(rss - rss1) <= 0.1 * max(rss0, rss1), True)
    ok &= check('process_threads = /proc/PID/task entries', threads, threads1 if threads0 == threads1 else threads)
    # The scrape's own connection is open while the agent counts: one more than before or after.
    ok &= check('process_open_fds = /proc/PID/fd entries (+ the scrape socket)', fds in (fds0, fds0 + 1, fds1, fds1 + 1), True)
    ok &= check('process_start_time_seconds within the test run', agent.started - 5 <= start <= time.time(), True)
    ok &= check('process_max_fds > 0', total(s, 'process_max_fds', require=True) > 0, True)
    ticks = total(s, 'vigil_agent_housekeeping_ticks_total', require=True)
    lag = total(s, 'vigil_agent_housekeeping_lag_seconds', require=True)
    ok &= check('housekeeping ticks > 0, lag < 1 s (poll 200 ms)', ticks > 0 and 0 <= lag < 1, True)
    return ok


def checks(agent_bin, workload_bin, lib):
    libdir = os.path.dirname(lib)
    ok = True
    with Agent(agent_bin, config(lib)) as agent:
        agent.started = time.time() - 20
        promtool_check(agent)
        ok &= check('vigil_agent_bpf_stats_enabled', total(agent.scrape(), 'vigil_agent_bpf_stats_enabled', require=True), 1)
        (enter0, t_enter0), (exit0, _) = runs(agent, 'cuda_enter'), runs(agent, 'cuda_exit')
        calls = workload_calls(agent, workload_bin, libdir)
        (enter1, t_enter1), (exit1, _) = runs(agent, 'cuda_enter'), runs(agent, 'cuda_exit')
        n = sum(calls.values())
        ok &= check('cuda_enter runs during the workload (all its driver calls)', enter1 - enter0, n)
        ok &= check('cuda_exit runs during the workload', exit1 - exit0, n)
        ok &= check('cuda_enter run time grew', t_enter1 > t_enter0, True)
        print("cuda_enter: %.0f ns per run" % ((t_enter1 - t_enter0) * 1e9 / max(1, enter1 - enter0)))
        attached_all = total(agent.scrape(), 'vigil_agent_probes_attached', require=True, set='cuda')
        ok &= check_process_families(agent)

    with Agent(agent_bin, config(lib, disable='"cuda:cuMemAlloc_v2"')) as agent:
        (enter0, _), (exit0, _) = runs(agent, 'cuda_enter'), runs(agent, 'cuda_exit')
        calls = workload_calls(agent, workload_bin, libdir)
        (enter1, _), (exit1, _) = runs(agent, 'cuda_enter'), runs(agent, 'cuda_exit')
        n = sum(calls.values()) - calls['cuMemAlloc_v2']
        ok &= check('with cuda:cuMemAlloc_v2 disabled: cuda_enter runs', enter1 - enter0, n)
        ok &= check('with cuda:cuMemAlloc_v2 disabled: links attached', total(agent.scrape(), 'vigil_agent_probes_attached',
                                                                             require=True, set='cuda'), attached_all - 2)

    with open('/proc/sys/kernel/bpf_stats_enabled') as f:
        sysctl_on = f.read().strip() == '1'
    with Agent(agent_bin, config(lib, extra='bpf_stats: false\n')) as agent:
        ok &= check('bpf_stats: false: vigil_agent_bpf_stats_enabled (= the sysctl)',
                    total(agent.scrape(), 'vigil_agent_bpf_stats_enabled', require=True), 1 if sysctl_on else 0)
        ok &= check('bpf_stats: false: the agent holds no %s fd' % STATS_FD, agent.proc.pid in stats_holders(), False)
        others = stats_holders() - {agent.proc.pid}
        enter0 = runs(agent, 'cuda_enter')[0]
        workload_calls(agent, workload_bin, libdir)
        enter1 = runs(agent, 'cuda_enter')[0]
        others |= stats_holders() - {agent.proc.pid}
        if sysctl_on or others:
            # The kernel counts for them: the runs say nothing of this agent, its fd table (above) does.
            print("bpf_stats: false: cuda_enter runs counted %d, not checked: the kernel counts while %s"
                  % (enter1 - enter0, 'the sysctl is 1' if sysctl_on else
                     'pids %s hold %s' % (sorted(others), STATS_FD)))
        else:
            ok &= check('bpf_stats: false: cuda_enter runs counted', enter1 - enter0, 0)

    with tempfile.NamedTemporaryFile('w', suffix='.yaml') as bad:
        bad.write('probes: {disable: ["cuda:cuMemAllocc_v2"]}\n')
        bad.flush()
        r = subprocess.run([agent_bin, '--config', bad.name], capture_output=True, text=True, timeout=20)
        print("unknown probe: rc %d: %s" % (r.returncode, r.stderr.strip()))
        ok &= check('unknown probe name: exit 2 naming it and the known ones',
                    r.returncode == 2 and 'cuda:cuMemAllocc_v2' in r.stderr and 'cuMemAlloc_v2' in r.stderr, True)
    return ok


def main():
    require_root()
    agent_bin, workload_bin, fake_lib = sys.argv[1:4]
    libdir = tempfile.mkdtemp(prefix='vigil-cost-')
    try:
        lib = os.path.join(libdir, 'libcuda.so.1')
        shutil.copy(fake_lib, lib)  # an inode of its own
        ok = checks(agent_bin, workload_bin, lib)
    finally:
        shutil.rmtree(libdir)
    if not ok:
        fail("the agent's cost figures disagree with the kernel's and the workload's")
    print("PASS")


if __name__ == '__main__':
    main()
