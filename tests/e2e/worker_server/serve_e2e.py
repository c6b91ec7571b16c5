#!/usr/bin/env python3
"""vigil-worker serve end to end: the real binary and model over loopback, driven by the tests'
worker client (vigil_harness.worker_client). Covers streaming and not, 32 concurrent requests
equal to the same requests run alone (greedy), every error status the API promises, cancellation by disconnect (KV blocks come
back), config errors, and SIGTERM draining (finish in-flight work, exit 0; cut it after the grace).

usage: serve_e2e.py VIGIL_WORKER MODEL
"""
import concurrent.futures
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from vigil_harness import worker_client
from vigil_harness.worker_client import call, metric, start_serve

BINARY, MODEL = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TMP = tempfile.mkdtemp(prefix="vigil-serve-e2e-")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class Server:
    """A `vigil-worker serve` process on a free port; its stderr is collected in the background."""

    def __init__(self, name, config=None, extra=()):
        args = [BINARY, "serve", "-m", MODEL, "--port", "0", *extra]
        if config is not None:
            path = os.path.join(TMP, name + ".yaml")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        try:
            self.proc, self.port, self.log = start_serve(args)
        except RuntimeError as e:
            raise RuntimeError(f"{name}: {e}") from None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def complete(port, body):
    """Text, finish reason and usage of a completion that must succeed, streamed or not."""
    c = worker_client.complete(port, body)
    assert c.status == 200, (c.status, c.raw)
    return c.text, c.finish_reason, c.usage


def wait_for(what, f, limit=30.0):
    end = time.time() + limit
    while time.time() < end:
        if f():
            return True
        time.sleep(0.02)
    check(False, "timed out waiting for " + what)
    return False


def open_stream(port, body):
    """Starts a streamed completion on a raw socket; returns it after the response head."""
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, "closed before the response head"
        head += chunk
    return s, head


PROMPTS = [
    "The capital of France is", "Once upon a time", "def fibonacci(n):", "The three primary colors are",
    "Water boils at", "In 1969, humans", "The quick brown fox", "A haiku about the sea:",
    "Photosynthesis is the process", "SELECT name FROM", "The largest planet in our solar system",
    "To make a cup of tea,", "Rust and C++ differ in", "The derivative of x^2 is", "My favourite book is",
    "Kubernetes is",
]

MAIN_CONFIG = """
server:
  port: 1
  max_body_bytes: 65536
  drain_grace: 20s
engine:
  threads: 2
  max_context: 512
  kv_blocks: 256
  max_running: 32
  max_waiting: 64
"""


