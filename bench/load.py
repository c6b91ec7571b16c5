#!/usr/bin/env python3
"""Load benchmark for vigil-worker serve (and any OpenAI-compatible server): a client we wrote.

Open loop: Poisson arrivals at a given rate, prompt and output lengths drawn from a mixed
distribution (mostly short, some long), streamed over SSE; reports generation throughput and
P50/P99 of time to first token and inter-token latency, per scheduling policy, side by side.
Closed loop: N concurrent streams back to back for a while; aggregate generation tokens/s.
Every request is accounted for, from what the server itself sends: lost (no final chunk, or, with
ignore_eos, fewer tokens than asked for by the server's own usage count; from vigil-worker also a
stream without a usage chunk or without response ids) and duplicated (a response
id the server gave two requests, a chunk of another stream's id inside a stream, or more chunks
than the tokens the server says it generated) are counted and fail the run.

usage:
  bench/run.sh bench/load.py sweep   [--rates 2,4,8] [--requests 60] [--policies fcfs,priority,token_budget,token_budget@0]
  bench/run.sh bench/load.py streams [--streams 1,16] [--seconds 20] [--llama-cpp]
                                     [--backend cuda [--graphs off]] [--metrics-dir DIR]
  bench/run.sh bench/load.py soak    [--seconds 600] [--overload 1.5]
  bench/run.sh bench/load.py latency [--target auto] [--loads 0.5,0.8,0.95,1.2] [--requests 200]
                                     [--policy-loads 0.8,0.95] [--policies fcfs,token_budget] [--json F] [--plot F.png]
                                     [--peer llama-server [--spot-check 20]] [--capacity R] [--seed N]
  bench/run.sh bench/load.py lowload [--target auto] [--tokens 1000] [--every S] [--prompt-words 512] [--json F]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

from vigil_harness.ports import free_port
from vigil_harness.worker_client import call, open_stream, stream_data, wait_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("VIGIL_BENCH_MODEL", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
WORKER = os.environ.get("VIGIL_WORKER", os.path.join(ROOT, "build", "release", "worker", "vigil-worker"))
# Built by scripts/setup_reference.sh from the llama.cpp sources of the pinned llama-cpp-python.
LLAMA_SERVER = os.environ.get("VIGIL_LLAMA_SERVER", os.path.join(ROOT, ".venv-ref", "bin", "llama-server"))
WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government "
         "number night point home water room mother area money story fact month lot right study book eye "
         "job word business issue side kind head house service friend father power hour game line end").split()


class Server:
    """vigil-worker serve with one policy, llama.cpp's llama-server or llama-cpp-python's server, on a
    free loopback port."""

    def __init__(self, kind, policy="fcfs", threads=2, max_running=16, max_waiting=100000, backend="cpu",
                 graphs=True, aging=None, target=None):
        self.port = free_port()
        self.model_name = os.path.basename(MODEL)
        if kind == "vigil":
            cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
            cfg.write(f"engine:\n  threads: {threads}\n  policy: {policy}\n  max_running: {max_running}\n"
                      f"  kv_blocks: 1024\n  max_waiting: {max_waiting}\n")
            if aging is not None:  # otherwise the worker's default
                cfg.write(f"  token_budget_aging: {aging}\n")
            if target:  # engine.step_latency_target, e.g. "off", "100ms"; None: the worker's default
                cfg.write(f"  step_latency_target: {target}\n")
            cfg.write(f"backend:\n  kind: {backend}\n")
            if backend == "cuda":
                cfg.write(f"  cuda:\n    graphs: {'true' if graphs else 'false'}\n")
            # Every simulated client comes from 127.0.0.1, as behind a proxy: no per-address share.
            cfg.write("server:\n  max_requests_per_client: 0\n")
            cfg.close()
            cmd = [WORKER, "serve", "-m", MODEL, "--port", str(self.port), "--config", cfg.name,
                   "--allow-client-priority"]  # every request carries `priority`
            ready = "/ready"
        elif kind == "llama-server":
            # llama.cpp's own server: MAX_RUNNING slots with continuous batching and a context as large
            # as vigil's KV cache (kv_blocks 1024 x 16 tokens), split between the slots (1,024 tokens
            # each, the longest request here is 672): a unified cache would make every token attend
            # over the cells of all the slots (masked), 16 times the work at 16 busy slots.
            # Flash attention off: on this model and CPU llama.cpp is faster without it, and it is
            # the arithmetic vigil reproduces (docs/performance.md), so greedy answers can be compared.
            cmd = [LLAMA_SERVER, "-m", MODEL, "--port", str(self.port), "-t", str(threads), "-tb", str(threads),
                   "-np", str(max_running), "-cb", "-c", "16384", "-fa", "off",
                   "--alias", self.model_name]
            ready = "/health"
        else:  # "llama.cpp": llama-cpp-python's server, one request at a time
            py = os.path.join(ROOT, ".venv-ref", "bin", "python")
            cmd = [py, "-m", "llama_cpp.server", "--model", MODEL, "--port", str(self.port), "--n_threads",
                   str(threads), "--n_ctx", "4096", "--model_alias", self.model_name]
            ready = "/v1/models"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        try:
            wait_ready(self.port, ready, proc=self.proc)
        except RuntimeError:
            self.proc.kill()
            self.log.seek(0)
            sys.stderr.write(self.log.read().decode(errors="replace")[-2000:])
            raise

    def metrics(self):
        return call(self.port, "GET", "/metrics", timeout=10)[2].decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def one_request(port, model, req_id, prompt_len, max_tokens, priority, rng_seed, results, lock):
    rng = random.Random(rng_seed)
    # Text both servers accept (llama.cpp's refuses token-id prompts); ~1 token per word here.
    prompt = " ".join(rng.choice(WORDS) for _ in range(prompt_len))
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0,
            "ignore_eos": True, "priority": priority, "stream_options": {"include_usage": True}}
    rec = {"id": req_id, "prompt_len": prompt_len, "rng_seed": rng_seed, "sent": time.perf_counter(), "tokens": [],
           "text": "", "done": False, "status": None,
           "response_ids": [], "usage_tokens": None}
    try:
        c, r = open_stream(port, body, timeout=600)
        rec["status"] = r.status
        if r.status == 200:
            for data in stream_data(r):
                if data == b"[DONE]":
                    rec["done"] = True
                    break
                chunk = json.loads(data)
                if chunk.get("id") is not None:
                    rec["response_ids"].append(chunk["id"])
                if chunk.get("usage"):
                    rec["usage_tokens"] = chunk["usage"].get("completion_tokens")
                if chunk.get("choices") and chunk["choices"][0].get("text"):
                    rec["tokens"].append(time.perf_counter())
                    rec["text"] += chunk["choices"][0]["text"]
        c.close()
    except TimeoutError as e:
        rec["error"] = "client timeout: " + str(e)
    except OSError as e:
        rec["error"] = str(e)
    rec["end"] = time.perf_counter()
    rec["max_tokens"] = max_tokens
    with lock:
        results.append(rec)


def draw_lengths(rng):
    prompt = rng.randint(16, 64) if rng.random() < 0.7 else rng.randint(256, 512)
    out = rng.randint(16, 32) if rng.random() < 0.7 else rng.randint(96, 160)
    return prompt, out


def open_loop(port, model, rate, n, seed):
    rng = random.Random(seed)
    results, lock, threads = [], threading.Lock(), []
    t0 = time.perf_counter()
    at = 0.0
    for i in range(n):
        at += rng.expovariate(rate)
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p, o = draw_lengths(rng)
        th = threading.Thread(target=one_request,
                              args=(port, model, i, p, o, rng.randrange(0, 4), seed * 1000 + i, results, lock))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    return results, time.perf_counter() - t0


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def duplicated(results):
    """Requests whose answer repeats or mixes streams, by the server's own ids and counts: a response
    id the server gave another request too, a chunk with another id inside the stream, or more text
    chunks than the completion tokens its usage chunk reports (each chunk carries at least one)."""
    owners = {}
    for r in results:
        for rid in set(r["response_ids"]):
            owners.setdefault(rid, set()).add(r["id"])
    dup = []
    for r in results:
        ids = set(r["response_ids"])
        if (len(ids) > 1 or any(len(owners[i]) > 1 for i in ids)
                or (r["usage_tokens"] is not None and len(r["tokens"]) > r["usage_tokens"])):
            dup.append(r)
    return dup


def is_lost(r, own=True):
    """Not finished: an error, a stream without [DONE] or tokens, or (ignore_eos) fewer tokens than
    asked for, by the server's usage count. Our server (OWN) always sends the usage chunk asked for
    and an id in every chunk: a stream without either cannot be checked, so it is lost too (the
    duplicate and cut-stream checks above would otherwise pass on nothing)."""
    if r["status"] != 200 or not r["done"] or not r["tokens"]:
        return True
    if own and (r["usage_tokens"] is None or not r["response_ids"]):
        return True
    return r["usage_tokens"] is not None and r["usage_tokens"] < r["max_tokens"]


def summarize(results, wall, own=True):
    """OWN: the results are vigil-worker's (held to its usage chunk and response ids)."""
    dup = len(duplicated(results))
    # Answered 429 (queue full, with Retry-After) is an explicit refusal, and a client that gave up
    # waiting is the client's; lost is everything else that did not finish: errors, cut streams.
    rejected = [r for r in results if r["status"] == 429]
    gave_up = [r for r in results if str(r.get("error", "")).startswith("client timeout")]
    lost = [r for r in results if r not in rejected and r not in gave_up and is_lost(r, own)]
    ttft = [r["tokens"][0] - r["sent"] for r in results if r["tokens"]]
    itl = [b - a for r in results for a, b in zip(r["tokens"], r["tokens"][1:])]
    # End to end: from sending to the end of a finished stream; unfinished ones have no latency.
    e2e = [r["end"] - r["sent"] for r in results if r["done"]]
    # Streamed chunks carry one token each (rarely more: UTF-8 held back), so they count the work
    # done even when a server stops early at an end-of-text token.
    gen = sum(len(r["tokens"]) for r in results)
    return {"requests": len(results), "lost": len(lost), "rejected": len(rejected), "gave_up": len(gave_up),
            "duplicated": dup, "gen_tps": gen / wall,
            "ttft_p50": pct(ttft, 0.5), "ttft_p99": pct(ttft, 0.99), "itl_p50": pct(itl, 0.5),
            "itl_p99": pct(itl, 0.99), "itl_max": max(itl, default=float("nan")),
            "ttft_max": max(ttft, default=float("nan")), "e2e_p50": pct(e2e, 0.5), "e2e_p99": pct(e2e, 0.99)}


