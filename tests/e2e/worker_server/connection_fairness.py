#!/usr/bin/env python3
"""No client starves the worker of connections (#30 item 4): the real `vigil-worker serve` with its
default cap of 512 connections, 600 idle keep-alive connections held open (each answered once) and
a client sending 1 MiB prompts in a loop, while /health is probed on fresh connections several
times, each answer within 1 s, and a streaming completion runs to [DONE]. The connections closed
to make room must be the oldest idle ones.
Today's binary before the fix closes every connection past the 512th, probes included.

usage: connection_fairness.py VIGIL_WORKER MODEL
"""
import http.client
import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

BINARY, MODEL = sys.argv[1], sys.argv[2]
IDLE = 600
PROBES = 5
REORDER_SLACK = 16  # places a connection may register out of opening order (see the eviction check)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def start():
    proc = subprocess.Popen([BINARY, "serve", "-m", MODEL, "--port", "0"], stderr=subprocess.PIPE, text=True)
    log = []
    for line in proc.stderr:
        log.append(line)
        m = re.search(r"on http://[^ ]+:(\d+) ", line)
        if m:
            threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
            return proc, int(m.group(1)), log
    raise RuntimeError("server did not start: " + "".join(log))


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


def probe(port):
    """/health on a fresh connection: (status or the error, seconds)."""
    t0 = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
        conn.request("GET", "/health")
        status = conn.getresponse().status
        conn.close()
    except (OSError, http.client.HTTPException) as e:
        status = type(e).__name__
    return status, time.monotonic() - t0


def stream(port):
    """A streaming completion on a fresh connection: (text, ended with [DONE]) or the error."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": "The capital of France is", "max_tokens": 8, "stream": True, "temperature": 0}),
            headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read().decode()
        conn.close()
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
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            answers.append(conn.getresponse().status)
            conn.close()
        except (OSError, http.client.HTTPException) as e:
            answers.append(type(e).__name__)


def main():
    proc, port, log = start()
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
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
