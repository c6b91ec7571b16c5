#!/usr/bin/env python3
"""A hostile neighbour's files cannot hang, fool or bloat the agent. Each attacker runs beside
the agent, then a legitimate stand-in CUDA workload starts and must be counted exactly (its own
account), /healthz must answer and SIGTERM must stop the agent within a few seconds:
- fifo: a process maps a real libcuda.so.1, then chroots into a jail where that same path is a
  FIFO (an agent that opens the path blocks in open() for ever);
- symlink: the same, the jail's path a symlink to /proc/1/root/<a file of the node> (or the
  test's own /proc/PID/root where pid 1 is out of reach); inotify on that file shows whether
  anything opened it (the agent must not);
- maps: a process with 60,000 mappings of a file whose path is ~3.8 KB (230 MB of maps): the
  agent's peak RSS (VmHWM) stays under the DaemonSet's 256 MiB limit and the partial scan is
  counted in vigil_agent_discovery_refused_total{reason="maps_too_large"};
- processes: 10,000 idle processes, every one's maps read on each full scan: VmHWM as above.
After attaching, the agent holds no descriptor of any probed file (closed once attached: the
uprobes hold the inode, and the legitimate workload is still counted). Issue #28, items 1 and 2.
usage: hostile_files.py VIGIL_AGENT CUDA_WORKLOAD FAKE_LIBCUDA [fifo|symlink|maps|processes]..."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vigil_harness.agent import Agent, exit_workload, promtool_check, run_workload, select, total
from vigil_harness.fail import fail, require_root

CONFIG = 'probes: {tcp: false, nccl: false, usdt: false}\ndiscovery_interval: 1s\n'
LIMIT_MIB = 256  # deploy/: the agent's memory limit
MAPPINGS = 60000
PROCESSES = 10000
STOP_WITHIN_S = 30  # detaching costs ~0.1 s per uprobe link (agent_cuda_driver: 4.4 s for 42)

# Maps FILE executable, chroots into JAIL (where FILE's path is whatever the test put there),
# says 'ready' and waits for a line on stdin.
ATTACKER = r'''
import mmap, os, sys
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
os.chroot(sys.argv[2])
os.chdir('/')
print('ready', flush=True)
sys.stdin.readline()
'''

# Maps the file at argv[1] N times (offset 0 each time, so no two mappings merge), through libc's
# mmap: Python's mmap objects each hold a duplicate descriptor.
MANY_MAPPINGS = r'''
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(int(sys.argv[2])):
    if libc.mmap(None, 4096, 1, 1, fd, 0) in (None, ctypes.c_void_p(-1).value):  # PROT_READ, MAP_SHARED
        sys.exit('mmap: errno %d' % ctypes.get_errno())
print('ready', flush=True)
sys.stdin.readline()
'''

# Forks argv[2] idle children (killed with it: PR_SET_PDEATHSIG), each with as many lines of maps
# as a fork of the test itself has (182: argv[1] mapped at offset 0 as often as it takes). Says
# 'ready'; on a line on stdin kills and reaps them. A small interpreter (-S, collector off) rather
# than the test's own: a fork copies the parent's page tables and the parent then copies each page
# it writes, and 10,000 forks of the test took 48 s in CI, of this one 8 s (docs/performance.md).
FORKER = r'''
import ctypes, gc, os, signal, sys
gc.disable()
gc.freeze()
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
with open('/proc/self/maps') as f:
    lines = sum(1 for _ in f)
for _ in range(max(0, 182 - lines)):
    if libc.mmap(None, 4096, 1, 2, fd, 0) in (None, ctypes.c_void_p(-1).value):  # PROT_READ, MAP_PRIVATE
        sys.exit('mmap: errno %d' % ctypes.get_errno())
parent, children = os.getpid(), []
for _ in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == parent:
            signal.pause()
        os._exit(0)
    children.append(pid)
print('ready', flush=True)
sys.stdin.readline()
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
'''


def start(code, *args, python_flags=()):
    p = subprocess.Popen([sys.executable, *python_flags, '-c', code] + [str(a) for a in args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != 'ready':
        fail("attacker did not start (exit %s)" % p.wait())
    return p


def finish(p):
    if p.poll() is None:
        p.kill()
    p.wait(timeout=10)


def refused(agent):
    return {l['reason']: v for l, v in select(agent.scrape(), 'vigil_agent_discovery_refused_total')}


def legitimate_workload_counted(agent, workload_bin):
    """A stand-in CUDA workload started now is attached to and counted exactly; afterwards the
    agent holds no descriptor of a libcuda (closed after the attach, the probes still count)."""
    w, truth = run_workload(agent, [workload_bin], 'cuda', 'libcuda.so', timeout=20)
    got = total(agent.scrape(), 'gpu_memory_allocations_total', require=True, pid=w.pid)
    print("legitimate workload pid %d: agent %d allocations, workload %d" % (w.pid, got, len(truth['sizes'])))
    if got != len(truth['sizes']):
        fail("the legitimate workload's allocations differ from its own count")
    exit_workload(w)
    held = []
    for fd in os.listdir('/proc/%d/fd' % agent.proc.pid):
        try:
            target = os.readlink('/proc/%d/fd/%s' % (agent.proc.pid, fd))
        except OSError:
            continue
        if 'libcuda' in target:
            held.append(target)
    if held:
        fail("the agent still holds probed files open after attaching: %s" % held)


def healthy_and_stops(agent):
    if agent.get('/healthz') != 'ok\n':
        fail("/healthz did not answer ok")
    promtool_check(agent)
    start_t = time.time()
    agent.proc.terminate()
    agent.wait_stopped(STOP_WITHIN_S)
    print("agent stopped %.1f s after SIGTERM" % (time.time() - start_t))


def attacker_resolved_through_map_files(agent, pid):
    """The attacker's real library (what it maps) was reached through map_files, not its path."""
    deadline = time.time() + 10
    while time.time() < deadline:
        if any('cuda: ' in l and 'probes attached in /proc/%d/map_files/' % pid in l
               for l in agent.log_text().splitlines()):
            return
        time.sleep(0.2)
    fail("the attacker's mapped libcuda was not attached through /proc/%d/map_files: %s"
         % (pid, agent.log_text()[-2000:]))


