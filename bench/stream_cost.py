#!/usr/bin/env python3
"""What streaming costs (#33 item 6): the server's CPU and the bytes on the wire per generated
token when every token goes out as its own server-sent event, against the same requests answered
in one body, for vigil-worker and llama.cpp's llama-server side by side.

Per server and concurrency N (N clients sharing a window's requests, each sending its share one
after another: 32-word prompts, 64 tokens out, temperature 0, ignore_eos), a round is four windows: streamed, whole,
whole, streamed (the next round the other way round), so drift falls on both sides. A window
reads, around its requests:
- the server's CPU time, all threads, from its process CPU clock, and each thread's (its
  schedstat): the THREADS threads that ran the most are the model's (vigil's engine loop and its
  compute worker; llama-server's main loop and its ggml worker), the rest serve HTTP (vigil's
  Asio threads, which write each event; llama-server's httplib pool, likewise). The model's CPU
  per token moves by percents from window to window on this VM and would drown a cost of
  microseconds, so the streaming cost is read from the serving threads;
- per request, from the kernel's TCP_INFO of the client's socket before it is closed: the payload
  bytes received (tcpi_bytes_received less the server's FIN, checked against what the client
  read), the segments
  received (tcpi_segs_in, ACKs and the handshake included) and those of them carrying data
  (tcpi_data_segs_in: how many sends reached the wire apart);
- the generated tokens from the server's usage count (or, where a streamed answer has none, its
  text events).
The streaming cost per token is the serving threads' CPU s per token streamed minus whole, per
round; its 95 % t interval over the rounds, and its share of all the server's CPU per streamed
token. Framing dominates when that share is large; then coalescing several tokens per event
would pay. Any request that fails, or
returns fewer tokens than asked for, fails the run.

usage: bench/run.sh bench/stream_cost.py [--servers vigil,llama-server] [--streams 1,16]
                                         [--rounds 3] [--requests 32] [--json F]
"""
import argparse
import json
import os
import socket
import struct
import threading

import load
from agent_overhead import cpu_clock_s
from paired_interval import t_interval

PROMPT_WORDS, MAX_TOKENS = 32, 64
# struct tcp_info (include/uapi/linux/tcp.h): after 8 __u8 and 24 __u32 (to byte 104) come four
# __u64, the fourth tcpi_bytes_received at 128; then __u32 tcpi_segs_out 136, tcpi_segs_in 140,
# tcpi_notsent_bytes 144, tcpi_min_rtt 148, tcpi_data_segs_in 152.
TCP_INFO_LEN, BYTES_RECEIVED_AT, SEGS_IN_AT, DATA_SEGS_IN_AT = 156, 128, 140, 152


