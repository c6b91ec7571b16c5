#!/usr/bin/env python3
"""NCCL process of the alerting test's TCP phase: ncclGetUniqueId through the real libnccl.so.2
(so the agent tracks it as an NCCL process), then a thread streams 64 KiB every 10 ms to
ADDR:PORT. A line "abort" on stdin calls ncclCommAbort (as a watchdog does when a collective
times out; NULL: no communicator to tear down, the call itself is what the agent counts). Exits
at end of input, or after 120 s whatever happens. Prints "ready pid=N".
usage: nccl_tcp_fault.py LIBNCCL ADDR PORT"""
import ctypes
import os
import signal
import socket
import sys
import threading
import time


def stream(sock):
    chunk = b'\0' * 65536
    while True:
        sock.sendall(chunk)
        time.sleep(0.01)


def main():
    signal.alarm(120)
    nccl = ctypes.CDLL(sys.argv[1])
    unique_id = ctypes.create_string_buffer(128)  # ncclUniqueId
    if nccl.ncclGetUniqueId(unique_id) != 0:
        sys.exit("ncclGetUniqueId failed")
    sock = socket.create_connection((sys.argv[2], int(sys.argv[3])))
    threading.Thread(target=stream, args=(sock,), daemon=True).start()
    print("ready pid=%d" % os.getpid(), flush=True)
    for line in sys.stdin:
        if line.strip() == 'abort':
            nccl.ncclCommAbort(ctypes.c_void_p(0))
            print("aborted", flush=True)


if __name__ == '__main__':
    main()
