#!/usr/bin/env python3
"""The agent's endpoint behind exporter-toolkit's web configuration (issue #30, items 1 and 3).

Certificates come from the openssl command-line tool: a CA, a server certificate for 127.0.0.1 and
a client certificate. The agent runs with --web.config.file=PATH (node_exporter's flag) naming a
file that requires a client certificate the CA signed (RequireAndVerifyClientCert), basic auth
with a bcrypt hash exporter-toolkit publishes (dave/dave123, web/testdata/web_config_users.good.yml)
and an extra header.

A real Prometheus (Debian's) scrapes it four ways: with the client certificate and the password
(must be up with vigil_agent_* series), with a wrong password, without a client certificate and
over plain HTTP; each of the three must be down, its /api/v1/targets lastError saying why.

Then, with Python's ssl module as the client: the answer carries the configured header; 70 silent
connections (past the cap of 64) and a half-sent ClientHello do not keep /readyz from answering
over TLS within 1 s, and the handshake deadline closes them; the server's key and certificate are
replaced on disk and the next handshake presents the new certificate (fingerprint compared with
openssl's) while the agent keeps its pid; a key file that does not match keeps the last good pair
in service and counts a failed reload.
usage: web_config.py VIGIL_AGENT"""
import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

from vigil_harness.agent import Agent, parse_metrics, promtool_check_text, total
from vigil_harness.fail import fail, require_root
from vigil_harness.ports import listen_port

DAVE_HASH = '$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq'  # dave123
REQUEST_DEADLINE_S = 10
CAP = 64


def openssl(*args):
    r = subprocess.run(['openssl'] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        fail("openssl %s: %s" % (' '.join(args), r.stderr))
    return r.stdout


def issue(d, name, ca, ext):
    """A P-256 key and a certificate for NAME signed by CA (or self-signed when CA is None)."""
    key, crt = os.path.join(d, name + '.key'), os.path.join(d, name + '.crt')
    if ca is None:
        openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
                '-subj', '/CN=' + name, '-keyout', key, '-out', crt)
        return key, crt
    csr, extfile = os.path.join(d, name + '.csr'), os.path.join(d, name + '.ext')
    with open(extfile, 'w') as f:
        f.write(ext)
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=' + name,
            '-keyout', key, '-out', csr)
    openssl('x509', '-req', '-in', csr, '-CA', ca[1], '-CAkey', ca[0], '-CAcreateserial', '-days', '2',
            '-extfile', extfile, '-out', crt)
    return key, crt


def fingerprint(crt):
    """SHA-256 of the certificate's DER, by openssl."""
    out = openssl('x509', '-in', crt, '-noout', '-fingerprint', '-sha256')
    return out.strip().split('=', 1)[1].replace(':', '').lower()