def cmd_sweep(a):
    rates = [float(x) for x in a.rates.split(",")]
    print(f"{'policy':<14}{'rate/s':>8}{'gen tok/s':>11}{'TTFT p50':>10}{'TTFT p99':>10}"
          f"{'ITL p50':>9}{'ITL p99':>9}{'lost':>6}{'dup':>5}")
    bad = 0
    for rate in rates:
        for policy in a.policies.split(","):
            # "token_budget@50": the token_budget policy with 50 tokens/s of aging ("@0": none);
            # plain "token_budget" runs with the worker's default aging.
            name, _, aging = policy.partition("@")
            srv = Server("vigil", policy=name, threads=a.threads, aging=float(aging) if aging else None)
            try:
                res, wall = open_loop(srv.port, srv.model_name, rate, a.requests, seed=int(rate * 100))
            finally:
                srv.stop()
            s = summarize(res, wall)
            bad += s["lost"] + s["duplicated"]
            print(f"{policy:<14}{rate:>8.1f}{s['gen_tps']:>11.1f}{s['ttft_p50']*1e3:>9.0f}ms{s['ttft_p99']*1e3:>8.0f}ms"
                  f"{s['itl_p50']*1e3:>7.1f}ms{s['itl_p99']*1e3:>7.1f}ms{s['lost']:>6}{s['duplicated']:>5}", flush=True)
    return 1 if bad else 0