def dechunk(body):
    """The body of a Transfer-Encoding: chunked response."""
    out, i = bytearray(), 0
    while True:
        eol = body.index(b"\r\n", i)
        size = int(body[i:eol].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[eol + 2:eol + 2 + size]
        i = eol + 2 + size + 2


def one_request(port, model, prompt, stream):
    """One completion over its own connection: {tokens, events, payload, segs_in, data_segs_in}."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                       "ignore_eos": True, "stream": stream, "stream_options": {"include_usage": True}}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=300)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        raw = bytearray()
        while chunk := s.recv(65536):
            raw += chunk
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    finally:
        s.close()
    # The sequence number of the server's FIN, which the client has read to, is in the count.
    received, = struct.unpack_from("=Q", info, BYTES_RECEIVED_AT)
    payload = received - 1
    segs_in, = struct.unpack_from("=I", info, SEGS_IN_AT)
    data_segs_in, = struct.unpack_from("=I", info, DATA_SEGS_IN_AT)
    if payload != len(raw):
        raise RuntimeError(f"the kernel counted {payload} bytes received (and a FIN), the client read {len(raw)}")
    head, _, content = bytes(raw).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {content[:300]!r}")
    if b"transfer-encoding: chunked" in head.lower():
        content = dechunk(content)
    if stream:
        events = [line[6:] for line in content.split(b"\n") if line.startswith(b"data: ")]
        chunks = [json.loads(e) for e in events if e != b"[DONE]"]
        usage = [c["usage"]["completion_tokens"] for c in chunks if c.get("usage")]
        texts = sum(1 for c in chunks if c.get("choices") and c["choices"][0].get("text"))
        tokens = usage[-1] if usage else texts
    else:
        events = []
        tokens = json.loads(content)["usage"]["completion_tokens"]
    if tokens != MAX_TOKENS:
        raise RuntimeError(f"{tokens} tokens generated of {MAX_TOKENS} asked for")
    return {"tokens": tokens, "events": len(events), "payload": payload, "segs_in": segs_in,
            "data_segs_in": data_segs_in}


def thread_cpu_ns(pid):
    """{thread id: ns on a CPU} of PID's threads (/proc/PID/task/TID/schedstat, first field)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            pass
    return out


def window(server, streams, per_client, stream, model_threads):
    """STREAMS clients, PER_CLIENT requests each: the server's CPU s (all, and of the threads other
    than the MODEL_THREADS busiest), tokens, events, bytes, segments."""
    results, errors, lock = [], [], threading.Lock()

    def client(k):
        try:
            for i in range(per_client):
                prompt = " ".join(load.WORDS[(k * 7 + i * 3 + j) % len(load.WORDS)] for j in range(PROMPT_WORDS))
                r = one_request(server.port, server.model_name, prompt, stream)
                with lock:
                    results.append(r)
        except (OSError, RuntimeError, ValueError) as e:
            with lock:
                errors.append(e)

    pid = server.proc.pid
    cpu0, threads0 = cpu_clock_s(pid), thread_cpu_ns(pid)
    threads = [threading.Thread(target=client, args=(k,)) for k in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu, threads1 = cpu_clock_s(pid) - cpu0, thread_cpu_ns(pid)
    ran = sorted((threads1[t] - threads0.get(t, 0) for t in threads1), reverse=True)
    serving = sum(ran[model_threads:]) / 1e9
    if errors:
        raise SystemExit(f"FAIL: {len(errors)} requests failed, first: {errors[0]}")
    total = {k: sum(r[k] for r in results) for k in ("tokens", "events", "payload", "segs_in", "data_segs_in")}
    return dict(total, cpu_s=cpu, serving_cpu_s=serving, stream=stream)


def measure(kind, streams, rounds, requests, threads):
    per_client = max(1, requests // streams)
    server = load.Server(kind, threads=threads, max_running=16)
    try:
        window(server, streams, 1, True, threads)  # warm-up, not counted
        windows, diffs = [], []
        for r in range(rounds):
            order = (True, False, False, True) if r % 2 == 0 else (False, True, True, False)
            got = [window(server, streams, per_client, s, threads) for s in order]
            windows += got
            per_token = {s: sum(w["serving_cpu_s"] for w in got if w["stream"] == s) /
                         sum(w["tokens"] for w in got if w["stream"] == s) for s in (True, False)}
            diffs.append(per_token[True] - per_token[False])
    finally:
        server.stop()
    row = {"server": kind, "streams": streams, "rounds": rounds, "windows": windows}
    for s, name in ((True, "streamed"), (False, "whole")):
        ws = [w for w in windows if w["stream"] == s]
        tokens = sum(w["tokens"] for w in ws)
        row[name] = {"cpu_ms_per_token": 1e3 * sum(w["cpu_s"] for w in ws) / tokens,
                     "serving_us_per_token": 1e6 * sum(w["serving_cpu_s"] for w in ws) / tokens,
                     "bytes_per_token": sum(w["payload"] for w in ws) / tokens,
                     "segments_per_token": sum(w["segs_in"] for w in ws) / tokens,
                     "data_segments_per_token": sum(w["data_segs_in"] for w in ws) / tokens,
                     "events_per_token": sum(w["events"] for w in ws) / tokens, "tokens": tokens}
    mean, half = t_interval(diffs)
    row["cost_us_per_token"], row["cost_half_width_us"] = mean * 1e6, half * 1e6
    row["cost_share"] = mean * 1e3 / row["streamed"]["cpu_ms_per_token"]
    return row


def show(row):
    st, wh = row["streamed"], row["whole"]
    print(f"{row['server']:<13}{row['streams']:>4}{st['cpu_ms_per_token']:>10.3f}{wh['cpu_ms_per_token']:>10.3f}"
          f"{st['serving_us_per_token']:>10.1f}{wh['serving_us_per_token']:>9.1f}"
          f"{row['cost_us_per_token']:>+10.1f} ±{row['cost_half_width_us']:<7.1f}{100 * row['cost_share']:>+7.2f}%"
          f"{st['bytes_per_token']:>9.0f}{wh['bytes_per_token']:>8.1f}{st['data_segments_per_token']:>8.2f}"
          f"{wh['data_segments_per_token']:>8.3f}{st['events_per_token']:>8.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="vigil,llama-server")
    ap.add_argument("--streams", default="1,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=32, help="requests per window, shared by the clients")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write every window here")
    a = ap.parse_args()
    print(f"{'server':<13}{'N':>4}{'CPU ms/token':>20}{'serving us/token':>19}{'streaming cost':>18}{'share':>8}"
          f"{'bytes/token':>17}{'data segs/token':>16}{'events':>8}")
    print(f"{'':<17}{'streamed':>10}{'whole':>10}{'streamed':>10}{'whole':>9}{'us/token, 95 %':>18}{'':>8}"
          f"{'streamed':>9}{'whole':>8}{'streamed':>8}{'whole':>8}{'/token':>8}")
    rows = []
    for kind in a.servers.split(","):
        for n in (int(x) for x in a.streams.split(",")):
            rows.append(measure(kind, n, a.rounds, a.requests, a.threads))
            show(rows[-1])
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"prompt_words": PROMPT_WORDS, "max_tokens": MAX_TOKENS, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
