"""The fleet pipeline on loopback, every part a real server: the simulator (simulate.py), two vmagent
shards remote-writing into a single-node VictoriaMetrics, vmalert evaluating Vigil's rules there
and notifying a real Alertmanager (the shipped routing, receivers at a webhook: tests/e2e/alerting/
stack.py), and a Prometheus scraping every node directly as the baseline (same rules, no
Alertmanager: the pages come from vmalert alone). Every child gets SIGKILL when this process dies
(PR_SET_PDEATHSIG) and is killed with its process group at stop()."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse

import yaml

from vigil_harness.fail import fail
from vigil_harness.ports import free_port
from vigil_harness.stack import Receiver, alertmanager_config, http_get, render_rules
from vigil_harness.wait import wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))

LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def die_with_parent():
    os.setpgid(0, 0)
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def rule_overrides(interval, agent_gone_window=None):
    """The mixin's windows scaled to the scrape interval I (as the alerting test shortens them for
    its 1 s scrapes): enough samples per window for increase() in both engines. The correlated
    window is longer: its counter appears once, at the abort, and counts as new only while it is
    younger than the window, and VictoriaMetrics shows a new series some 3 intervals later than
    Prometheus does (docs/scale.md), which would leave too little of a 4-interval window."""
    s = lambda k: '%ds' % (k * interval)  # noqa: E731
    return {'graphFailuresWindow': s(4), 'p1For': s(2), 'timeoutRiskFor': s(1),
            'correlatedTimeoutWindow': s(6), 'correlatedFor': s(1), 'agentDownFor': s(2),
            'agentGoneWindow': agent_gone_window or s(40), 'fleetHistogramInterval': s(1),
            'rankStuckWaitSeconds': 2 * interval, 'rankStuckFor': s(1), 'rankGoneWindow': s(20)}


class Pipeline:
    def __init__(self, nodes, gpus, interval, faults, overrides, clusters=0):
        # SIGTERM (a test timeout, ^C's cousin) unwinds through stop() instead of dying in place.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.dir = tempfile.mkdtemp(prefix='vigil-fleet-')
        self.procs, self.interval = {}, interval
        self.receiver = Receiver()
        p = self.ports = {k: free_port() for k in ('sim', 'am', 'vm', 'vmagent0', 'vmagent1', 'vmalert', 'prom')}
        d = lambda *a: os.path.join(self.dir, *a)  # noqa: E731
        try:
            os.mkdir(d('secrets'))
            alertmanager_config(d('alertmanager.yml'), self.receiver, d('secrets'))
            render_rules(d('rules.yaml'), overrides)
            sd = d('targets.json')
            scrape = {'global': {'scrape_interval': '%ds' % interval, 'scrape_timeout': '%ds' % min(interval, 10)},
                      'scrape_configs': [{'job_name': 'vigil-agent', 'file_sd_configs': [{'files': [sd]}]}]}
            with open(d('scrape.yml'), 'w') as f:
                yaml.safe_dump(scrape, f)
            with open(d('prometheus.yml'), 'w') as f:
                yaml.safe_dump(dict(scrape, rule_files=[d('rules.yaml')],
                                    **{'global': dict(scrape['global'], evaluation_interval='%ds' % interval)}), f)
            # vmalert reads the rules with MetricsQL's parser: the shipped file too, as it is.
            for rules in (os.path.join(ROOT, 'alerts', 'generated', 'vigil.rules.yaml'), d('rules.yaml')):
                r = subprocess.run(['vmalert', '-dryRun', '-rule=' + rules], capture_output=True, text=True)
                if r.returncode != 0:
                    fail("vmalert does not load %s: %s" % (rules, r.stderr[-2000:]))
            self.start('simulator', [sys.executable, os.path.join(HERE, 'simulate.py'), '--nodes', str(nodes),
                                     '--gpus', str(gpus), '--clusters', str(clusters), '--port', str(p['sim']), '--sd-file', sd,
                                     '--faults', json.dumps(faults)], stdout=subprocess.PIPE)
            line = self.procs['simulator'][0].stdout.readline()
            if not line.startswith('ready'):
                fail("simulator did not start: %s" % self.log('simulator'))
            self.t0 = float(line.split('t0=')[1].split()[0])
            self.series_per_node = int(line.split('series_per_node=')[1])
            self.start('alertmanager', ['prometheus-alertmanager', '--config.file=' + d('alertmanager.yml'),
                                        '--storage.path=' + d('am'), '--web.listen-address=127.0.0.1:%d' % p['am'],
                                        '--cluster.listen-address='])
            # latencyOffset: VictoriaMetrics hides samples younger than this from queries (30 s by
            # default, against late remote writes); one interval keeps alert latency comparable.
            self.start('victoria-metrics', ['victoria-metrics', '-storageDataPath=' + d('vm'), '-retentionPeriod=1d',
                                            '-httpListenAddr=127.0.0.1:%d' % p['vm'],
                                            '-search.latencyOffset=%ds' % min(interval, 5), '-loggerLevel=WARN',
                                            # 300,000 by default: the allocation-size histogram record
                                            # (vigil-fleet-histograms) reads 336 series per node, past
                                            # it from about N = 900 on (HTTP 422 to vmalert and queries).
                                            '-search.maxUniqueTimeseries=100000000'])
            for i in (0, 1):
                self.start('vmagent%d' % i, ['vmagent', '-promscrape.config=' + d('scrape.yml'),
                                             '-promscrape.cluster.membersCount=2', '-promscrape.cluster.memberNum=%d' % i,
                                             '-promscrape.fileSDCheckInterval=1s', '-remoteWrite.tmpDataPath=' + d('vmagent%d' % i),
                                             '-remoteWrite.url=http://127.0.0.1:%d/api/v1/write' % p['vm'],
                                             '-httpListenAddr=127.0.0.1:%d' % p['vmagent%d' % i], '-loggerLevel=WARN'])
            # vmalert labels every alert with its group (alertgroup) unless told not to; Prometheus
            # does not, and the pages must carry the same labels from either engine.
            self.start('vmalert', ['vmalert', '-rule=' + d('rules.yaml'), '-evaluationInterval=%ds' % interval,
                                   '-disableAlertgroupLabel',
                                   '-datasource.url=http://127.0.0.1:%d' % p['vm'],
                                   '-remoteWrite.url=http://127.0.0.1:%d' % p['vm'],
                                   '-notifier.url=http://127.0.0.1:%d' % p['am'],
                                   '-httpListenAddr=127.0.0.1:%d' % p['vmalert'], '-loggerLevel=WARN'])
            self.start('prometheus', ['prometheus', '--config.file=' + d('prometheus.yml'), '--storage.tsdb.path=' + d('prom'),
                                      '--web.listen-address=127.0.0.1:%d' % p['prom'], '--log.level=warn'])
            for name, path in (('alertmanager', '/-/ready'), ('victoria-metrics', '/health'), ('vmagent0', '/health'),
                               ('vmagent1', '/health'), ('vmalert', '/health'), ('prometheus', '/-/ready')):
                wait_for(name + ' ready', lambda: self.ready(name, path), 60)
        except BaseException:
            self.stop()
            raise

    def start(self, name, argv, stdout=None):
        log = open(os.path.join(self.dir, name + '.log'), 'w')
        try:
            proc = subprocess.Popen(argv, stdout=stdout or log, stderr=log, text=True, preexec_fn=die_with_parent)
        except FileNotFoundError:
            fail("%s not installed (Debian packages victoria-metrics, prometheus, prometheus-alertmanager: "
                 "scripts/setup.sh)" % argv[0])
        self.procs[name] = (proc, log)

    def url(self, name, path):
        return 'http://127.0.0.1:%d%s' % (self.ports[{'victoria-metrics': 'vm', 'alertmanager': 'am',
                                                        'prometheus': 'prom'}.get(name, name)], path)

    def ready(self, name, path):
        self.check_alive()
        try:
            return http_get(self.url(name, path)) is not None
        except OSError:
            return False

    def check_alive(self):
        for name, (p, _) in self.procs.items():
            if p.poll() is not None:
                fail("%s exited %d: %s" % (name, p.returncode, self.log(name)))

    def log(self, name):
        with open(os.path.join(self.dir, name + '.log')) as f:
            return f.read()[-3000:]

    def now(self):
        """Seconds since the simulator started: the clock of the fault schedule."""
        return time.time() - self.t0

    def query(self, name, expr, at=None):
        """An instant query, now or AT seconds of the simulation clock (self.now())."""
        params = {'query': expr}
        if at is not None:
            params['time'] = '%.3f' % (self.t0 + at)
        try:
            body = json.loads(http_get(self.url(name, '/api/v1/query?' + urllib.parse.urlencode(params)), timeout=60))
        except urllib.error.HTTPError as e:
            fail("%s query %s: HTTP %d: %s" % (name, expr, e.code, e.read().decode(errors='replace')[:500]))
        if body['status'] != 'success':
            fail("%s query %s: %s" % (name, expr, body))
        return body['data']['result']

    def pids(self):
        return {name: p.pid for name, (p, _) in self.procs.items()}

    def stop(self):
        for name, (p, log) in self.procs.items():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for name, (p, log) in self.procs.items():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
        self.procs = {}
        self.receiver.stop()
        subprocess.run(['rm', '-rf', self.dir])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