class TlsAgent(Agent):
    """The harness's agent, asked over TLS with the client certificate (its /readyz needs no password)."""

    def __init__(self, binary, web_config, client):
        self.client = client
        super().__init__(binary, args=['--web.config.file=' + web_config])

    def context(self, cert=True):
        ctx = ssl.create_default_context(cafile=self.client['ca'])
        if cert:
            ctx.load_cert_chain(self.client['crt'], self.client['key'])
        return ctx

    def request(self, path, auth=None, cert=True):
        req = urllib.request.Request('https://127.0.0.1:%d%s' % (self.port, path))
        if auth:
            req.add_header('Authorization', 'Basic ' + auth)
        return urllib.request.urlopen(req, timeout=10, context=self.context(cert))

    def get(self, path):
        with self.request(path, auth='ZGF2ZTpkYXZlMTIz') as r:  # base64 of dave:dave123
            return r.read().decode()

    def peer_fingerprint(self):
        with socket.create_connection(('127.0.0.1', self.port), timeout=10) as raw:
            with self.context().wrap_socket(raw, server_hostname='127.0.0.1') as s:
                return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def prometheus_checks(agent, d, client):
    prom_port = listen_port()
    good_tls = {'ca_file': client['ca'], 'cert_file': client['crt'], 'key_file': client['key']}
    target = {'targets': ['127.0.0.1:%d' % agent.port]}
    jobs = {
        'tls_and_password': ('https', good_tls, 'dave123'),
        'wrong_password': ('https', good_tls, 'dave1234'),
        'no_client_cert': ('https', {'ca_file': client['ca']}, 'dave123'),
        'plain_http': ('http', None, 'dave123'),
    }
    scrape_configs = []
    for job, (scheme, tls, password) in jobs.items():
        sc = {'job_name': job, 'scheme': scheme, 'static_configs': [target],
              'basic_auth': {'username': 'dave', 'password': password}}
        if tls:
            sc['tls_config'] = tls
        scrape_configs.append(sc)
    cfg = os.path.join(d, 'prometheus.yml')
    with open(cfg, 'w') as f:
        yaml.safe_dump({'global': {'scrape_interval': '1s', 'scrape_timeout': '1s'}, 'scrape_configs': scrape_configs}, f)
    log = open(os.path.join(d, 'prometheus.log'), 'w')
    prom = subprocess.Popen(['prometheus', '--config.file=' + cfg, '--storage.tsdb.path=' + os.path.join(d, 'tsdb'),
                             '--web.listen-address=127.0.0.1:%d' % prom_port], stdout=log, stderr=subprocess.STDOUT)
    api = 'http://127.0.0.1:%d/api/v1/' % prom_port

    def api_get(path):
        with urllib.request.urlopen(api + path, timeout=5) as r:
            return json.loads(r.read())['data']

    try:
        targets = {}
        deadline = time.time() + 40
        while time.time() < deadline:
            if prom.poll() is not None:
                fail("prometheus exited %d: %s" % (prom.returncode, open(log.name).read()[-2000:]))
            try:
                active = api_get('targets')['activeTargets']
                targets = {t['labels']['job']: t for t in active}
            except OSError:
                targets = {}
            if len(targets) == 4 and all(t['health'] != 'unknown' for t in targets.values()):
                break
            time.sleep(0.5)
        else:
            fail("prometheus did not scrape every target within 40 s: %s" % targets)
        for job, t in sorted(targets.items()):
            print("prometheus target %-17s health=%-5s lastError=%r" % (job, t['health'], t['lastError']), flush=True)
        good = targets['tls_and_password']
        if good['health'] != 'up':
            fail("the scrape with client certificate and password is down: %r" % good['lastError'])
        series = api_get('query?' + urllib.parse.urlencode({'query': 'count({job="tls_and_password",__name__=~"vigil_agent_.*"})'}))
        count = int(series['result'][0]['value'][1]) if series['result'] else 0
        if count < 10:
            fail("prometheus stored %d vigil_agent_* series from the TLS scrape" % count)
        print("prometheus stored %d vigil_agent_* series over TLS with client certificate and basic auth" % count)
        expected = {
            'wrong_password': '401 Unauthorized',
            'no_client_cert': 'tls: certificate required',  # OpenSSL's TLS 1.3 alert 116, as Go names it
            'plain_http': '400 Bad Request',
        }
        for job, reason in expected.items():
            t = targets[job]
            if t['health'] != 'down' or reason not in t['lastError']:
                fail("target %s: health %s, lastError %r; expected down with %r" % (job, t['health'], t['lastError'], reason))
        return api_get
    finally:
        prom.terminate()
        prom.wait(timeout=30)


