"""Loopback ports for the servers a test starts."""
import random
import socket


def free_port():
    """A port the kernel hands out now (from the ephemeral range), for a server started at once."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def listen_port():
    """A free loopback port below the kernel's ephemeral range, so no client connection is handed it
    between this check and the server's bind (a random port inside the range can be)."""
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
        low = int(f.read().split()[0])
    while True:
        port = random.randint(10000, low - 1)
        with socket.socket() as s:
            try:
                s.bind(('127.0.0.1', port))
                return port
            except OSError:
                continue
