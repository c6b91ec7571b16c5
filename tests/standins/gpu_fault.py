#!/usr/bin/env python3
"""GPU fault for the alerting test: calls the CUDA driver API of LIBCUDA (the stand-in
libcuda.so.1, or a real one) through ctypes. Every 0.25 s: four 1 KiB allocations (freed again)
and, while the fault is on, one cuGraphLaunch made to fail with CUDA_ERROR_LAUNCH_FAILED through
the stand-in's VIGIL_FAKE_CUDA_FAIL. Once at start, so the dashboards' failure panels have data:
one out-of-memory allocation and one allocation inside a stream capture. A line "off" on stdin stops the failures (allocations go
on); end of input exits. Prints "ready pid=N"; the agent does the counting.
usage: gpu_fault.py LIBCUDA"""
import ctypes
import os
import select
import sys

CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_LAUNCH_FAILED = 719


def main():
    cuda = ctypes.CDLL(sys.argv[1])
    if cuda.cuInit(0) != 0:
        sys.exit("cuInit failed")
    ptr = ctypes.c_uint64()
    os.environ['VIGIL_FAKE_CUDA_FAIL'] = 'cuMemAlloc_v2=%d' % CUDA_ERROR_OUT_OF_MEMORY
    if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 34)) != CUDA_ERROR_OUT_OF_MEMORY:
        sys.exit("the injected allocation failure did not happen")
    stream, graph = ctypes.c_void_p(0x5157), ctypes.c_void_p()
    cuda.cuStreamBeginCapture_v2(stream, 0)
    cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(4096))
    cuda.cuStreamEndCapture(stream, ctypes.byref(graph))
    os.environ['VIGIL_FAKE_CUDA_FAIL'] = 'cuGraphLaunch=%d' % CUDA_ERROR_LAUNCH_FAILED
    print("ready pid=%d" % os.getpid(), flush=True)
    failing = True
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.25)
        if ready:
            line = sys.stdin.readline()
            if not line:
                return
            if line.strip() == 'off':
                failing = False
                del os.environ['VIGIL_FAKE_CUDA_FAIL']
        for _ in range(4):
            if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1024)) == 0:
                cuda.cuMemFree_v2(ptr)
        if failing:
            rc = cuda.cuGraphLaunch(ctypes.c_void_p(0), ctypes.c_void_p(0))
            if rc != CUDA_ERROR_LAUNCH_FAILED:
                sys.exit("cuGraphLaunch returned %d, not the injected failure" % rc)


if __name__ == '__main__':
    main()