def test_main():
    srv = Server("main", MAIN_CONFIG)
    port = srv.port
    try:
        check(port != 1, "--port overrides server.port from the file")
        check(call(port, "GET", "/health")[0] == 200, "/health is 200")
        check(call(port, "GET", "/ready")[0] == 200, "/ready is 200 once the model is loaded")
        status, _, raw = call(port, "GET", "/v1/models")
        check(status == 200 and json.loads(raw)["data"][0]["id"] == os.path.basename(MODEL),
              "/v1/models lists the model under the file's base name")

        # Streaming and not give the same greedy text and usage.
        base = {"prompt": "The capital of France is", "max_tokens": 20, "temperature": 0, "ignore_eos": True}
        plain = complete(port, base)
        streamed = complete(port, {**base, "stream": True, "stream_options": {"include_usage": True}})
        check(plain == streamed, f"streamed == non-streamed completion ({plain[0]!r})")
        check(plain[1] == "length" and plain[2]["completion_tokens"] == 20 and plain[2]["prompt_tokens"] > 0,
              "finish_reason length and usage counts")
        chat = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 24}
        chat_plain, chat_stream = complete(port, chat), complete(port, {**chat, "stream": True})
        # The fixture holds llama.cpp's greedy answer to this exact chat (default system prompt).
        fixture = json.load(open(os.path.join(ROOT, "tests", "fixtures", "greedy.json")))
        reference = next(base64.b64decode(c["generated_b64"]).decode("utf-8", "replace")
                         for c in fixture["cases"] if c["kind"] == "chat" and "capital of France" in c["text"]
                         and "named SmolLM" in c["text"])
        check(chat_plain[:2] == chat_stream[:2] and chat_plain[0] and reference.startswith(chat_plain[0]),
              f"chat streamed == non-streamed == llama.cpp's greedy answer ({chat_plain[0]!r})")
        # A raw prompt that writes its own ChatML: its special tokens parse as llama.cpp's
        # tokenize(special=True) parses them (the fixture's prompt ids), and the answer is llama.cpp's.
        case = next(c for c in fixture["cases"] if c["kind"] == "chat" and "capital of France" in c["text"]
                    and "named SmolLM" in c["text"])
        chatml = complete(port, {"prompt": case["text"], "max_tokens": 24, "temperature": 0})
        check(chatml[2]["prompt_tokens"] == len(case["prompt_ids"]) and chatml[0] and reference.startswith(chatml[0]),
              f"raw ChatML prompt: {chatml[2]['prompt_tokens']} tokens as llama.cpp's {len(case['prompt_ids'])}, "
              f"its greedy answer ({chatml[0]!r})")
        status, _, raw = call(port, "POST", "/v1/completions", {**base, "prompt": [504, 3458, 282, 4649, 314]})
        check(status == 200 and json.loads(raw)["usage"]["prompt_tokens"] == 5, "token-id prompt")

        # 32 concurrent requests (16 prompts, streamed and not) equal the same requests run alone.
        bodies = [{"prompt": p, "max_tokens": 24, "temperature": 0, "ignore_eos": True} for p in PROMPTS]
        t0 = time.time()
        alone = [complete(port, b) for b in bodies]
        t_alone = time.time() - t0
        jobs = [b for b in bodies] + [{**b, "stream": True} for b in bodies]
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            together = list(pool.map(lambda b: complete(port, b), jobs))
        t_together = time.time() - t0
        same = [i for i in range(32) if together[i][:2] == alone[i % 16][:2]]
        check(len(same) == 32, f"32 concurrent greedy outputs equal the same requests alone ({len(same)}/32)")
        for i in range(32):
            if i not in same:
                print(f"     differs: {jobs[i]['prompt']!r}\n       alone:    {alone[i % 16][0]!r}\n"
                      f"       together: {together[i][0]!r}")
        tokens = 16 * 24
        print(f"     measured: 16 requests one at a time {t_alone:.2f} s ({tokens / t_alone:.0f} tok/s); "
              f"32 at once {t_together:.2f} s ({2 * tokens / t_together:.0f} tok/s)")

        # Errors, in OpenAI's error object.
        def error(method, path, body, status, param=None, code=None, headers=None):
            st, hd, raw = call(port, method, path, body, headers)
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError):
                err = {}
            ok = st == status and "message" in err and "type" in err
            if param is not None:
                ok = ok and err.get("param") == param
            if code is not None:
                ok = ok and err.get("code") == code
            check(ok, f"{method} {path} -> {status} {param or ''} {code or ''} (got {st} {raw[:160]!r})")
            return hd

        error("POST", "/v1/completions", "{not json", 400, "body")
        error("POST", "/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens")
        error("POST", "/v1/chat/completions", {"messages": "hi"}, 400, "messages")
        error("POST", "/v1/completions", {"prompt": "x", "stop": [1]}, 400, "stop[0]")
        error("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 600}, 400, "max_tokens",
              "context_length_exceeded")
        error("POST", "/v1/completions", {"prompt": "x", "model": "no-such-model"}, 404, "model", "model_not_found")
        error("POST", "/v1/completions", "x" * 70000, 413, code="request_too_large")
        error("GET", "/v1/nope", None, 404)
        hd = error("GET", "/v1/chat/completions", None, 405)
        check(hd.get("allow") == "POST", "405 names the allowed method")

        # A client that hangs up mid-stream: its request is cancelled and its KV blocks come back.
        cancelled_before = metric(port, 'vigil_worker_request_success_total{finish_reason="cancelled"}')
        s, head = open_stream(port, {"prompt": "Count to one thousand:", "max_tokens": 480, "ignore_eos": True,
                                     "stream": True})
        check(head.startswith(b"HTTP/1.1 200"), "stream started")
        s.recv(4096)  # at least one chunk
        wait_for("the request to hold KV blocks", lambda: metric(port, "vigil_worker_kv_cache_usage_ratio") > 0)
        s.close()
        wait_for("the cancelled request to leave the engine",
                 lambda: metric(port, 'vigil_worker_request_success_total{finish_reason="cancelled"}')
                 == cancelled_before + 1)
        # The engine publishes its stats after the step that ended the request: wait, bounded.
        check(wait_for("running to drop to 0", lambda: metric(port, "vigil_worker_requests_running") == 0),
              "nothing runs after the disconnect")
        check(wait_for("KV usage to drop to 0", lambda: metric(port, "vigil_worker_kv_cache_usage_ratio") == 0,
                       limit=10), "its KV blocks are free again")
        gen = metric(port, "vigil_worker_generation_tokens_total")
        check(gen is not None and gen > 0, "generation tokens counted")

        # The exposition passes promtool.
        _, _, raw = call(port, "GET", "/metrics")
        p = subprocess.run(["promtool", "check", "metrics"], input=raw, capture_output=True)
        check(p.returncode == 0 and not p.stdout and not p.stderr,
              f"promtool check metrics ({(p.stdout + p.stderr).decode()[:200]})")
    finally:
        rc = srv.stop()
    check(rc == 0, f"main server exits 0 on SIGTERM (rc {rc})")


