#!/usr/bin/env python3
"""What the worker learns of its steps under load: one open-loop run of bench/load.py's mixed
workload against vigil-worker serve, its step cost metrics printed every 3 s (the learned decode
step, the learned cost of a prompt token beside decodes, the latency target, the prompt tokens
carried beside decodes), then the run's summary.

Every second it also reads how the running batch is used: requests running and waiting, and of the
steps in that second the mean decoding sequences a step (generated tokens / steps with decodes:
the running sequences not decoding are prompts in prefill) and the share over the target. The
closing line averages them over the seconds a request waited. Steps are counted only with a target
set; for the schedule of `off`, run a target no step reaches (--target 10000ms).

usage:
  VIGIL_WORKER=build/dev/worker/vigil-worker PYTHONPATH=pylib build/ops-venv/bin/python \\
    bench/step_costs_under_load.py --rate 1.48 --target auto [--requests 80]
"""
import argparse
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402
from vigil_harness.agent import parse_metrics  # noqa: E402

BATCH = {"running": "vigil_worker_requests_running", "waiting": "vigil_worker_requests_waiting",
         "tokens": "vigil_worker_generation_tokens_total", "steps": "vigil_worker_decode_steps_total",
         "over": "vigil_worker_decode_steps_over_target_total"}
WATCHED = re.compile(r"vigil_worker_(step_cost_seconds|step_latency_target_seconds|decode_steps|"
                     r"step_prefill_chunk_tokens_(sum|count))")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, required=True, help="arrivals per second (Poisson)")
    ap.add_argument("--target", default="auto", help="engine.step_latency_target")
    ap.add_argument("--requests", type=int, default=80)
    ap.add_argument("--seed", type=int, default=800, help="bench/load.py latency's seed of a load point: 1000 x load")
    ap.add_argument("--policy", default="fcfs", help="engine.policy (serve's default is token_budget)")
    a = ap.parse_args()
    srv = load.Server("vigil", policy=a.policy, threads=2, target=a.target)
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            lines = [x for x in srv.metrics().splitlines() if WATCHED.match(x)]
            print(time.strftime("%H:%M:%S"), " | ".join(lines), flush=True)
            stop.wait(3)

    busy = []  # (running, tokens generated, steps) of each second a request waited

    def batch_use():
        last = None
        while not stop.wait(1):
            samples = parse_metrics(srv.metrics())
            now = {key: sum(v for n, _, v in samples if n == name) for key, name in BATCH.items()}
            if last:
                steps, tokens = now["steps"] - last["steps"], now["tokens"] - last["tokens"]
                decodes = tokens / steps if steps else 0.0
                over = (now["over"] - last["over"]) / steps if steps else 0.0
                print(f"batch running {now['running']:.0f} waiting {now['waiting']:.0f} steps {steps:.0f} "
                      f"decodes/step {decodes:.1f} over target {over:.0%}", flush=True)
                if now["waiting"] > 0 and steps:
                    busy.append((now["running"], tokens, steps))
            last = now

    watcher = threading.Thread(target=watch)
    watcher.start()
    user = threading.Thread(target=batch_use)
    user.start()
    try:
        res, wall = load.open_loop(srv.port, srv.model_name, a.rate, a.requests, seed=a.seed)
        itl = {l.get("le"): v for n, l, v in parse_metrics(srv.metrics())
               if n == "vigil_worker_inter_token_latency_seconds_bucket"}
    finally:
        stop.set()
        watcher.join()
        user.join()
        srv.stop()
    if busy:
        # Tokens are counted as they stream, steps as they end: a second's ratio is noisy, the sums are not.
        print(f"while requests waited ({len(busy)} s): running {sum(b[0] for b in busy) / len(busy):.1f}, "
              f"decoding {sum(b[1] for b in busy) / sum(b[2] for b in busy):.1f} a step")
    # Where gaps over the ceiling arise: in the engine (the worker's histogram, token to token as
    # generated) or on the way to the client (the gaps the client saw).
    gaps = [b - x for r in res for x, b in zip(r["tokens"], r["tokens"][1:])]
    print(f"gaps over 100 ms: worker {1 - itl['0.1'] / itl['+Inf']:.2%} of {itl['+Inf']:.0f}, "
          f"client {sum(g > 0.1 for g in gaps) / len(gaps):.2%} of {len(gaps)}")
    s = load.summarize(res, wall)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()})
    return 1 if s["lost"] or s["duplicated"] else 0


if __name__ == "__main__":
    sys.exit(main())