def closed_loop(port, model, streams, seconds, mixed=False):
    """`streams` clients back to back: 32-token prompts and 64 tokens out, or (mixed) the open
    loop's length distribution."""
    stop_at = time.perf_counter() + seconds
    results, lock = [], threading.Lock()

    def client(k):
        i = 0
        rng = random.Random(k)
        while time.perf_counter() < stop_at:
            p, o = draw_lengths(rng) if mixed else (32, 64)
            one_request(port, model, k * 100000 + i, p, o, 0, k * 7919 + i, results, lock)
            i += 1

    ths = [threading.Thread(target=client, args=(k,)) for k in range(streams)]
    t0 = time.perf_counter()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return results, time.perf_counter() - t0


def cmd_streams(a):
    kinds = ["vigil"] + (["llama.cpp"] if a.llama_cpp else [])
    print(f"{'server':<12}{'streams':>8}{'gen tok/s':>11}{'TTFT p50':>10}{'ITL p50':>9}{'lost':>6}")
    table, bad = {}, 0
    for kind in kinds:
        for n in [int(x) for x in a.streams.split(",")]:
            srv = Server(kind, threads=a.threads, backend=a.backend, graphs=a.graphs == "on")
            try:
                res, wall = closed_loop(srv.port, srv.model_name, n, a.seconds)
                if a.metrics_dir and kind == "vigil":
                    with open(os.path.join(a.metrics_dir, f"{kind}-{a.backend}-{n}streams.prom"), "w") as f:
                        f.write(srv.metrics())
            finally:
                srv.stop()
            s = summarize(res, wall, own=kind == "vigil")
            if kind == "vigil":
                bad += s["lost"] + s["duplicated"]
            table[(kind, n)] = s["gen_tps"]
            print(f"{kind:<12}{n:>8}{s['gen_tps']:>11.1f}{s['ttft_p50']*1e3:>9.0f}ms{s['itl_p50']*1e3:>7.1f}ms"
                  f"{s['lost']:>6}", flush=True)
    ns = [int(x) for x in a.streams.split(",")]
    for kind in kinds:
        print(f"{kind}: {ns[-1]} streams / {ns[0]} stream = {table[(kind, ns[-1])] / table[(kind, ns[0])]:.2f}x")
    return 1 if bad else 0


