#!/usr/bin/env python3
"""No client starves the worker of connections (#30 item 4): the real `vigil-worker serve` with its
default cap of 512 connections, 600 idle keep-alive connections held open (each answered once) and
a client sending 1 MiB prompts in a loop, while /health is probed on fresh connections several
times, each answer within 1 s, and a streaming completion runs to [DONE]. The connections closed
to make room must be the oldest idle ones.
Today's binary before the fix closes every connection past the 512th, probes included.
That part runs with server.max_connections_per_client: 0, since all 600 come from 127.0.0.1 and the
default per-address limit (128) would otherwise make room first, before the cap is ever reached.

Then the per-address limit (server.max_connections_per_client: 4): 127.0.0.2 holds 4 busy
connections (request heads sent, bodies pending), and its fifth connection gets 429
too_many_connections and is closed, while its /health is answered, and 127.0.0.1 is still served:
/health and a streaming completion to [DONE].

usage: connection_fairness.py VIGIL_WORKER MODEL
"""
import http.client
import json
import re
import select
import signal
import socket
import sys
import tempfile
import threading
import time

from vigil_harness.worker_client import call, start_serve

BINARY, MODEL = sys.argv[1], sys.argv[2]
IDLE = 600
PROBES = 5
REORDER_SLACK = 16  # places a connection may register out of opening order (see the eviction check)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def start(config_text):
    config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    config.write(config_text)
    config.close()
    return start_serve([BINARY, "serve", "-m", MODEL, "--port", "0", "--config", config.name])


