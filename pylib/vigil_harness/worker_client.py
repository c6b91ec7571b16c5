"""The worker's HTTP API (OpenAI completions, /metrics, readiness) on loopback, as the tests and
benchmarks call it: one fresh connection per request, bodies as the server sent them."""
import collections
import http.client
import json
import re
import subprocess
import threading
import time

HOST = '127.0.0.1'
# The line `serve` logs once it listens (worker/commands/serve.cpp); with --port 0 the only place
# the chosen port is written.
LISTENING = re.compile(r'on http://[^ ]+:(\d+) ')

# One completion's answer: TEXT, FINISH_REASON and USAGE are None unless STATUS is 200; RAW is the
# body as sent (the error object, or the events of a stream).
Completion = collections.namedtuple('Completion', 'status text finish_reason usage raw')


def start_serve(args, **popen):
    """Starts `vigil-worker serve` (ARGS, with --port 0) and waits until it listens: (process, port,
    log). LOG holds its stderr lines, kept up to date by a thread."""
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, **popen)
    log = []
    for line in proc.stderr:
        log.append(line)
        m = LISTENING.search(line)
        if m:
            threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
            return proc, int(m.group(1)), log
    proc.wait()
    raise RuntimeError("server did not start (exit %s): %s" % (proc.returncode, ''.join(log)))


def call(port, method, path, body=None, headers=None, timeout=120, source=None):
    """One request: (status, {lower-case header: value}, raw body bytes). A dict or list BODY goes
    as JSON, a str or bytes one as it is (a malformed body is a test case); SOURCE picks the
    client's address (127.0.0.2 is a second client)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout, source_address=(source, 0) if source else None)
    try:
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data, headers={'Content-Type': 'application/json', **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw
    finally:
        conn.close()


def completions_path(body):
    return '/v1/chat/completions' if 'messages' in body else '/v1/completions'


def sse_events(raw):
    """The JSON events of a streamed body; asserts the stream ends with [DONE] and nothing follows it."""
    events, done = [], False
    for block in raw.decode().split('\n\n'):
        if not block:
            continue
        assert block.startswith('data: '), block
        data = block[6:]
        if data == '[DONE]':
            done = True
        else:
            assert not done, 'event after [DONE]'
            events.append(json.loads(data))
    assert done, 'stream did not end with [DONE]'
    return events


def complete(port, body, timeout=120, headers=None):
    """BODY posted to the completions endpoint its shape names (chat when it has messages), streamed
    or not (the two shapes differ), read into one Completion."""
    status, hd, raw = call(port, 'POST', completions_path(body), body, headers=headers, timeout=timeout)
    if status != 200:
        return Completion(status, None, None, None, raw)
    chat = 'messages' in body
    if not body.get('stream'):
        j = json.loads(raw)
        c = j['choices'][0]
        return Completion(status, c['message']['content'] if chat else c['text'], c['finish_reason'], j['usage'], raw)
    assert hd['content-type'] == 'text/event-stream', hd
    text, finish, usage = '', None, None
    for e in sse_events(raw):
        if e.get('usage'):
            usage = e['usage']
        for c in e['choices']:
            text += (c['delta'].get('content') or '') if chat else c['text']
            finish = c['finish_reason'] or finish
    return Completion(status, text, finish, usage, raw)


def open_stream(port, body, timeout=600):
    """A streamed completion as it arrives: (connection, response); the caller reads
    stream_data(response) and closes the connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    conn.request('POST', completions_path(body), json.dumps(body), {'Content-Type': 'application/json'})
    return conn, conn.getresponse()


def stream_data(resp):
    """The data of each server-sent event of RESP as it arrives (bytes; the last is b'[DONE]')."""
    for line in resp:
        line = line.strip()
        if line.startswith(b'data: '):
            yield line[6:]


def metric(port, name):
    """The value of the unlabelled sample NAME on the worker's /metrics, None when absent."""
    _, _, raw = call(port, 'GET', '/metrics', timeout=30)
    for line in raw.decode().splitlines():
        if line.startswith(name + ' '):
            return float(line.split()[1])
    return None


def wait_ready(port, path='/ready', timeout=60, proc=None):
    """Until PATH answers 200 (RuntimeError past TIMEOUT s, or as soon as PROC, the server, exits)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f'server exited with {proc.returncode} before it was ready')
        try:
            if call(port, 'GET', path, timeout=2)[0] == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.2)
    raise RuntimeError(f'server on port {port} not ready after {timeout}s')