def test_queue_full():
    srv = Server("queue", "engine:\n  max_running: 1\n  max_waiting: 1\n")
    try:
        long = {"prompt": "Tell me a long story.", "max_tokens": 400, "ignore_eos": True, "stream": True}
        first, _ = open_stream(srv.port, long)
        first.recv(4096)
        # The stream's head can come before the engine admits the request: until it runs, it holds
        # the one waiting place, and the second would be refused.
        wait_for("the first request to run", lambda: metric(srv.port, "vigil_worker_requests_running") == 1
                 and metric(srv.port, "vigil_worker_requests_waiting") == 0)
        second, head = open_stream(srv.port, long)
        check(head.startswith(b"HTTP/1.1 200"), f"second request queued (got {head[:40]!r})")
        status, hd, raw = call(srv.port, "POST", "/v1/completions", {"prompt": "x"})
        check(status == 429 and hd.get("retry-after") == "1" and json.loads(raw)["error"]["code"] == "queue_full",
              f"queue full -> 429 with Retry-After (got {status} {raw[:120]!r})")
        first.close()
        second.close()
        wait_for("both to be cancelled", lambda: metric(srv.port, "vigil_worker_requests_running") == 0
                 and metric(srv.port, "vigil_worker_requests_waiting") == 0)
    finally:
        srv.stop()


def test_drain():
    srv = Server("drain", "server:\n  drain_grace: 30s\n")
    s, _ = open_stream(srv.port, {"prompt": "List the planets:", "max_tokens": 64, "ignore_eos": True,
                                  "stream": True})
    s.recv(4096)
    srv.proc.send_signal(signal.SIGTERM)
    check(wait_for("/ready to turn 503", lambda: call(srv.port, "GET", "/ready")[0] == 503), "/ready is 503 at once")
    status, _, raw = call(srv.port, "POST", "/v1/completions", {"prompt": "x"})
    check(status == 503 and json.loads(raw)["error"]["code"] == "draining", "new requests refused while draining")
    body = b""
    s.settimeout(60)
    while not body.endswith(b"0\r\n\r\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    check(b"data: [DONE]" in body and b'"finish_reason":"length"' in body,
          "the in-flight stream finishes during the drain")
    rc = srv.proc.wait(timeout=60)
    check(rc == 0, f"drained server exits 0 (rc {rc})")

    cut = Server("cut", "server:\n  drain_grace: 1s\n")
    s, _ = open_stream(cut.port, {"prompt": "Write an essay:", "max_tokens": 2000, "ignore_eos": True,
                                  "stream": True})
    s.recv(4096)
    rest = []
    reader = threading.Thread(target=lambda: rest.extend(iter(lambda: s.recv(65536), b"")), daemon=True)
    reader.start()
    t0 = time.time()
    cut.proc.send_signal(signal.SIGTERM)
    rc = cut.proc.wait(timeout=60)
    check(rc == 0 and any("grace period over" in line for line in cut.log),
          f"a request past the grace period is cut, exit 0 after {time.time() - t0:.1f} s (rc {rc})")
    reader.join(timeout=10)
    tail = b"".join(rest)[-2000:]
    check(b'"code":"cancelled"' in tail and b"data: [DONE]" in tail and tail.endswith(b"0\r\n\r\n"),
          f"the cut stream ends with an error event, [DONE] and the last chunk (tail {tail[-160:]!r})")

    impatient = Server("impatient", "server:\n  drain_grace: 60s\n")
    s, _ = open_stream(impatient.port, {"prompt": "Write an essay:", "max_tokens": 2000, "ignore_eos": True,
                                        "stream": True})
    s.recv(4096)
    impatient.proc.send_signal(signal.SIGTERM)
    wait_for("/ready to turn 503", lambda: call(impatient.port, "GET", "/ready")[0] == 503)
    impatient.proc.send_signal(signal.SIGTERM)
    rc = impatient.proc.wait(timeout=30)
    check(rc == 0 and any("again" in line for line in impatient.log), f"a second SIGTERM exits at once (rc {rc})")


def test_bad_config():
    path = os.path.join(TMP, "bad.yaml")
    with open(path, "w") as f:
        f.write("server:\n  port: 8080\nengine:\n  policy: lifo\n")
    p = subprocess.run([BINARY, "serve", "-m", MODEL, "--config", path], capture_output=True, text=True)
    check(p.returncode == 2 and "line 4" in p.stderr and "engine.policy" in p.stderr,
          f"bad config value -> exit 2 naming key and line ({p.stderr.strip()})")
    with open(path, "w") as f:
        f.write("server:\n  prot: 8080\n")
    p = subprocess.run([BINARY, "serve", "-m", MODEL, "--config", path], capture_output=True, text=True)
    check(p.returncode == 2 and "line 2" in p.stderr and "server.prot" in p.stderr,
          f"unknown config key -> exit 2 ({p.stderr.strip()})")
    p = subprocess.run([BINARY, "serve", "-m", MODEL, "--bogus"], capture_output=True, text=True)
    check(p.returncode == 2, "unknown flag -> exit 2")


if __name__ == "__main__":
    t0 = time.time()
    test_bad_config()
    test_main()
    test_queue_full()
    test_drain()
    print(f"{len(failures)} failures, {time.time() - t0:.1f} s")
    sys.exit(1 if failures else 0)
