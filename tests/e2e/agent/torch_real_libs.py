#!/usr/bin/env python3
"""The agent against PyTorch's own libc10_cuda.so (torch 2.15.0 from PyPI, beside its libc10.so
and libcudart.so.13 of nvidia-cuda-runtime 13.2.86; fetched and verified by
scripts/fetch_nvidia_libs.py) in a process that loads it as `import torch` does (dlopen,
RTLD_GLOBAL), on a machine without a GPU. Its caching allocator never allocates here, so
pytorch:malloc and pytorch:free never fire: what is checked is the attachment, against the
kernel's own account, not the agent's.
- Every site of the file's notes (readelf -n: the count is read from the file, not assumed) is
  a uprobe of the agent (bpftool perf: the kernel's list of the agent's uprobes, by file and
  offset), each exactly once.
- Each probe's semaphore, read from the process's memory (/proc/PID/mem), is 0 before the agent,
  then the number of the file's sites that share it while the agent runs (the kernel adds one per
  uprobe it installs with a reference counter: kernel/events/uprobes.c, update_ref_ctr), and 0
  again after the agent exits: by SIGTERM, and by SIGKILL once the kernel drops its uprobes.
  Another agent on the machine shares the uprobes (one per file and offset, however many hold
  it): then the semaphores stay at the sites' count throughout, which is what is checked, and
  the test says so.
usage: torch_real_libs.py VIGIL_AGENT FETCH_NVIDIA_LIBS"""
import json
import os
import re
import subprocess
import sys
import time

from vigil_harness.agent import Agent, remove_pins, sh, wait_attached
from vigil_harness.fail import fail, require_root

PROBES = ('pytorch:malloc', 'pytorch:free')
PROGRAMS = ('pytorch_malloc', 'pytorch_free')  # bpf/usdt.bpf.c
LOADER = r'''
import ctypes, os, sys
d = sys.argv[1]
for lib in ('libc10.so', 'libc10_cuda.so'):  # torch/__init__.py: its libraries with RTLD_GLOBAL
    ctypes.CDLL(os.path.join(d, lib), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
print('ready', flush=True)
sys.stdin.readline()
'''


def notes(path):
    """[(provider:name, location, semaphore)] of PATH's stapsdt notes, as binutils reads them."""
    text = sh('readelf', '-n', path).stdout
    found = re.findall(r'Provider: (\S+)\s+Name: (\S+)\s+Location: (0x[0-9a-f]+), Base: 0x[0-9a-f]+, '
                       r'Semaphore: (0x[0-9a-f]+)', text)
    return [(p + ':' + n, int(loc, 16), int(sem, 16)) for p, n, loc, sem in found]


def loads(path):
    """[(offset, vaddr, filesz)] of PATH's PT_LOAD segments (readelf -l)."""
    text = sh('readelf', '-lW', path).stdout
    return [(int(o, 16), int(v, 16), int(f, 16))
            for o, v, f in re.findall(r'LOAD\s+(0x[0-9a-f]+) (0x[0-9a-f]+) 0x[0-9a-f]+ (0x[0-9a-f]+)', text)]


def file_offset(segments, vaddr):
    """The file offset of VADDR: what a uprobe on it names (libbpf's conversion of a note's address)."""
    for off, va, size in segments:
        if va <= vaddr < va + size:
            return vaddr - va + off
    fail("address 0x%x is in no PT_LOAD segment" % vaddr)


