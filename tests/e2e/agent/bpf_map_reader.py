"""Keeps one CPU inside bpf(2) map reads, as any map reader on the node does (the agent's own
scrapes, bpftool, another team's exporter). While the kernel copies a map for user space it holds
the per-CPU bpf_prog_active count (kernel/bpf/syscall.c, bpf_disable_instrumentation), and a
classic tracepoint or kprobe program whose event fires there (a softirq on that CPU) is skipped:
trace_call_bpf in kernel/trace/bpf_trace.c counts it as a miss and does not run it. tp_btf
programs are guarded per program instead and still run.

Usage: bpf_map_reader.py SECONDS. Creates its own hash map (64k entries) and batch-reads it until
SECONDS have passed; prints the number of batch reads done."""
import ctypes
import os
import platform
import sys
import time

BPF_SYSCALL = {'x86_64': 321, 'aarch64': 280}[platform.machine()]
BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_CREATE, BPF_MAP_LOOKUP_BATCH = 1, 2, 0, 24
BPF_MAP_TYPE_HASH = 1
ENTRIES = 65536

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class MapCreate(ctypes.Structure):
    _fields_ = [('map_type', ctypes.c_uint32), ('key_size', ctypes.c_uint32),
                ('value_size', ctypes.c_uint32), ('max_entries', ctypes.c_uint32),
                ('map_flags', ctypes.c_uint32), ('pad', ctypes.c_uint8 * 124)]


class MapElem(ctypes.Structure):
    _fields_ = [('map_fd', ctypes.c_uint32), ('pad', ctypes.c_uint32), ('key', ctypes.c_uint64),
                ('value', ctypes.c_uint64), ('flags', ctypes.c_uint64)]


class MapBatch(ctypes.Structure):
    _fields_ = [('in_batch', ctypes.c_uint64), ('out_batch', ctypes.c_uint64), ('keys', ctypes.c_uint64),
                ('values', ctypes.c_uint64), ('count', ctypes.c_uint32), ('map_fd', ctypes.c_uint32),
                ('elem_flags', ctypes.c_uint64), ('flags', ctypes.c_uint64)]


def bpf(cmd, attr):
    ret = libc.syscall(BPF_SYSCALL, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if ret < 0:
        raise OSError(ctypes.get_errno(), 'bpf(%d): %s' % (cmd, os.strerror(ctypes.get_errno())))
    return ret


def main():
    seconds = float(sys.argv[1])
    fd = bpf(BPF_MAP_CREATE, MapCreate(BPF_MAP_TYPE_HASH, 4, 8, ENTRIES, 0))
    key, value = ctypes.c_uint32(), ctypes.c_uint64()
    for k in range(ENTRIES):
        key.value = value.value = k
        bpf(BPF_MAP_UPDATE_ELEM, MapElem(fd, 0, ctypes.addressof(key), ctypes.addressof(value), 0))
    keys, values = (ctypes.c_uint32 * ENTRIES)(), (ctypes.c_uint64 * ENTRIES)()
    out_batch = ctypes.c_uint32()
    print('ready', flush=True)
    reads, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        attr = MapBatch(0, ctypes.addressof(out_batch), ctypes.addressof(keys), ctypes.addressof(values),
                        ENTRIES, fd, 0, 0)
        try:
            bpf(BPF_MAP_LOOKUP_BATCH, attr)
        except OSError as e:  # ENOENT: the walk reached the end, with entries copied
            if e.errno != 2:
                raise
        reads += 1
    print(reads, flush=True)


if __name__ == '__main__':
    main()