def cmd_soak(a):
    """Finds the saturation rate with a short probe, then runs at overload × that rate."""
    # The shipped queue bound (engine.max_waiting 256): past it the server answers 429 at once
    # instead of queueing without end.
    srv = Server("vigil", policy=a.policy, threads=a.threads, max_waiting=256)
    try:
        res, wall = closed_loop(srv.port, srv.model_name, 16, min(10, a.seconds))
        # Requests per second the server completes when always busy (closed loop of 16).
        capacity = len(res) / wall
        rate = a.overload * capacity
        n = max(10, int(rate * a.seconds))
        res, wall = open_loop(srv.port, srv.model_name, rate, n, seed=7)
    finally:
        srv.stop()
    s = summarize(res, wall)
    print(f"soak: capacity {capacity:.2f} req/s, offered {rate:.2f} req/s for {wall:.0f}s: {s['requests']} requests, "
          f"lost {s['lost']}, refused with 429 {s['rejected']}, client gave up {s['gave_up']}, "
          f"duplicated {s['duplicated']}, TTFT p99 {s['ttft_p99']:.2f}s")
    return 1 if s["lost"] or s["duplicated"] or s["requests"] != n else 0


def latency_row(label, load, rate, target, s):
    t = target or "off"
    print(f"{label:<14}{load:>6.2f}{rate:>7.2f}{t:>8}{s['gen_tps']:>10.1f}{s['ttft_p50']*1e3:>9.0f}{s['ttft_p99']*1e3:>9.0f}"
          f"{s['itl_p50']*1e3:>8.1f}{s['itl_p99']*1e3:>8.1f}{s['itl_max']*1e3:>8.0f}"
          f"{s['itl_p99']/s['itl_p50']:>7.2f}{s['ttft_max']*1e3:>9.0f}{s['e2e_p50']*1e3:>9.0f}{s['e2e_p99']*1e3:>9.0f}"
          f"{s['lost']:>5}{s['duplicated']:>4}", flush=True)
    return dict(s, policy=label, load=load, rate=rate, target=t)