def load_bias(pid, path, segments):
    """Where the dynamic loader put PATH in PID: the start of its first segment's mapping minus
    that segment's page-aligned address."""
    st = os.stat(path)
    first_off, first_va, _ = segments[0]
    with open('/proc/%d/maps' % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6:
                continue
            dev_major, dev_minor = (int(x, 16) for x in fields[3].split(':'))
            if (int(fields[4]) == st.st_ino and os.makedev(dev_major, dev_minor) == st.st_dev
                    and int(fields[2], 16) == first_off & ~0xfff):
                return int(fields[0].split('-')[0], 16) - (first_va & ~0xfff)
    fail("pid %d does not map %s" % (pid, path))


def semaphores(pid, addresses):
    """{address: the unsigned short at bias + address in PID's memory}."""
    out = {}
    with open('/proc/%d/mem' % pid, 'rb') as mem:
        for name, (at, runtime) in addresses.items():
            mem.seek(runtime)
            out[name] = int.from_bytes(mem.read(2), 'little')
    return out


def uprobe_offsets(programs):
    """{pid: offsets} of the uprobes each process holds that run one of PROGRAMS (BPF program
    names), from the kernel (bpftool perf list, bpftool prog show). The file is not told apart:
    the agent names it /proc/self/fd/N, an fd it closed once attached; pytorch_* programs attach
    to libc10_cuda.so only, and this test's process is the only one here that maps it."""
    names = {}
    got = {}
    for e in json.loads(sh('bpftool', '-j', 'perf', 'list').stdout):
        if e.get('fd_type') != 'uprobe':
            continue
        if e['prog_id'] not in names:
            shown = sh('bpftool', '-j', 'prog', 'show', 'id', str(e['prog_id']), check=False)
            names[e['prog_id']] = json.loads(shown.stdout).get('name') if shown.returncode == 0 else None
        if names[e['prog_id']] in programs:
            got.setdefault(e['pid'], []).append(e['offset'])
    return {pid: sorted(offsets) for pid, offsets in got.items()}


def wait_semaphores(pid, addresses, want, what, timeout=10):
    """Waits until the semaphores equal WANT, a dict or a function giving it now."""
    deadline = time.time() + timeout
    while True:
        got = semaphores(pid, addresses)
        want_now = want() if callable(want) else want
        if got == want_now:
            print("semaphores %s: %s" % (what, got))
            return
        if time.time() > deadline:
            fail("semaphores %s: %s, expected %s" % (what, got, want_now))
        time.sleep(0.1)


def main():
    require_root()
    agent_bin, fetch = sys.argv[1:3]
    got = subprocess.run([fetch, '--verify-only'], capture_output=True, text=True)
    if got.returncode != 0:
        fail("the real NVIDIA libraries are not in place (the nvidia_libs test fetches them): " + got.stderr.strip())
    libdir = got.stdout.strip()
    lib = os.path.realpath(os.path.join(libdir, 'libc10_cuda.so'))
    sites = [n for n in notes(lib) if n[0] in PROBES]
    segments = loads(lib)
    for probe in PROBES:
        if not any(s[0] == probe for s in sites):
            fail("%s has no %s note: not the PyTorch this test pins" % (lib, probe))
    want_offsets = sorted(file_offset(segments, loc) for _, loc, _ in sites)
    sharing = {}
    for probe, _, sem in sites:
        sharing.setdefault('%s@0x%x' % (probe, sem), 0)
        sharing['%s@0x%x' % (probe, sem)] += 1
    print("%s: %d sites %s, semaphores %s" % (lib, len(sites), [(p, hex(l)) for p, l, _ in sites], sharing))

    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    w = subprocess.Popen([sys.executable, '-c', LOADER, libdir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env)
    try:
        if w.stdout.readline().strip() != 'ready':
            fail("the loader did not load %s" % lib)
        bias = load_bias(w.pid, lib, segments)
        addresses = {'%s@0x%x' % (p, sem): (sem, bias + sem) for p, _, sem in sites}
        def idle():
            """Without our agent: 0, or the sites' count while another process (an agent of the
            machine, which may find the loader at any moment) holds uprobes on them."""
            others = sorted(uprobe_offsets(PROGRAMS))
            if others:
                print("beside other holders of uprobes on the file (pids %s): the semaphores are theirs too" % others)
                return sharing
            return {k: 0 for k in sharing}
        wait_semaphores(w.pid, addresses, idle, "before the agent", timeout=2)
        config = 'probes: {tcp: false, nccl: false, cuda: false}\ngrace_period: 1s\n'

        with Agent(agent_bin, config) as agent:
            wait_attached(agent, 'usdt', lib)
            if not any('usdt: %d probes attached in ' % len(PROBES) in l and l.endswith(lib)
                       for l in agent.log_text().splitlines()):
                fail("the agent did not attach both of %s in %s: %s" % (PROBES, lib, agent.log_text()))
            offsets = uprobe_offsets(PROGRAMS).get(agent.proc.pid, [])
            print("the kernel's uprobes of the agent on the file: %s\nthe file's sites:                           %s"
                  % ([hex(o) for o in offsets], [hex(o) for o in want_offsets]))
            if offsets != want_offsets:
                fail("the agent's uprobes are not the file's sites, each once")
            wait_semaphores(w.pid, addresses, sharing, "while the agent runs")
        wait_semaphores(w.pid, addresses, idle, "after SIGTERM")

        agent = Agent(agent_bin, config)
        try:
            wait_semaphores(w.pid, addresses, sharing, "under a second agent", timeout=15)
            agent.proc.kill()
            agent.proc.wait(timeout=10)
            wait_semaphores(w.pid, addresses, idle, "after SIGKILL")
        finally:
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()
            os.unlink(agent.cfg.name)
            remove_pins(agent.binary, agent.own_pins)
    finally:
        w.stdin.close()
        w.wait(timeout=10)
    print("ok")


if __name__ == '__main__':
    main()
