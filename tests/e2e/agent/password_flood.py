#!/usr/bin/env python3
"""A flood of wrong passwords takes neither the agent's memory nor its scraper (#46 item 2).

The agent serves over TLS without client certificates (exporter-toolkit's default client_auth_type)
and basic auth with a bcrypt hash at cost 10 (exporter-toolkit's dave/dave123). For 40 s, 50 new
connections a second each send GET /metrics with a password never sent before and hang up at once,
as the review's attacker did; meanwhile the right password scrapes every 2 s, as Prometheus would,
with Prometheus' default scrape timeout of 10 s. Every scrape must be 200 within it, and the agent's
resident memory must grow by less than 16 MiB. Before the fix, the bcrypt checks queued without
bound on one thread, ran for connections already gone, held each connection's TLS state, and every
100 distinct failures cleared the verdict cache, the scraper's entry with it: RSS 16 -> 119 MiB in
40 s and 6 of 16 scrapes answered.
usage: password_flood.py VIGIL_AGENT"""
import base64
import os
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
import urllib.request

from vigil_harness.agent import Agent, parse_metrics, total
from vigil_harness.fail import fail, require_root
from web_config import DAVE_HASH, issue

FLOOD_S = 40
FLOOD_PER_S = 50
SCRAPE_EVERY_S = 2
SCRAPE_TIMEOUT_S = 10  # Prometheus' default scrape_timeout
RSS_GROWTH_LIMIT_KIB = 16 * 1024
RIGHT = 'Basic ' + base64.b64encode(b'dave:dave123').decode()


class TlsPasswordAgent(Agent):
    """The harness's agent over TLS (no client certificate), scraped with dave's password."""

    def __init__(self, binary, web_config, ca):
        self.ctx = ssl.create_default_context(cafile=ca)
        super().__init__(binary, args=['--web.config.file=' + web_config])

    def get(self, path):
        req = urllib.request.Request('https://127.0.0.1:%d%s' % (self.port, path), headers={'Authorization': RIGHT})
        with urllib.request.urlopen(req, timeout=SCRAPE_TIMEOUT_S, context=self.ctx) as r:
            return r.read().decode()


def rss_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    fail('no VmRSS for pid %d' % pid)


def flood(port, ctx, stop, tally, first):
    """Connections at FLOOD_PER_S / 4 a second from one of four threads, each with a new wrong
    password, closed as soon as the request is sent."""
    n, period = first, 4.0 / FLOOD_PER_S
    next_at = time.time()
    while not stop.is_set():
        password = base64.b64encode(b'dave:wrong-%d' % n).decode()
        n += 4
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname='127.0.0.1') as s:
                    s.sendall(b'GET /metrics HTTP/1.1\r\nHost: a\r\nAuthorization: Basic %s\r\n\r\n' % password.encode())
            tally['sent'] += 1
        except OSError:
            tally['refused'] += 1
        next_at += period
        time.sleep(max(0.0, next_at - time.time()))


def main():
    require_root()
    d = tempfile.mkdtemp(prefix='vigil-password-flood-')
    try:
        ca = issue(d, 'ca', None, None)
        server = issue(d, 'server', ca, 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
        web = os.path.join(d, 'web.yml')
        with open(web, 'w') as f:
            f.write('tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  dave: %s\n'
                    % (server[1], server[0], DAVE_HASH))
        with TlsPasswordAgent(sys.argv[1], web, ca[1]) as agent:
            agent.scrape()  # the scraper's verdict is cached before the flood, as it would be
            before = rss_kib(agent.proc.pid)
            stop = threading.Event()
            tallies = [{'sent': 0, 'refused': 0} for _ in range(4)]
            ctx = ssl.create_default_context(cafile=ca[1])
            threads = [threading.Thread(target=flood, args=(agent.port, ctx, stop, tallies[i], i)) for i in range(4)]
            for t in threads:
                t.start()
            scrapes, slowest, peak = [], 0.0, before
            end = time.time() + FLOOD_S
            try:
                while time.time() < end:
                    t0 = time.time()
                    try:
                        agent.get('/metrics')
                        scrapes.append('200')
                    except OSError as e:
                        scrapes.append(str(e))
                    slowest = max(slowest, time.time() - t0)
                    peak = max(peak, rss_kib(agent.proc.pid))
                    time.sleep(max(0.0, SCRAPE_EVERY_S - (time.time() - t0)))
            finally:
                stop.set()
                for t in threads:
                    t.join()
            sent = sum(t['sent'] for t in tallies)
            ok = scrapes.count('200')
            print('flood: %d wrong-password connections in %d s (%.0f/s), %d refused at connect'
                  % (sent, FLOOD_S, sent / FLOOD_S, sum(t['refused'] for t in tallies)))
            print('scrapes with the right password: %d of %d answered 200, slowest %.2f s; agent RSS %d -> peak %d KiB '
                  '(+%d KiB)' % (ok, len(scrapes), slowest, before, peak, peak - before), flush=True)
            if ok != len(scrapes):
                fail('scrapes with the right password failed during the flood: %s' % [x for x in scrapes if x != '200'])
            if peak - before >= RSS_GROWTH_LIMIT_KIB:
                fail('the agent grew by %d KiB during the flood (limit %d KiB)' % (peak - before, RSS_GROWTH_LIMIT_KIB))
            if sent < FLOOD_S * FLOOD_PER_S * 0.8:
                fail('only %d of %d flood connections sent their request: no attack survived' % (sent, FLOOD_S * FLOOD_PER_S))
            s = parse_metrics(agent.get('/metrics'))
            busy = total(s, 'vigil_agent_http_rejected_total', require=True, reason='auth_busy')
            gone = total(s, 'vigil_agent_http_rejected_total', require=True, reason='auth_gone')
            denied = total(s, 'vigil_agent_http_requests_total', require=True, code='401')
            print('agent: %d answered 401 in full, %d answered 503 auth_busy, %d closed unchecked (auth_gone)'
                  % (denied, busy, gone))
            # Each wrong password is either checked (and answered 401, or its client gone by then),
            # refused unchecked for a full queue, or dropped with its client: bcrypt ran at most
            # for the rest, about 40 s of it at ~50 ms a check.
            if busy + gone == 0:
                fail('no password check was refused or dropped: the queue is not bounded')
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print('ok')


if __name__ == '__main__':
    main()