def open_idle(port):
    """A keep-alive connection that got one /health answer; None when the server refused it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: vigil\r\n\r\n")
        data = b""
        while b'{"status":"ok"}' not in data:
            chunk = s.recv(4096)
            if not chunk:
                s.close()
                return None
            data += chunk
        return s
    except OSError:
        s.close()
        return None


def closed_by_server(s):
    """True when the server has closed this idle connection (EOF or reset readable now)."""
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(1) == b""
    except OSError:
        return True


def probe(port, source="127.0.0.1"):
    """/health on a fresh connection from `source`: (status or the error, seconds)."""
    t0 = time.monotonic()
    try:
        status = call(port, "GET", "/health", timeout=1.0, source=source)[0]
    except (OSError, http.client.HTTPException) as e:
        status = type(e).__name__
    return status, time.monotonic() - t0


def stream(port):
    """A streaming completion on a fresh connection: (text, ended with [DONE]) or the error."""
    try:
        _, _, raw = call(port, "POST", "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 8,
                                                           "stream": True, "temperature": 0}, timeout=60)
        raw = raw.decode()
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__, False
    events = [b[6:] for b in raw.split("\n\n") if b.startswith("data: ")]
    text = "".join(json.loads(e)["choices"][0]["text"] for e in events if e != "[DONE]" and json.loads(e)["choices"])
    return text, bool(events) and events[-1] == "[DONE]"


def flood(port, stop, answers):
    """1 MiB prompts, one after another, until told to stop: each is read, parsed and tokenized."""
    body = json.dumps({"prompt": "hello world " * 87000, "max_tokens": 1})
    while not stop.is_set():
        try:
            answers.append(call(port, "POST", "/v1/completions", body, timeout=60)[0])
        except (OSError, http.client.HTTPException) as e:
            answers.append(type(e).__name__)


def busy(port, source):
    """A connection from `source` whose request head is sent and whose body never comes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: vigil\r\nContent-Length: 100\r\n\r\n{")
    return s


def raw_reply(s):
    """One response read from `s`: (status, JSON body or None, whether the server then closed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            return 0, None, True
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int((re.search(rb"(?i)\r\ncontent-length: *(\d+)", head) or [0, b"0"])[1])
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            break
        body += chunk
    s.settimeout(2)
    try:
        closed = s.recv(1) == b""
    except OSError:
        closed = False
    try:
        return int(head.split()[1]), json.loads(body), closed
    except ValueError:
        return int(head.split()[1]), None, closed


def per_client_limit():
    proc, port, log = start("server:\n  max_connections_per_client: 4\n")
    try:
        held = [busy(port, "127.0.0.2") for _ in range(4)]
        time.sleep(0.3)  # the heads are read: the four are busy, none is idle to make room
        fifth = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
        fifth.sendall(b"GET /v1/models HTTP/1.1\r\nHost: vigil\r\n\r\n")
        status, body, closed = raw_reply(fifth)
        error = (body or {}).get("error") or {}
        check(status == 429 and error.get("code") == "too_many_connections"
              and "server.max_connections_per_client" in error.get("message", ""),
              f"127.0.0.2's fifth connection: {status} {error.get('code')} ({error.get('message')})")
        check(closed, "and then closed by the server")
        status, _ = probe(port, "127.0.0.2")
        check(status == 200, f"127.0.0.2 at its limit still gets /health answered ({status})")
        status, seconds = probe(port, "127.0.0.1")
        check(status == 200 and seconds < 1.0, f"127.0.0.1: /health {status} in {seconds * 1e3:.1f} ms")
        text, done = stream(port)
        check(done, f"127.0.0.1: a streaming completion ran to [DONE] beside 127.0.0.2's limit (text {text!r})")
        for s in held:
            s.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    check(rc == 0, f"drained and exited 0 (rc {rc})")
    if failures:
        print("worker log:\n" + "".join(log[-20:]))


def main():
    # Every connection below comes from 127.0.0.1: the per-address limit is off so the cap is reached.
    proc, port, log = start("server:\n  max_connections_per_client: 0\n")
    try:
        held = [open_idle(port) for _ in range(IDLE)]
        answered = [s for s in held if s is not None]
        print(f"     {len(answered)} of {IDLE} idle keep-alive connections answered and held", flush=True)
        check(len(answered) == IDLE, f"all {IDLE} keep-alive connections answered (the cap evicts, never refuses)")

        stop, answers = threading.Event(), []
        flooder = threading.Thread(target=flood, args=(port, stop, answers), daemon=True)
        flooder.start()
        while not answers and flooder.is_alive():
            time.sleep(0.05)
        times = []
        for i in range(PROBES):
            status, seconds = probe(port)
            times.append(seconds)
            check(status == 200 and seconds < 1.0, f"probe {i + 1}: /health {status} in {seconds * 1e3:.1f} ms")
            time.sleep(0.2)
        text, done = stream(port)
        check(done, f"streaming completion beside {IDLE} idle connections ran to [DONE] (text {text!r})")
        stop.set()
        flooder.join(timeout=60)
        check(len(answers) >= 2 and set(answers) == {400},
              f"the 1 MiB prompts were each answered 400 (context length): {len(answers)} answers {set(answers)}")

        time.sleep(0.2)  # evictions are asynchronous to the newcomer's answer
        evicted = [i for i, s in enumerate(held) if s is not None and closed_by_server(s)]
        print(f"     evicted connections (by opening order): {evicted[:1]}..{evicted[-1:]}", flush=True)
        # A connection counts as idle when the server's write completes, which may follow the
        # client's read of the answer: two connections opened back to back can register in either
        # order. So "the oldest" is checked to within a few places, not exactly.
        check(len(evicted) >= IDLE - 512 and max(evicted, default=0) < len(evicted) + REORDER_SLACK,
              f"the {len(evicted)} connections closed to make room are the oldest idle ones "
              f"(to within {REORDER_SLACK} places of opening order)")
        for s in held:
            if s is not None:
                s.close()
        check(probe(port)[0] == 200, "the server still answers after the idle clients leave")
        print(f"     /health probe times: max {max(times) * 1e3:.1f} ms", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    check(rc == 0, f"drained and exited 0 (rc {rc})")
    if failures:
        print("worker log:\n" + "".join(log[-20:]))
    per_client_limit()
    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