def stream_beside_prompts(srv, tokens, every, prompt_words, seed):
    """One stream generating TOKENS while, every EVERY seconds (0: never), a PROMPT_WORDS-word prompt
    arrives for 16 tokens; the stream's record and the prompts' records."""
    results, lock = [], threading.Lock()
    stream = threading.Thread(target=one_request, args=(srv.port, srv.model_name, 0, 16, tokens, 0, seed, results, lock))
    stream.start()
    prompts, i = [], 1
    while every > 0 and stream.is_alive():
        time.sleep(every)
        th = threading.Thread(target=one_request,
                              args=(srv.port, srv.model_name, i, prompt_words, 16, 0, seed + i, results, lock))
        th.start()
        prompts.append(th)
        i += 1
    stream.join()
    for th in prompts:
        th.join()
    return [r for r in results if r["id"] == 0][0], [r for r in results if r["id"] != 0]


def cmd_lowload(a):
    """Low load: one stream decoding while long prompts arrive, at a rate the machine prefills in a
    fraction of the time (by default a prompt every two of its prefill times alone, measured first
    with target off: the same arrivals for both runs). The stream's gaps against its own decode
    step (the same stream alone, P50), target off and on."""
    every = a.every
    if not every:
        srv = Server("vigil", threads=a.threads, target="off")
        try:
            records, lock = [], threading.Lock()
            for i in range(3):
                one_request(srv.port, srv.model_name, 100 + i, a.prompt_words, 1, 0, 100 + i, records, lock)
        finally:
            srv.stop()
        alone = pct([r["tokens"][0] - r["sent"] for r in records if r["tokens"]], 0.5)
        every = 2 * alone
        print(f"a {a.prompt_words}-word prompt alone: first token in {alone * 1e3:.0f} ms (P50 of 3)", flush=True)
    print(f"one stream of {a.tokens} tokens; a {a.prompt_words}-word prompt every {every:.2f} s beside it", flush=True)
    print(f"{'target':>8}{'step alone':>11}{'ITL p50':>8}{'ITL p99':>8}{'ITL max':>8}{'p99/step':>9}"
          f"{'TTFT p50':>9}{'TTFT p99':>9}{'prompts':>8}{'lost':>5}   (ms)")
    rows, bad = [], 0
    for target in ("off", a.target):
        srv = Server("vigil", threads=a.threads, target=target)
        try:
            alone, _ = stream_beside_prompts(srv, a.tokens, 0, a.prompt_words, seed=1)
            busy, others = stream_beside_prompts(srv, a.tokens, every, a.prompt_words, seed=1)
        finally:
            srv.stop()
        for r in [alone, busy] + others:
            if is_lost(r):
                print(f"lost: request {r['id']}: status {r['status']}, {r.get('error', 'no error')}", flush=True)
        step = pct([y - x for x, y in zip(alone["tokens"], alone["tokens"][1:])], 0.5)
        gaps = [y - x for x, y in zip(busy["tokens"], busy["tokens"][1:])]
        ttft = [r["tokens"][0] - r["sent"] for r in others if r["tokens"]]
        lost = sum(is_lost(r) for r in [alone, busy] + others)
        bad += lost
        row = dict(target=target, decode_step=step, itl_p50=pct(gaps, 0.5), itl_p99=pct(gaps, 0.99),
                   itl_max=max(gaps), ttft_p50=pct(ttft, 0.5), ttft_p99=pct(ttft, 0.99), prompts=len(others), lost=lost)
        rows.append(row)
        ms = {k: v * 1e3 for k, v in row.items() if isinstance(v, float)}
        print(f"{target:>8}{ms['decode_step']:>11.1f}{ms['itl_p50']:>8.1f}{ms['itl_p99']:>8.1f}{ms['itl_max']:>8.1f}"
              f"{row['itl_p99'] / step:>9.2f}{ms['ttft_p50']:>9.0f}{ms['ttft_p99']:>9.0f}{len(others):>8}{lost:>5}",
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tokens": a.tokens, "every": every, "prompt_words": a.prompt_words, "rows": rows}, f, indent=1)
    return 1 if bad else 0


def cmd_latency(a):
    """Saturation of the mixed workload (a closed loop of 16 streams), then open-loop points at
    fractions of it with the step latency target off and on, alternating, per policy."""
    if a.replot:  # draw a saved run again
        with open(a.replot) as f:
            saved = json.load(f)
        plot_latency(saved["rows"], a.policy, saved["target"], saved["capacity"], a.plot)
        return 0
    if a.capacity:  # an earlier run's: the same arrivals as that run
        capacity = a.capacity
        print(f"saturation: {capacity:.2f} req/s (given); target {a.target}, {a.requests} requests a point", flush=True)
    else:
        srv = Server("vigil", policy="fcfs", threads=a.threads, target="off")  # the best-throughput configuration
        try:
            res, wall = closed_loop(srv.port, srv.model_name, 16, a.probe_seconds, mixed=True)
        finally:
            srv.stop()
        capacity = sum(1 for r in res if r["done"]) / wall
        print(f"saturation: {capacity:.2f} req/s (closed loop of 16 streams, mixed lengths, {wall:.0f} s); "
              f"target {a.target}, {a.requests} requests a point", flush=True)
    print(f"{'policy':<14}{'load':>6}{'req/s':>7}{'target':>8}{'gen tok/s':>10}{'TTFT p50':>9}{'TTFT p99':>9}"
          f"{'ITL p50':>8}{'ITL p99':>8}{'ITL max':>8}{'p99/50':>7}{'TTFT max':>9}{'E2E p50':>9}{'E2E p99':>9}"
          f"{'lost':>5}{'dup':>4}   (ms)")
    rows, bad = [], 0
    points = [(a.policy, f) for f in (float(x) for x in a.loads.split(","))]
    points += [(p, f) for f in (float(x) for x in a.policy_loads.split(",")) for p in a.policies.split(",")
               if (p, f) not in points]
    texts = {}  # (label, target) -> {request id: record} of the first load point, for the greedy spot check
    for i, (policy, load) in enumerate(points):
        # The peer runs the same arrivals (same seed) right after vigil's two runs at its main points;
        # the other policies run with the target only.
        main = policy == a.policy
        runs = [(policy, "off")] if main and "off" in a.runs else []
        runs += [(policy, a.target)] if "target" in a.runs or not main else []
        runs += [(a.peer, None)] if a.peer and main and "peer" in a.runs else []
        for label, target in runs:
            if label == a.peer:
                srv = Server(a.peer, threads=a.threads)
            else:
                name, _, aging = label.partition("@")
                srv = Server("vigil", policy=name, threads=a.threads, target=target,
                             aging=float(aging) if aging else None)
            try:
                res, wall = open_loop(srv.port, srv.model_name, load * capacity, a.requests,
                                      seed=int(load * 1000) + 100000 * a.seed)
            finally:
                srv.stop()
            s = summarize(res, wall, own=label != a.peer)
            bad += s["lost"] + s["duplicated"]
            rows.append(latency_row(label, load, load * capacity, target, s))
            if i == 0:
                texts[(label, target or "off")] = {r["id"]: r for r in res}
    check = greedy_spot_check(texts, a.peer, a.spot_check, a.threads) if a.peer else None
    if check:  # vigil's answers must be llama.cpp's; the peer's own under load need not (reported)
        bad += sum(c["differ"] for c in check if c["run"] != a.peer)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"capacity": capacity, "target": a.target, "requests": a.requests, "seed": a.seed, "rows": rows,
                       "greedy_spot_check": check}, f, indent=1)
    if a.plot:
        plot_latency(rows, a.policy, a.target, capacity, a.plot)
    return 1 if bad else 0