def jailed_attacker(tmp, fake_lib, plant):
    """A real copy of libcuda.so.1 mapped, then a chroot into a jail where PLANT(path) made the
    same path something else. Returns the attacker process."""
    lib = os.path.join(tmp, 'lib', 'libcuda.so.1')
    os.makedirs(os.path.dirname(lib))
    shutil.copy(fake_lib, lib)
    jail = os.path.join(tmp, 'jail')
    in_jail = jail + lib
    os.makedirs(os.path.dirname(in_jail))
    plant(in_jail)
    return start(ATTACKER, lib, jail)


def fifo(agent_bin, workload_bin, fake_lib):
    with tempfile.TemporaryDirectory() as tmp, Agent(agent_bin, CONFIG) as agent:
        attacker = jailed_attacker(tmp, fake_lib, os.mkfifo)
        try:
            legitimate_workload_counted(agent, workload_bin)
            attacker_resolved_through_map_files(agent, attacker.pid)
            print("refused: %s" % refused(agent))
            healthy_and_stops(agent)
        finally:
            finish(attacker)


class Inotify:
    """Opens of one file, seen by the kernel's inotify (IN_OPEN), whoever opens it."""
    IN_OPEN, IN_NONBLOCK = 0x20, 0o4000

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, path.encode(), self.IN_OPEN) < 0:
            fail("inotify on %s: errno %d" % (path, ctypes.get_errno()))

    def opened(self):
        try:
            return len(os.read(self.fd, 65536)) > 0
        except BlockingIOError:
            return False


def symlink(agent_bin, workload_bin, fake_lib):
    with tempfile.TemporaryDirectory() as tmp, Agent(agent_bin, CONFIG) as agent:
        # The node's file: an ELF with the driver's symbols, so a fooled agent would attach to it.
        host_file = os.path.join(tmp, 'node', 'libnode.so')
        os.makedirs(os.path.dirname(host_file))
        shutil.copy(fake_lib, host_file)
        watch = Inotify(host_file)
        if watch.opened():
            fail("inotify saw an open before the attacker started")
        # The node's root as another process shows it: pid 1's, unless this machine denies it
        # (pid 1 holding a capability we lack); then this test's own, an equal escape.
        node_root = '/proc/1/root'
        try:
            open(node_root + host_file, 'rb').close()
        except PermissionError:
            node_root = '/proc/%d/root' % os.getpid()
            open(node_root + host_file, 'rb').close()
        # Self-check: the watch saw that open, so it would see the agent's.
        if not watch.opened():
            fail("inotify does not see opens through %s: the check could not fail" % node_root)
        print("the jail's libcuda.so.1 -> %s%s" % (node_root, host_file))
        attacker = jailed_attacker(tmp, fake_lib, lambda p: os.symlink(node_root + host_file, p))
        try:
            legitimate_workload_counted(agent, workload_bin)  # several discovery scans meanwhile
            if watch.opened():
                fail("the agent opened the node's file %s through the attacker's symlink" % host_file)
            attacker_resolved_through_map_files(agent, attacker.pid)
            print("node file %s: never opened; refused: %s" % (host_file, refused(agent)))
            healthy_and_stops(agent)
        finally:
            finish(attacker)


