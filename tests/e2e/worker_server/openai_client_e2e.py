#!/usr/bin/env python3
"""The worker's API key against a real client (#30 item 3): OpenAI's own Python library (PyPI
`openai`, from the ops venv) with the right key completes, chats and streams; with a wrong key or
none it raises openai.AuthenticationError; /health stays open; `priority` is refused with 400
unless the worker allows it.

usage: openai_client_e2e.py VIGIL_WORKER MODEL   (run with the ops venv's python)
"""
import os
import signal
import sys

import openai

from vigil_harness.worker_client import call, start_serve

BINARY, MODEL = sys.argv[1], sys.argv[2]
KEY = "vigil-test-key-5b1d0c"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def start(extra=(), env_key=None):
    env = dict(os.environ)
    env.pop("VIGIL_API_KEY", None)
    if env_key:
        env["VIGIL_API_KEY"] = env_key
    proc, port, _ = start_serve([BINARY, "serve", "-m", MODEL, "--port", "0", *extra], env=env)
    return proc, port


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def client(port, key):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0, timeout=60)


def raises(fn, kind):
    try:
        fn()
    except kind as e:
        return e
    except Exception as e:  # noqa: BLE001 - the wrong kind is the failure we report
        return f"{type(e).__name__}: {e}"
    return None


def keyed_server(proc, port, how):
    good = client(port, KEY)
    model = good.models.list().data[0].id
    done = good.completions.create(model=model, prompt="The capital of France is", max_tokens=6, temperature=0)
    check(done.choices[0].text != "" and done.usage.completion_tokens == 6,
          f"{how}: right key: completion {done.choices[0].text!r}, {done.usage.completion_tokens} tokens")
    chat = good.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    check(chat.choices[0].message.role == "assistant", f"{how}: right key: chat answered")
    chunks = list(good.completions.create(model=model, prompt="The capital of France is", max_tokens=6,
                                          temperature=0, stream=True))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    check(len(chunks) >= 6 and streamed == done.choices[0].text,
          f"{how}: right key: streamed {len(chunks)} chunks, same text as the completion ({streamed!r})")

    for bad, label in (("wrong-key", "wrong key"), (KEY[:-1], "key minus its last byte")):
        e = raises(lambda: client(port, bad).completions.create(model=model, prompt="x", max_tokens=1),
                   openai.AuthenticationError)
        check(isinstance(e, openai.AuthenticationError) and e.status_code == 401 and e.code == "invalid_api_key",
              f"{how}: {label}: AuthenticationError ({e})")
    e = raises(lambda: list(client(port, "wrong-key").completions.create(model=model, prompt="x", max_tokens=1,
                                                                          stream=True)),
               openai.AuthenticationError)
    check(isinstance(e, openai.AuthenticationError), f"{how}: wrong key, streaming: AuthenticationError")
    e = raises(lambda: client(port, "wrong-key").models.list(), openai.AuthenticationError)
    check(isinstance(e, openai.AuthenticationError), f"{how}: wrong key: /v1/models refused too")
    check(call(port, "GET", "/health", timeout=5)[0] == 200, f"{how}: /health open without a key")

    e = raises(lambda: good.completions.create(model=model, prompt="x", max_tokens=1, extra_body={"priority": 3}),
               openai.BadRequestError)
    check(isinstance(e, openai.BadRequestError) and e.param == "priority",
          f"{how}: priority refused without --allow-client-priority ({e})")
    check(stop(proc) == 0, f"{how}: drained and exited 0")


def main():
    keyed_server(*start(["--api-key", KEY]), "--api-key")
    keyed_server(*start(env_key=KEY), "VIGIL_API_KEY")

    proc, port = start(["--api-key", KEY, "--allow-client-priority"])
    good = client(port, KEY)
    model = good.models.list().data[0].id
    r = good.completions.create(model=model, prompt="x", max_tokens=1, extra_body={"priority": 3})
    check(r.usage.completion_tokens == 1, "--allow-client-priority: priority accepted")
    check(stop(proc) == 0, "--allow-client-priority: drained and exited 0")

    if failures:
        print(f"FAILED: {len(failures)} check(s)")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