# The end-of-generation tokens of SmolLM2's vocabulary, as vigil-worker writes them into the text.
EOG_TEXTS = ("<|im_end|>", "<|endoftext|>")


def greedy_spot_check(texts, peer, n, threads):
    """The greedy answers of the first load point's requests 0..N-1 (temperature 0, ignore_eos) from
    each run, vigil's and the peer's, against the peer's answers to the same requests sent one at a
    time to a fresh peer: llama.cpp's reference, which its server under load need not reproduce
    (its results depend on the batch: ggml-org/llama.cpp#6950, #7052)."""
    first = next(iter(texts.values()))
    n = min(n, len(first))
    srv = Server(peer, threads=threads)
    alone, lock = [], threading.Lock()
    try:
        for rid in range(n):
            r = first[rid]
            one_request(srv.port, srv.model_name, rid, r["prompt_len"], r["max_tokens"], 0, r["rng_seed"], alone, lock)
    finally:
        srv.stop()
    ref = {r["id"]: r["text"] for r in alone}
    out = []
    for (label, target), got in texts.items():
        c = compare_answers({rid: got[rid]["text"] for rid in range(n)}, ref, cut_at_eog=label != peer)
        who = f"{peer} under load" if label == peer else f"vigil ({label}, target {target})"
        print(f"greedy spot check, {who} vs {peer} alone: {c['identical']} of {n} identical"
              + (f" ({c['compared_to_eog']} up to vigil's end-of-generation token)" if label != peer else ""),
              flush=True)
        for d in c["first_differences"]:
            print(f"  request {d['id']} parts at character {d['at_char']}: {d['run']!r} / alone {d['alone']!r}")
        out.append(dict(c, run=label, target=target, requests=n))
    return out