def vm_hwm_mib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024.0
    fail("no VmHWM for pid %d" % pid)


def many_mappings(agent_bin, workload_bin, _fake_lib):
    with tempfile.TemporaryDirectory() as tmp:
        # A path of ~3.8 KB: 15 directories of 250 characters.
        d = tmp
        for i in range(15):
            d = os.path.join(d, chr(ord('a') + i) * 250)
        os.makedirs(d)
        data = os.path.join(d, 'data.bin')
        with open(data, 'wb') as f:
            f.write(b'\0' * 4096)
        attacker = start(MANY_MAPPINGS, data, MAPPINGS)
        try:
            with open('/proc/%d/maps' % attacker.pid, 'rb') as f:
                size = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b''))
            print("attacker pid %d: %d mappings of a %d-byte path, %.0f MB of maps"
                  % (attacker.pid, MAPPINGS, len(data), size / 1e6))
            with Agent(agent_bin, CONFIG) as agent:
                time.sleep(4)  # several full scans
                legitimate_workload_counted(agent, workload_bin)
                hwm = vm_hwm_mib(agent.proc.pid)
                counts = refused(agent)
                tick = total(agent.scrape(), 'vigil_agent_housekeeping_duration_seconds')
                print("agent VmHWM %.1f MiB (limit %d MiB), last housekeeping tick %.3f s; refused: %s"
                      % (hwm, LIMIT_MIB, tick, counts))
                if hwm >= LIMIT_MIB:
                    fail("the agent's peak RSS %.1f MiB is past the DaemonSet limit" % hwm)
                if counts.get('maps_too_large', 0) < 1:
                    fail("the attacker's maps past the limit were not counted (maps_too_large)")
                healthy_and_stops(agent)
        finally:
            finish(attacker)


def many_processes(agent_bin, workload_bin, _fake_lib):
    """10,000 idle processes to scan on every full scan."""
    start_t = time.time()
    forker = start(FORKER, sys.executable, PROCESSES, python_flags=('-S',))
    try:
        children = [int(pid) for pid in open('/proc/%d/task/%d/children' % (forker.pid, forker.pid)).read().split()]
        if len(children) != PROCESSES:
            fail("the forker has %d children, not %d" % (len(children), PROCESSES))
        with open('/proc/%d/maps' % children[-1]) as f:
            lines = sum(1 for _ in f)
        print("%d processes forked in %.1f s, %d lines of maps each" % (PROCESSES, time.time() - start_t, lines))
        with Agent(agent_bin, CONFIG) as agent:
            time.sleep(4)  # full scans
            legitimate_workload_counted(agent, workload_bin)
            ticks = []
            for _ in range(10):
                ticks.append(total(agent.scrape(), 'vigil_agent_housekeeping_duration_seconds'))
                time.sleep(0.5)
            hwm = vm_hwm_mib(agent.proc.pid)
            print("agent VmHWM %.1f MiB (limit %d MiB), longest of 10 housekeeping ticks %.3f s"
                  % (hwm, LIMIT_MIB, max(ticks)))
            if hwm >= LIMIT_MIB:
                fail("the agent's peak RSS %.1f MiB is past the DaemonSet limit" % hwm)
            healthy_and_stops(agent)
    finally:
        forker.stdin.write('\n')
        forker.stdin.flush()
        forker.wait(timeout=60)


SCENARIOS = {'fifo': fifo, 'symlink': symlink, 'maps': many_mappings, 'processes': many_processes}


def main():
    require_root()
    agent_bin, workload_bin, fake_lib = sys.argv[1:4]
    for name in sys.argv[4:] or list(SCENARIOS):
        print("== %s" % name, flush=True)
        SCENARIOS[name](agent_bin, workload_bin, fake_lib)
    print("PASS")


if __name__ == '__main__':
    main()
