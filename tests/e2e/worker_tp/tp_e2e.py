#!/usr/bin/env python3
"""vigil-worker serve --tp 2 end to end: two rank processes joined over Gloo on loopback must give
the same greedy text, token for token, as one process, alone and with concurrent requests batched
together; rank 0's collective counter must equal forward passes x (7 matrices x 30 layers + the
output head); a stopped peer must end in a reported timeout and exit 3 on both sides, never a hang.

usage: tp_e2e.py VIGIL_WORKER MODEL
"""
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from vigil_harness import worker_client
from vigil_harness.worker_client import metric

BINARY, MODEL = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="vigil-tp-e2e-")
TIMEOUT_S = 4
CONFIG = os.path.join(TMP, "worker.yaml")
with open(CONFIG, "w") as f:
    f.write("engine:\n  threads: 1\n")  # three servers share the machine's cores
failures = []
procs = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class Proc:
    """A vigil-worker serve process; stderr collected in the background."""

    def __init__(self, name, extra, wait_port=True):
        self.name = name
        self.proc = subprocess.Popen([BINARY, "serve", "-m", MODEL, "--port", "0", "--config", CONFIG, *extra],
                                     stderr=subprocess.PIPE, text=True)
        procs.append(self)
        self.log, self.port = [], None
        threading.Thread(target=self._read, daemon=True).start()
        if wait_port:
            end = time.time() + 60
            while self.port is None and time.time() < end and self.proc.poll() is None:
                time.sleep(0.05)
            if self.port is None:
                raise RuntimeError(f"{name} did not start: {''.join(self.log)}")

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"on http://[^ ]+:(\d+) ", line)
            if m:
                self.port = int(m.group(1))

    def text(self):
        return "".join(self.log)


def group(store):
    os.makedirs(store)
    tp = ["--tp", "2", "--tp-store", store, "--tp-host", "127.0.0.1", "--tp-timeout", f"{TIMEOUT_S}s"]
    r1 = Proc("rank1", tp + ["--rank", "1"], wait_port=False)
    r0 = Proc("rank0", tp + ["--rank", "0"])
    return r0, r1


def complete(port, body):
    """(200, text, usage), or (status, the error body, None)."""
    c = worker_client.complete(port, body, timeout=240)
    return c.status, c.text if c.status == 200 else c.raw.decode(errors="replace"), c.usage


def exit_code(p, limit):
    try:
        return p.proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        return None


BODIES = [
    {"prompt": "The capital of France is", "max_tokens": 40, "temperature": 0},
    {"prompt": "def fibonacci(n):", "max_tokens": 40, "temperature": 0, "ignore_eos": True},
    {"prompt": "Once upon a time, in a small village,", "max_tokens": 40, "temperature": 0},
    {"messages": [{"role": "user", "content": "Name three colors."}], "max_tokens": 32, "temperature": 0},
]
GATHERS = 'vigil_worker_collective_calls_total{op="all_gather",status="ok"}'
TIMEOUTS = 'vigil_worker_collective_calls_total{op="all_gather",status="timeout"}'
PER_PASS = 7 * 30 + 1  # SmolLM2-135M: 30 layers of q, k, v, o, gate, up, down; then the output head


def main():
    single = Proc("single", [])
    want = [complete(single.port, b) for b in BODIES]
    single.proc.send_signal(signal.SIGTERM)
    check(exit_code(single, 60) == 0, "the single-rank server exits 0")
    for (status, text, usage), b in zip(want, BODIES):
        check(status == 200 and usage["completion_tokens"] > 0, f"single rank answers {str(b)[:40]}")

    r0, r1 = group(os.path.join(TMP, "store-a"))
    for (status, text, usage), b in zip(want, BODIES):
        before = metric(r0.port, GATHERS)
        got = complete(r0.port, b)
        after = metric(r0.port, GATHERS)
        check(got[0] == 200 and got[1] == text and got[2] == usage,
              f"2 ranks give the single rank's text and usage for {str(b)[:40]}: {got[1]!r} vs {text!r}")
        # One request alone: its prompt in one pass (<= max_batched_tokens), then one pass per
        # further token; every pass gathers each matrix product once.
        passes = usage["completion_tokens"]
        check(after - before == passes * PER_PASS,
              f"all_gather count {after - before:.0f} = {passes} passes x {PER_PASS}")
    with concurrent.futures.ThreadPoolExecutor(len(BODIES)) as pool:
        together = list(pool.map(lambda b: complete(r0.port, b), BODIES))
    check(together == want, "4 concurrent requests batched across 2 ranks equal each one alone (greedy)")
    check(metric(r0.port, TIMEOUTS) == 0, "no collective timed out")
    check(metric(r0.port, "vigil_worker_collective_timeout_seconds") == TIMEOUT_S, "the configured timeout is exported")

    # A follower that stops answering: rank 0's next collective times out, the request fails with
    # an error, and rank 0 exits 3 (its orchestrator restarts the group).
    os.kill(r1.proc.pid, signal.SIGSTOP)
    start = time.time()
    status, body, _ = complete(r0.port, BODIES[0])
    code = exit_code(r0, TIMEOUT_S + 20)
    took = time.time() - start
    check(code == 3, f"rank 0 exits 3 after a collective timeout (exit {code}, {took:.1f} s)")
    check(TIMEOUT_S - 0.5 <= took <= TIMEOUT_S + 10, f"it took the timeout, not more: {took:.1f} s")
    check(re.search(r"rank 0: tensor-parallel collective failed: gloo \w+ .*timeout", r0.text()) is not None,
          "rank 0 logs the timed-out collective")
    check(status != 200, f"the request in the failed step gets an error, not a hang (status {status})")
    os.kill(r1.proc.pid, signal.SIGKILL)
    exit_code(r1, 10)

    # A leader that stops while idle: the follower misses the heartbeat and exits 3 itself.
    r0, r1 = group(os.path.join(TMP, "store-b"))
    complete(r0.port, {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    os.kill(r0.proc.pid, signal.SIGSTOP)
    start = time.time()
    code = exit_code(r1, TIMEOUT_S + 20)
    took = time.time() - start
    check(code == 3, f"rank 1 exits 3 when rank 0 goes silent (exit {code}, {took:.1f} s)")
    check(took <= TIMEOUT_S + 10, f"within the timeout and a heartbeat: {took:.1f} s")
    check("rank 1: tensor-parallel collective failed" in r1.text(), "rank 1 logs the failed collective")
    os.kill(r0.proc.pid, signal.SIGKILL)

    # A clean stop: SIGTERM on rank 0 drains and tells the follower, both exit 0.
    r0, r1 = group(os.path.join(TMP, "store-c"))
    r0.proc.send_signal(signal.SIGTERM)
    check(exit_code(r0, 60) == 0 and exit_code(r1, 30) == 0, "SIGTERM on rank 0 stops both ranks with 0")


try:
    main()
finally:
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
    shutil.rmtree(TMP, ignore_errors=True)
if failures:
    print(f"{len(failures)} check(s) failed", flush=True)
    sys.exit(1)
print("all checks passed")