def compare_answers(got, ref, cut_at_eog):
    """GOT against REF, answer by answer ({request id: text}). ignore_eos differs between the two
    servers: vigil-worker generates past an end-of-generation token (it is in the text), llama.cpp's
    server biases every such token to -inf (tools/server/server-schema.cpp, "ignore_eos") and never
    picks one; so with CUT_AT_EOG an answer holding one is compared up to the first, where the two
    must part."""
    differ, to_eog = [], 0
    for rid in sorted(ref):
        a, b = got[rid], ref[rid]
        eog = min((a.find(t) for t in EOG_TEXTS if t in a), default=-1)
        if cut_at_eog and eog >= 0:
            to_eog += 1
            a, b = a[:eog], b[:eog]
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            differ.append({"id": rid, "at_char": at, "run": a[at:at + 40], "alone": b[at:at + 40]})
    return {"identical": len(ref) - len(differ), "differ": len(differ), "compared_to_eog": to_eog,
            "first_differences": differ}


def plot_latency(rows, policy, target, capacity, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    peers = ["llama-server"] if any(r["policy"] == "llama-server" for r in rows) else []
    for ax, metric in zip(axes, ("itl", "ttft")):
        for who, t, style in [(policy, "off", "--"), (policy, target, "-")] + [(p, "off", ":") for p in peers]:
            pts = sorted((r["load"], r) for r in rows if r["policy"] == who and r["target"] == t)
            for q, color in (("p50", "tab:blue"), ("p99", "tab:red")):
                ax.plot([x for x, _ in pts], [r[f"{metric}_{q}"] * 1e3 for _, r in pts], style, color=color,
                        marker="o" if who == policy else "s",
                        label=f"{q}, target {t}" if who == policy else f"{q}, {who}")
        if metric == "itl" and target.endswith("ms"):  # auto and Nx follow the decode step: no line
            ax.axhline(float(target.rstrip("ms")), color="gray", lw=0.8, label=f"target {target}")
        ax.set_yscale("log")
        ax.set_xlabel(f"offered load (x saturation = {capacity:.2f} req/s)")
        ax.set_ylabel("ms")
        ax.set_title({"itl": "inter-token latency", "ttft": "time to first token"}[metric] + f" ({policy})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("--rates", default="1,2,4")
    p.add_argument("--requests", type=int, default=60)
    p.add_argument("--policies", default="fcfs,priority,token_budget")
    p = sub.add_parser("streams")
    p.add_argument("--streams", default="1,16")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--llama-cpp", action="store_true", help="also run llama-cpp-python's server")
    p.add_argument("--backend", default="cpu", choices=["cpu", "cuda"], help="vigil-worker's forward backend")
    p.add_argument("--graphs", default="on", choices=["on", "off"], help="CUDA Graphs for decode (cuda only)")
    p.add_argument("--metrics-dir", help="save vigil-worker's /metrics after each run here")
    p = sub.add_parser("soak")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--overload", type=float, default=1.5)
    p.add_argument("--policy", default="token_budget")
    p = sub.add_parser("latency")
    p.add_argument("--target", default="auto", help="engine.step_latency_target of the 'on' runs: auto (the "
                   "worker's default), a multiple of the decode step (3x) or a duration (100ms)")
    p.add_argument("--loads", default="0.5,0.8,0.95,1.2", help="fractions of saturation, for --policy")
    p.add_argument("--policy", default="fcfs")
    p.add_argument("--policy-loads", default="0.8,0.95", help="loads of the policy table")
    p.add_argument("--policies", default="fcfs,token_budget")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--probe-seconds", type=float, default=40)
    p.add_argument("--runs", default="off,target,peer", help="which runs of the --loads points (with --capacity "
                   "of an earlier run: the rest of its table)")
    p.add_argument("--capacity", type=float, help="saturation in req/s (an earlier run's), instead of measuring it")
    p.add_argument("--seed", type=int, default=0, help="another draw of every point's arrivals (0: the earlier runs')")
    p.add_argument("--json", help="write every row here")
    p.add_argument("--plot", help="PNG of ITL and TTFT percentiles against load (matplotlib: the ops venv's "
                                  "python, tests/alerts/python_env.sh)")
    p.add_argument("--replot", help="no runs: draw --plot from this --json of an earlier run")
    p.add_argument("--peer", choices=["llama-server"], help="also run llama.cpp's server (16 slots, continuous "
                   "batching; scripts/setup_reference.sh builds it) at the --loads points, same arrivals")
    p.add_argument("--spot-check", type=int, default=20, help="greedy answers compared with the peer's")
    p = sub.add_parser("lowload")
    p.add_argument("--target", default="auto", help="engine.step_latency_target of the 'on' run")
    p.add_argument("--tokens", type=int, default=1000, help="the stream's length")
    p.add_argument("--every", type=float, default=0, help="seconds between prompt arrivals; 0: two prefill "
                   "times of a prompt alone")
    p.add_argument("--prompt-words", type=int, default=512)
    p.add_argument("--json", help="write the rows here")
    for p in sub.choices.values():
        p.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    sys.exit({"sweep": cmd_sweep, "streams": cmd_streams, "soak": cmd_soak, "latency": cmd_latency,
              "lowload": cmd_lowload}[a.cmd](a))


if __name__ == "__main__":
    main()
