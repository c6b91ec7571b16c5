#!/usr/bin/env python3
"""What the worker learns of its steps under load: one open-loop run of bench/load.py's mixed
workload against vigil-worker serve, its step cost metrics printed every 3 s (the learned decode
step, the learned cost of a prompt token beside decodes, the latency target, the prompt tokens
carried beside decodes), then the run's summary.

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

WATCHED = re.compile(r"vigil_worker_(step_cost_seconds|step_latency_target_seconds|decode_steps|"
                     r"step_prefill_chunk_tokens_(sum|count))")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, required=True, help="arrivals per second (Poisson)")
    ap.add_argument("--target", default="auto", help="engine.step_latency_target")
    ap.add_argument("--requests", type=int, default=80)
    ap.add_argument("--seed", type=int, default=800, help="bench/load.py latency's seed of a load point: 1000 x load")
    a = ap.parse_args()
    srv = load.Server("vigil", policy="fcfs", threads=2, target=a.target)
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            lines = [x for x in srv.metrics().splitlines() if WATCHED.match(x)]
            print(time.strftime("%H:%M:%S"), " | ".join(lines), flush=True)
            stop.wait(3)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        res, wall = load.open_loop(srv.port, srv.model_name, a.rate, a.requests, seed=a.seed)
    finally:
        stop.set()
        watcher.join()
        srv.stop()
    s = load.summarize(res, wall)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()})
    return 1 if s["lost"] or s["duplicated"] else 0


if __name__ == "__main__":
    sys.exit(main())