def slow_tls_clients(agent):
    """Silent connections past the cap and a half-sent ClientHello: /readyz answers over TLS meanwhile;
    the handshake deadline (the request deadline) closes what the cap did not."""
    before = parse_metrics(agent.get('/metrics'))
    silent = [socket.create_connection(('127.0.0.1', agent.port)) for _ in range(CAP + 6)]
    half = socket.create_connection(('127.0.0.1', agent.port))
    half.sendall(b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03')  # a ClientHello's first 11 of 517 bytes
    worst = 0
    for _ in range(5):
        start = time.time()
        with agent.request('/readyz') as r:
            r.read()
        worst = max(worst, time.time() - start)
    if worst > 1:
        fail("/readyz over TLS took %.2f s beside %d silent connections" % (worst, len(silent)))
    print("/readyz over TLS beside %d silent connections and a half ClientHello: max %.1f ms" % (len(silent), worst * 1000))
    time.sleep(REQUEST_DEADLINE_S + 1.5)
    still_open = 0
    for s in silent + [half]:
        s.settimeout(0.2)
        try:
            if s.recv(1) != b'':
                still_open += 1
        except socket.timeout:
            still_open += 1
        except OSError:
            pass
        s.close()
    if still_open:
        fail("%d connections that never finished a handshake still open %d s after they connected"
             % (still_open, REQUEST_DEADLINE_S + 1.5))
    after = parse_metrics(agent.get('/metrics'))
    cut = (total(after, 'vigil_agent_http_rejected_total', reason='deadline')
           + total(after, 'vigil_agent_http_rejected_total', reason='cap')
           - total(before, 'vigil_agent_http_rejected_total', reason='deadline')
           - total(before, 'vigil_agent_http_rejected_total', reason='cap'))
    if cut < len(silent) + 1:
        fail("the agent counted %d cut connections of %d that never finished a handshake" % (cut, len(silent) + 1))
    print("all %d closed; cut at the cap or the deadline: %d" % (len(silent) + 1, cut))


def rotation(agent, d, ca):
    old = agent.peer_fingerprint()
    if old != fingerprint(os.path.join(d, 'server.crt')):
        fail("the handshake does not present server.crt")
    pid = agent.proc.pid
    new_key, new_crt = issue(os.path.join(d, 'next'), 'vigil-agent-rotated', ca,
                             'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
    # As a Secret volume changes: each file replaced whole (rename), key first.
    for src, dst in ((new_key, 'server.key'), (new_crt, 'server.crt')):
        shutil.copy(src, os.path.join(d, dst + '.tmp'))
        os.rename(os.path.join(d, dst + '.tmp'), os.path.join(d, dst))
    now = agent.peer_fingerprint()
    if now != fingerprint(new_crt) or now == old:
        fail("after the rotation the handshake presents %s, not the new certificate %s" % (now, fingerprint(new_crt)))
    if agent.proc.poll() is not None or agent.proc.pid != pid:
        fail("the agent did not keep running through the rotation")
    print("rotated: the next handshake presented the new certificate (sha256 %s…), same pid %d" % (now[:16], pid))
    # A key that is not the certificate's: the last good pair stays in service, the failure counted.
    shutil.copy(os.path.join(d, 'client.key'), os.path.join(d, 'server.key.tmp'))
    os.rename(os.path.join(d, 'server.key.tmp'), os.path.join(d, 'server.key'))
    if agent.peer_fingerprint() != now:
        fail("a mismatched key file replaced the certificate in service")
    samples = parse_metrics(agent.get('/metrics'))
    ok = total(samples, 'vigil_agent_web_config_reloads_total', result='success')
    bad = total(samples, 'vigil_agent_web_config_reloads_total', result='failure')
    last = total(samples, 'vigil_agent_web_config_last_reload_successful')
    if (ok, bad, last) != (2, 1, 0):
        fail("reloads: %d successful, %d failed, last successful %d; expected 2, 1, 0" % (ok, bad, last))
    if 'key values mismatch' not in agent.log_text():
        fail("the failed reload is not in the agent's log: " + agent.log_text())
    print("a mismatched key: the rotated certificate stayed in service; reloads success=2 failure=1, logged")


def main():
    require_root()
    if len(sys.argv) != 2:
        fail(__doc__)
    binary = sys.argv[1]
    d = tempfile.mkdtemp(prefix='vigil-web-config-')
    os.mkdir(os.path.join(d, 'next'))
    try:
        ca = issue(d, 'ca', None, None)
        issue(d, 'server', ca, 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
        client_key, client_crt = issue(d, 'client', ca, 'extendedKeyUsage=clientAuth\n')
        client = {'ca': ca[1], 'crt': client_crt, 'key': client_key}
        web = os.path.join(d, 'web.yml')
        with open(web, 'w') as f:
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
                    "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
                    "basic_auth_users:\n  dave: %s\n" % DAVE_HASH)
        with TlsAgent(binary, web, client) as agent:
            with agent.request('/metrics', auth='ZGF2ZTpkYXZlMTIz') as r:
                text = r.read().decode()
                if r.headers.get('X-Content-Type-Options') != 'nosniff':
                    fail("the configured header is missing: %s" % dict(r.headers))
            promtool_check_text(text)
            try:
                agent.request('/metrics', auth='ZGF2ZTpkYXZlMTIzNA==')  # dave:dave1234
                fail("a wrong password was served /metrics")
            except urllib.error.HTTPError as e:
                if e.code != 401 or e.headers.get('WWW-Authenticate') != 'Basic':
                    fail("a wrong password: %d %s" % (e.code, dict(e.headers)))
            prometheus_checks(agent, d, client)
            slow_tls_clients(agent)
            rotation(agent, d, ca)
            samples = parse_metrics(agent.get('/metrics'))
            for reason in ('tls_handshake', 'not_tls'):
                if total(samples, 'vigil_agent_http_rejected_total', reason=reason) < 1:
                    fail("no connection counted as rejected{reason=%r}" % reason)
            if total(samples, 'vigil_agent_http_requests_total', code='401') < 1:
                fail("no 401 counted")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("PASS")


if __name__ == '__main__':
    main()
