"""The monitoring stack on loopback: real Prometheus and Alertmanager in a temp dir on free ports,
the rules rendered from alerts/ with short windows, the shipped Alertmanager config with its
receivers pointed at a webhook receiver run by the test (the fleet benchmark's vmalert pipeline,
bench/fleet/pipeline.py, uses the same receiver, rules and config)."""
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from vigil_harness.fail import fail
from vigil_harness.ports import free_port
from vigil_harness.wait import wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Receiver:
    """Records every notification POSTed to it: (time, path, JSON body)."""

    def __init__(self):
        self.port = free_port()
        self.got = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
                with receiver.lock:
                    receiver.got.append((time.time(), self.path, json.loads(body or b'null')))
                self.send_response(200)
                self.send_header('Content-Length', '2')
                self.end_headers()
                self.wfile.write(b'{}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(('127.0.0.1', self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return 'http://127.0.0.1:%d%s' % (self.port, path)

    def notifications(self, path):
        with self.lock:
            return [(t, b) for t, p, b in self.got if p == path]

    def alerts(self, path, alertname, status):
        """Alerts of webhook notifications to PATH with that name and status, with arrival time."""
        return [(t, a) for t, b in self.notifications(path) for a in b['alerts']
                if a['labels'].get('alertname') == alertname and a['status'] == status]

    def stop(self):
        self.server.shutdown()


def render_rules(path, overrides):
    rules = subprocess.run(['jsonnet', '--tla-code', 'overrides=' + json.dumps(overrides),
                            os.path.join(ROOT, 'alerts', 'rules.jsonnet')],
                           check=True, capture_output=True, text=True).stdout
    with open(path, 'w') as f:
        yaml.safe_dump(json.loads(rules), f)
    subprocess.run(['promtool', 'check', 'rules', path], check=True, capture_output=True)


def alertmanager_config(path, receiver, secrets_dir):
    """deploy/alertmanager/alertmanager.yml with its routes, grouping and inhibitions unchanged;
    receivers point at RECEIVER (paths /pagerduty, /page, /ticket, /slack), timings are seconds."""
    cfg = yaml.safe_load(open(os.path.join(ROOT, 'deploy', 'alertmanager', 'alertmanager.yml')))
    for name, content in (('pagerduty-routing-key', 'e2e-routing-key'), ('slack-webhook-url', receiver.url('/slack'))):
        with open(os.path.join(secrets_dir, name), 'w') as f:
            f.write(content)
    for r in cfg['receivers']:
        for pd in r.get('pagerduty_configs', []):
            pd['url'] = receiver.url('/pagerduty')
            pd['routing_key_file'] = os.path.join(secrets_dir, 'pagerduty-routing-key')
        for sl in r.get('slack_configs', []):
            sl['api_url_file'] = os.path.join(secrets_dir, 'slack-webhook-url')
        for wh in r.get('webhook_configs', []):
            wh['url'] = receiver.url(urllib.parse.urlparse(wh['url']).path)
    for route in [cfg['route']] + cfg['route'].get('routes', []):
        for key, value in (('group_wait', '1s'), ('group_interval', '2s'), ('repeat_interval', '1h')):
            if key in route or route is cfg['route']:
                route[key] = value
    with open(path, 'w') as f:
        yaml.safe_dump(cfg, f)
    subprocess.run(['amtool', 'check-config', path], check=True, capture_output=True)


class Stack:
    """Prometheus (1 s scrapes and evaluations) and Alertmanager, both on loopback."""

    def __init__(self, scrape_configs, rule_overrides):
        self.dir = tempfile.mkdtemp(prefix='vigil-alerting-')
        self.procs = []
        self.receiver = Receiver()
        self.am_port, self.prom_port = free_port(), free_port()
        secrets = os.path.join(self.dir, 'secrets')
        os.mkdir(secrets)
        alertmanager_config(os.path.join(self.dir, 'alertmanager.yml'), self.receiver, secrets)
        render_rules(os.path.join(self.dir, 'rules.yaml'), rule_overrides)
        prom = {
            'global': {'scrape_interval': '1s', 'evaluation_interval': '1s', 'scrape_timeout': '1s'},
            'rule_files': [os.path.join(self.dir, 'rules.yaml')],
            'alerting': {'alertmanagers': [{'static_configs': [{'targets': ['127.0.0.1:%d' % self.am_port]}]}]},
            'scrape_configs': scrape_configs,
        }
        with open(os.path.join(self.dir, 'prometheus.yml'), 'w') as f:
            yaml.safe_dump(prom, f)
        self.start('alertmanager', ['prometheus-alertmanager',
                                    '--config.file=' + os.path.join(self.dir, 'alertmanager.yml'),
                                    '--storage.path=' + os.path.join(self.dir, 'am-data'),
                                    '--web.listen-address=127.0.0.1:%d' % self.am_port,
                                    '--cluster.listen-address='])
        self.start('prometheus', ['prometheus', '--config.file=' + os.path.join(self.dir, 'prometheus.yml'),
                                  '--storage.tsdb.path=' + os.path.join(self.dir, 'prom-data'),
                                  '--web.listen-address=127.0.0.1:%d' % self.prom_port])
        wait_for('alertmanager ready', lambda: self.ready('http://127.0.0.1:%d/-/ready' % self.am_port), 30)
        wait_for('prometheus ready', lambda: self.ready('http://127.0.0.1:%d/-/ready' % self.prom_port), 30)

    def start(self, name, argv):
        log = open(os.path.join(self.dir, name + '.log'), 'w')
        self.procs.append((name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)))

    def ready(self, url):
        for name, p in self.procs:
            if p.poll() is not None:
                fail("%s exited %d: %s" % (name, p.returncode, self.log(name)))
        try:
            return http_get(url) is not None
        except OSError:
            return False

    def log(self, name):
        with open(os.path.join(self.dir, name + '.log')) as f:
            return f.read()[-3000:]

    def query(self, expr, path='query', **params):
        q = urllib.parse.urlencode(dict(query=expr, **params))
        body = json.loads(http_get('http://127.0.0.1:%d/api/v1/%s?%s' % (self.prom_port, path, q)))
        if body['status'] != 'success':
            fail("query %s: %s" % (expr, body))
        return body['data']['result']

    def targets_up(self, jobs):
        up = {r['metric']['job']: r['value'][1] for r in self.query('up')}
        return all(up.get(j) == '1' for j in jobs)

    def stop(self):
        for name, p in reversed(self.procs):
            p.terminate()
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.receiver.stop()
        subprocess.run(['rm', '-rf', self.dir])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
