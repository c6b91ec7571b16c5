#!/usr/bin/env python3
"""LoRA hot-swap end to end: the real `vigil-worker serve` with --adapter-dir, adapters written by
scripts/make_lora.py. Loads and unloads over HTTP without restart, selects adapters per request
through `model`, batches requests for different adapters together (greedy results equal each
request run alone), lists adapters in /v1/models, counts them in /metrics, and refuses every
malformed request, escaping path and broken file with the promised status while the server
keeps serving.

usage: lora_e2e.py VIGIL_WORKER MODEL MAKE_LORA
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile

from vigil_harness import worker_client
from vigil_harness.worker_client import metric, start_serve

BINARY, MODEL, MAKE_LORA = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = tempfile.mkdtemp(prefix="vigil-lora-e2e-")
ADAPTERS = os.path.join(TMP, "adapters")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def make_lora(name, *args):
    subprocess.run([sys.executable, MAKE_LORA, "--model", MODEL, "--out", os.path.join(ADAPTERS, name), *args],
                   check=True, stdout=subprocess.DEVNULL)


def call(port, method, path, body=None):
    """Status and body text: what every check here reads."""
    status, _, raw = worker_client.call(port, method, path, body)
    return status, raw.decode()


def error_of(raw):
    try:
        return json.loads(raw)["error"]
    except (ValueError, KeyError):
        return {}


def greedy(port, model, prompt):
    status, raw = call(port, "POST", "/v1/completions",
                       {"model": model, "prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True})
    assert status == 200, (status, raw)
    return json.loads(raw)["choices"][0]["text"]


def main():
    os.makedirs(ADAPTERS)
    make_lora("x.gguf", "--rank", "8", "--b-range", "0.5", "--targets", "all")
    make_lora("y.gguf", "--rank", "16", "--type", "f16", "--b-range", "0.5", "--seed", "2")
    make_lora("gpt2.gguf", "--rank", "8", "--arch", "gpt2")
    with open(os.path.join(ADAPTERS, "x.gguf"), "rb") as f:
        whole = f.read()
    with open(os.path.join(ADAPTERS, "truncated.gguf"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    outside = os.path.join(TMP, "outside.gguf")
    with open(outside, "wb") as f:
        f.write(whole)
    os.symlink(outside, os.path.join(ADAPTERS, "escape.gguf"))

    proc, port, _ = start_serve([BINARY, "serve", "-m", MODEL, "--port", "0", "--adapter-dir", ADAPTERS,
                                 "--allow-runtime-adapters"])
    base = os.path.basename(MODEL)
    try:
        run(port, base, outside)
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=60) == 0, "server exits 0 on SIGTERM")


def run(port, base, outside):
    load = lambda body: call(port, "POST", "/v1/load_lora_adapter", body)
    unload = lambda body: call(port, "POST", "/v1/unload_lora_adapter", body)
    models = lambda: [m["id"] for m in json.loads(call(port, "GET", "/v1/models")[1])["data"]]
    prompts = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a"]
    alone_base = [greedy(port, base, p) for p in prompts]

    s, raw = load({"lora_name": "x", "lora_path": "x.gguf"})
    check(s == 200 and raw == "Success: LoRA adapter 'x' added successfully.", f"load x -> 200 ({s} {raw})")
    s, raw = load({"lora_name": "y", "lora_path": os.path.join(ADAPTERS, "y.gguf")})
    check(s == 200, f"load y by absolute path inside the directory -> 200 ({s} {raw})")
    check(models() == [base, "x", "y"], f"/v1/models lists the adapters ({models()})")
    check(metric(port, "vigil_worker_lora_adapters_loaded") == 2, "adapters loaded gauge is 2")

    bad = [
        ({"lora_name": "x", "lora_path": "x.gguf"}, 409, "adapter 'x' is already loaded"),
        ({"lora_name": "z", "lora_path": "../outside.gguf"}, 400, "'..' components are not allowed"),
        ({"lora_name": "z", "lora_path": outside}, 400, "is outside the adapter directory"),
        ({"lora_name": "z", "lora_path": "escape.gguf"}, 400, "is outside the adapter directory"),
        ({"lora_name": "z", "lora_path": "missing.gguf"}, 400, "No such file or directory"),
        ({"lora_name": "z", "lora_path": "gpt2.gguf"}, 400, "adapter is for architecture 'gpt2', the model is 'llama'"),
        ({"lora_name": "z", "lora_path": "truncated.gguf"}, 400, "invalid adapter file"),
        ({"lora_name": "z"}, 400, "lora_path: required"),
        ({"lora_path": "x.gguf"}, 400, "lora_name: required"),
        ({"lora_name": 7, "lora_path": "x.gguf"}, 400, "lora_name: expected a string"),
        ({"lora_name": base, "lora_path": "x.gguf"}, 400, "is the base model's name"),
        ("{not json", 400, "malformed JSON body"),
    ]
    for body, status, message in bad:
        s, raw = load(body)
        check(s == status and message in error_of(raw).get("message", ""),
              f"load {json.dumps(body) if isinstance(body, dict) else body!r} -> {status} '{message}' ({s} {raw})")
    s, raw = unload({"lora_name": "nope"})
    check(s == 404 and error_of(raw).get("message") == "adapter 'nope' is not loaded", f"unload unknown -> 404 ({s})")
    s, _ = call(port, "GET", "/v1/load_lora_adapter")
    check(s == 405, f"GET on the load endpoint -> 405 ({s})")
    check(call(port, "GET", "/health")[0] == 200 and models() == [base, "x", "y"],
          "after every refused load the server is healthy and its adapters unchanged")

    # Each request alone, then all together: batching adapters never changes a greedy result.
    plan = [(m, p) for m in (base, "x", "y") for p in prompts]
    alone = [greedy(port, m, p) for m, p in plan]
    check(alone[:3] == alone_base, "base results unchanged by loading adapters")
    check(alone[3] != alone[0] and alone[6] != alone[0], "adapters change the output")
    with concurrent.futures.ThreadPoolExecutor(len(plan)) as ex:
        together = list(ex.map(lambda mp: greedy(port, *mp), plan))
    check(together == alone, "9 concurrent requests on base, x and y equal each run alone")
    check(metric(port, 'vigil_worker_lora_requests_total{adapter="x"}') == 6, "requests on x counted (6)")

    s, raw = call(port, "POST", "/v1/completions", {"model": "w", "prompt": "hi", "max_tokens": 2})
    check(s == 404 and error_of(raw).get("code") == "model_not_found", f"unknown adapter in model -> 404 ({s})")
    s, raw = unload({"lora_name": "x"})
    check(s == 200 and raw == "Success: LoRA adapter 'x' removed successfully.", f"unload x -> 200 ({s} {raw})")
    s, _ = call(port, "POST", "/v1/completions", {"model": "x", "prompt": "hi", "max_tokens": 2})
    check(s == 404, f"a request on an unloaded adapter -> 404 ({s})")
    check(models() == [base, "y"] and metric(port, "vigil_worker_lora_adapters_loaded") == 1, "x gone from models")
    s, _ = load({"lora_name": "x", "lora_path": "x.gguf"})
    check(s == 200 and greedy(port, "x", prompts[0]) == alone[3], "reloaded x gives the same output")


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failures")
    sys.exit(1 if failures else 0)
