#!/usr/bin/env python3
"""The fleet over a long history (bench/fleet/history.sh), for what the live benchmark (run.py, a
few minutes of data) cannot measure: each dashboard panel's query time over the ranges a dashboard
is opened with (1 h, 6 h, 24 h), and bytes per sample once the TSDBs have merged. The history is
backfilled with each engine's own tools, from the same simulated nodes, steps one at a time
(sources below as of the installed versions: Prometheus v2.42.0, VictoriaMetrics v1.79.5):

1. Samples: simulate.py's Recording and Node (a `gpu` fault on node N/7 and a `tcp` one on N/2,
   half-way), each node's node.render(t) every --interval s up to now, with a scraper's labels
   (job, instance, node, cluster) and `up` 1, as OpenMetrics (timestamps in seconds), one file per 2 h block range or
   part of one at a time. promtool reads a file from an mmap (cmd/promtool/tsdb.go: a file, not a
   pipe), parses it once for its time range and once per block range (backfill.go); its parser
   (model/textparse/openmetricsparse.go) wants `# EOF` last and no blank line, does not check TYPE
   against names, and only series lines are kept: no HELP/TYPE. VictoriaMetrics gets the same file
   POSTed to /api/v1/import/prometheus (streamed: app/vminsert/prometheusimport/request_handler.go);
   its parser reads a timestamp below 2^31 as seconds (lib/protoparser/prometheus/parser.go).
2. Rules: run.py's (render_rules(rule_overrides(interval))) by `promtool tsdb create-blocks-from
   rules` against Prometheus and by vmalert -replay.* against VictoriaMetrics, both as range
   queries over the past: a rule sees another's record only once it is stored, so the rules run in
   levels (a rule after the records, and ALERTS, it reads), each stored before the next (blocks
   moved into Prometheus' data dir and Prometheus restarted; VictoriaMetrics' force_flush).
   promtool takes every rule for a recording rule (cmd/promtool/rules.go importAll), so it gets the
   recording rules only: no ALERTS in Prometheus. vmalert replays alerting rules too (ALERTS,
   ALERTS_FOR_STATE: app/vmalert/replay.go, alerting.go ExecRange), at -datasource.queryStep (5 m
   by default: app/vmalert/datasource/init.go, vm_prom_api.go), set to the interval.
3. Merge: Prometheus, restarted with its default block ranges, compacts at its first minutely
   cycle (tsdb/db.go run; overlapping blocks, then complete 6 h and 18 h ranges but not the newest
   block: tsdb/compact.go plan), done when the second is triggered. VictoriaMetrics'
   /internal/force_merge runs in the background, logs its end (app/vmstorage/main.go) and merges
   nothing while other merges run (lib/storage/partition.go ForceMergeAllParts): called once
   vm_active_merges is 0. Bytes per sample: chunk files / numSamples of Prometheus' blocks,
   vm_data_size_bytes / vm_rows of VictoriaMetrics' storage parts (as measure.py), index apart.
   No noise is added (a float parse and format per sample, and no model of it at hand): gauges
   constant, counters linear, timestamps exact, so these are lower bounds for such series.
4. Panels: every target of the four dashboards dashboards.py checks, as range queries ending at
   the history's end with Grafana's step (range / 1,000 points, at least the interval) and
   $__rate_interval (max(4 x interval, step + interval)); each expression once per engine and
   range, VictoriaMetrics with -search.disableCache. Both engines' query guards are raised
   (samples per query, duration): the times are the engines', not refusals.
Counted by what each engine returns through its query API (count_over_time over the whole history,
summed; the series found there, counted), not by what it says it ingested: after the import every
sample and series written, after the rules every record sample the backfill wrote (promtool's
blocks, vmalert's "Imported" count), after the merge all of them; any difference fails the run.
usage: history.py [--nodes 40] [--gpus 8] [--hours 24] [--interval 15] [--table-out FILE]"""
import argparse
import contextlib
import datetime
import glob
import http.client
import itertools
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml

from vigil_harness.dashboard_queries import query_dashboards, substitute
from vigil_harness.fail import fail
from vigil_harness.ports import free_port
from vigil_harness.stack import http_get, render_rules
from vigil_harness.wait import wait_for

import dashboards
from measure import metrics, pick, proc, report
from pipeline import Pipeline, die_with_parent, rule_overrides
from simulate import Node, Recording, clusters_for

HERE = os.path.dirname(os.path.abspath(__file__))

RANGES_H = (1, 6, 24)
MAX_DATA_POINTS = 1000  # a wide Grafana panel
MAX_FILE = 4 << 30  # one window of OpenMetrics text on disk at a time
BLOCK = 7200  # promtool's and Prometheus' smallest block range: a window is it or a part of it
DASHBOARDS = ('vigil-fleet', 'vigil-gpu', 'vigil-nccl-tcp', 'vigil-agent')
ENGINES = dashboards.ENGINES
NAME = r'(?<![A-Za-z0-9_:])%s(?![A-Za-z0-9_:])'


class Engines(Pipeline):
    """VictoriaMetrics and Prometheus in a temp dir, with the Pipeline's process helpers."""

    def __init__(self, days, interval):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.dir = tempfile.mkdtemp(prefix='vigil-history-')
        self.procs, self.interval, self.days = {}, interval, days
        self.ports = {'vm': free_port(), 'prom': free_port()}
        with open(self.path('prometheus.yml'), 'w') as f:
            yaml.safe_dump({'global': {}}, f)
        try:
            self.start('victoria-metrics', ['victoria-metrics', '-storageDataPath=' + self.path('vm'),
                                            '-retentionPeriod=%dd' % days, '-httpListenAddr=127.0.0.1:%d' % self.ports['vm'],
                                            '-search.latencyOffset=%ds' % min(interval, 5), '-search.disableCache',
                                            '-search.maxUniqueTimeseries=100000000', '-search.maxSamplesPerQuery=1000000000000',
                                            '-search.maxQueryDuration=10m'])
            wait_for('victoria-metrics ready', lambda: self.ready('victoria-metrics', '/health'), 60)
        except BaseException:
            self.stop()
            raise

    def path(self, *a):
        return os.path.join(self.dir, *a)

    def start_prometheus(self, backfill):
        """While backfilling, 2 h blocks only: no compaction competing with the rule queries."""
        self.start('prometheus', ['prometheus', '--config.file=' + self.path('prometheus.yml'),
                                  '--storage.tsdb.path=' + self.path('prom'), '--storage.tsdb.retention.time=%dd' % self.days,
                                  '--web.listen-address=127.0.0.1:%d' % self.ports['prom'], '--log.level=warn',
                                  '--query.max-samples=1000000000', '--query.timeout=10m']
                   + (['--storage.tsdb.max-block-duration=2h'] if backfill else []))
        wait_for('prometheus ready', lambda: self.ready('prometheus', '/-/ready'), 600)

    def stop_one(self, name):
        p, log = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        p.wait()
        log.close()

    def stop(self):
        for name in list(self.procs):
            self.stop_one(name)
        subprocess.run(['rm', '-rf', self.dir])

    def scrape(self, name):
        return metrics(http_get(self.url(name, '/metrics'), timeout=60))

    def vm(self, path):
        return http_get(self.url('victoria-metrics', path), timeout=600)

    def post(self, path):
        """The file to VictoriaMetrics' Prometheus-text import, streamed."""
        conn = http.client.HTTPConnection('127.0.0.1', self.ports['vm'], timeout=3600, blocksize=1 << 20)
        with open(path, 'rb') as f:
            conn.request('POST', '/api/v1/import/prometheus', body=f, headers={'Content-Length': str(os.path.getsize(path))})
            r = conn.getresponse()
            body = r.read().decode(errors='replace')
        conn.close()
        if r.status // 100 != 2:
            fail("VictoriaMetrics import of %s: HTTP %d: %s" % (path, r.status, body[:500]))

    def instant(self, name, expr, at):
        return json.loads(http_get(self.url(name, '/api/v1/query?' + urllib.parse.urlencode(
            {'query': expr, 'time': at})), timeout=600))['data']['result']


class Writer:
    """Each node's exposition at t as OpenMetrics lines: its scrape target's labels added (cached
    per series text: the costly part) and the timestamp."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.targets = [('cluster="%s",instance="%s",job="vigil-agent",node="%s"' % (n.cluster, n.instance, n.name)).encode()
                        for n in nodes]
        self.series = [{} for _ in nodes]
        self.samples = 0

    def prefix(self, i, series):
        s = self.series[i].get(series)
        if s is None:
            t = self.targets[i]
            s = self.series[i][series] = (series[:-1] + b',' + t + b'} ') if series.endswith(b'}') else (series + b'{' + t + b'} ')
        return s

    def lines(self, i, t, suffix):
        out = [self.prefix(i, b'up') + b'1' + suffix]
        for line in self.nodes[i].render(t).split(b'\n'):
            if line and line[0] != 35:  # '#': HELP and TYPE
                series, _, value = line.rpartition(b' ')
                out.append(self.prefix(i, series) + value + suffix)
        self.samples += len(out)
        return b''.join(out)


def run(what, argv):
    r = subprocess.run(argv, capture_output=True, text=True, preexec_fn=die_with_parent)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (what, r.returncode, (r.stdout + r.stderr)[-3000:]))
    return r.stdout + r.stderr


def blocks(folder):
    """[(meta, chunk bytes, index bytes)] of the TSDB blocks in FOLDER (not those compacted away)."""
    out = []
    for meta in sorted(glob.glob(os.path.join(folder, '*', 'meta.json'))):
        m, d = json.load(open(meta)), os.path.dirname(meta)
        if not m.get('compaction', {}).get('deletable'):
            out.append((m, sum(os.path.getsize(c) for c in glob.glob(os.path.join(d, 'chunks', '*'))),
                        os.path.getsize(os.path.join(d, 'index'))))
    return out


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def import_history(eng, writer, t0, t_end, interval):
    """Writes the history window by window, each file to promtool then to VictoriaMetrics;
    returns {'generation'|engine: seconds}."""
    per_step = len(writer.nodes) * len(writer.lines(0, 0, b' %d\n' % t0))
    writer.samples = 0
    window = next((BLOCK // k for k in (1, 2, 4, 6, 8, 12, 24) if per_step * BLOCK / k / interval <= MAX_FILE), BLOCK // 24)
    windows = [list(ts) for _, ts in itertools.groupby(range(t0, t_end + 1, interval), key=lambda t: t // window)]
    print("%d windows of up to %d s, about %.0f MiB of text each; work dir %s" % (
        len(windows), window, per_step * window / interval / 2**20, eng.dir), flush=True)
    took, started, path = dict.fromkeys(('generation',) + ENGINES, 0.0), time.time(), eng.path('window.om')
    for k, ts in enumerate(windows):
        t, before = time.time(), writer.samples
        with open(path, 'wb', 1 << 24) as f:
            for tt in ts:
                suffix = b' %d\n' % tt
                for j in range(len(writer.nodes)):
                    f.write(writer.lines(j, tt - t0, suffix))
            f.write(b'# EOF\n')
        took['generation'] += time.time() - t
        t = time.time()
        run('promtool openmetrics', ['promtool', 'tsdb', 'create-blocks-from', 'openmetrics', '--quiet', path, eng.path('prom')])
        took['prometheus'] += time.time() - t
        t = time.time()
        eng.post(path)
        took['victoria-metrics'] += time.time() - t
        os.remove(path)
        print("window %d/%d: %d samples; so far generation %.0f s, promtool %.0f s, VictoriaMetrics %.0f s; about %.0f s left" % (
            k + 1, len(windows), writer.samples - before, took['generation'], took['prometheus'], took['victoria-metrics'],
            (time.time() - started) * (len(windows) - k - 1) / (k + 1)), flush=True)
    eng.vm('/internal/force_flush')
    return took


def count_back(eng, engine, names, t0, t_end):
    """(samples, series) of the metrics NAMES that ENGINE returns through its query API over the
    history: count_over_time of each name at the history's end, over a window reaching past its
    start (nothing is older), summed, and the series it returns, counted. What can be read, not
    what the engine says it ingested. One name a query: count_over_time drops the name, and series
    of two names would collide."""
    window = '%ds' % (t_end - t0 + eng.interval)
    samples = series = 0
    for name in sorted(names):
        res = eng.instant(engine, 'count_over_time(%s[%s])' % (name, window), t_end)
        samples += sum(int(float(r['value'][1])) for r in res)
        series += len(res)
    return samples, series


def query_back(eng, names, t0, t_end, samples, series):
    """Fails unless each engine returns every sample and every series written."""
    for e in ENGINES:
        got = count_back(eng, e, names, t0, t_end)
        print("  %s returns %d samples of %d series" % (e, got[0], got[1]), flush=True)
        if got != (samples, series):
            fail("%s returns %d samples of %d series over the history; %d samples of %d series were written" % (
                e, got[0], got[1], samples, series))


def levels(groups, alerts):
    """The rule file as [groups of each level]: level k holds the rules that read records (and
    ALERTS, if ALERTS=True: then alerting rules are in too) of levels below k only."""
    rules = [r for g in groups for r in g['rules'] if alerts or 'record' in r]
    makes, level = {}, {}
    for r in rules:
        makes.setdefault(r.get('record', 'ALERTS'), []).append(r)

    def of(rule):
        if id(rule) not in level:
            deps = [d for name, by in makes.items() if re.search(NAME % re.escape(name), rule['expr']) for d in by]
            level[id(rule)] = 1 + max([of(d) for d in deps if d is not rule] or [-1])
        return level[id(rule)]
    for r in rules:
        of(r)
    return [[dict(g, rules=[r for r in g['rules'] if level.get(id(r)) == k]) for g in groups
             if any(level.get(id(r)) == k for r in g['rules'])] for k in range(max(level.values()) + 1)]


def backfill_rules(eng, groups, t0, t_end, interval):
    """Each level to each engine; returns {engine: (seconds, record samples written)}."""
    url = lambda name: 'http://127.0.0.1:%d' % eng.ports[name]  # noqa: E731
    out = {}
    for engine, lvs in (('prometheus', levels(groups, alerts=False)), ('victoria-metrics', levels(groups, alerts=True))):
        t, written = time.time(), 0
        for k, lv in enumerate(lvs):
            path = eng.path('rules-%s-%d.yaml' % (engine, k))
            with open(path, 'w') as f:
                yaml.safe_dump({'groups': lv}, f)
            if engine == 'prometheus':
                blocks_dir = eng.path('rules-%d' % k)
                run('promtool rules, level %d' % k, ['promtool', 'tsdb', 'create-blocks-from', 'rules', '--start=%d' % t0,
                                                     '--end=%d' % t_end, '--url=' + url('prom'), '--output-dir=' + blocks_dir,
                                                     '--eval-interval=%ds' % interval, path])
                written += sum(m['stats']['numSamples'] for m, _, _ in blocks(blocks_dir))
                eng.stop_one('prometheus')
                for b in os.listdir(blocks_dir):
                    os.rename(os.path.join(blocks_dir, b), eng.path('prom', b))
                eng.start_prometheus(backfill=k < len(lvs) - 1)
            else:
                # rulesDelay 0: a level reads lower levels only, flushed (vmalert's exit, force_flush)
                # before it. queryStep: 5 m by default, and the replay's step too (app/vmalert/
                # datasource/init.go, vm_prom_api.go): one record sample per 5 min, `for` never met.
                log = run('vmalert replay, level %d' % k, [
                    'vmalert', '-rule=' + path, '-datasource.url=' + url('vm'), '-datasource.queryStep=%ds' % interval,
                    '-remoteWrite.url=' + url('vm'), '-evaluationInterval=%ds' % interval, '-replay.timeFrom=' + rfc3339(t0),
                    '-replay.timeTo=' + rfc3339(t_end), '-replay.rulesDelay=0s', '-replay.disableProgressBar', '-disableAlertgroupLabel'])
                eng.vm('/internal/force_flush')
                written += int(re.search(r'Imported (\d+) samples', log).group(1))
            print("  %s: rules level %d (%d rules) stored, %.0f s so far" % (
                engine, k, sum(len(g['rules']) for g in lv), time.time() - t), flush=True)
        out[engine] = (time.time() - t, written)
    return out


def merge(eng):
    """Waits for both engines' merges; returns (Prometheus compaction s, VictoriaMetrics force merge s)."""
    wait_for('VictoriaMetrics merges idle', lambda: pick(eng.scrape('victoria-metrics'), 'vm_active_merges') == 0, 3600, step=2)
    eng.vm('/internal/force_merge')
    wait_for('Prometheus compaction', lambda: pick(eng.scrape('prometheus'), 'prometheus_tsdb_compactions_triggered_total') >= 2,
             3600, step=5)
    done = r'forced merge for partition_prefix="" has been successfully finished in ([0-9.]+) seconds'
    vm_s = float(wait_for('VictoriaMetrics force merge', lambda: re.search(done, eng.log('victoria-metrics')), 3600, step=2).group(1))
    if 'error in forced merge' in eng.log('victoria-metrics'):
        fail("VictoriaMetrics force merge: %s" % eng.log('victoria-metrics'))
    return pick(eng.scrape('prometheus'), 'prometheus_tsdb_compaction_duration_seconds_sum'), vm_s


def panel_tables(eng, t_end, hours, interval):
    """One markdown table per range, each panel's query time and targets with data per engine;
    and {(dashboard, panel, expr): [(engine, hours)] without data}."""
    paths = [os.path.join(dashboards.GENERATED, uid + '.json') for uid in DASHBOARDS]
    text, empty = [], {}
    for r in [r for r in RANGES_H if r <= hours]:
        step = max(interval, math.ceil(r * 3600 / MAX_DATA_POINTS))
        variables = {'$cluster': '.*', '$node': '.*', '$namespace': '.*', '$pod': '.*',
                     '$__rate_interval': '%ds' % max(4 * interval, step + interval)}
        got = {}
        for engine in ENGINES:
            del dashboards.TIMES[:]
            rendered, _ = query_dashboards(dashboards.query_range(eng, engine), paths, t_end - r * 3600, t_end, step, variables)
            took = {}
            for _, expr, s in dashboards.TIMES:
                took.setdefault(expr, s)  # the first run of an expression a dashboard repeats
            got[engine] = (rendered, took)
            print("  panels over %d h queried in %s" % (r, engine), flush=True)
        text += ['', 'Panel query times over the last %d h (step %d s, $__rate_interval %s):' % (r, step, variables['$__rate_interval']),
                 '', '| dashboard / panel | Prometheus ms | VictoriaMetrics ms | targets with data (Prometheus, VictoriaMetrics) |',
                 '|---|---|---|---|']
        for uid in DASHBOARDS:
            total = [0.0, 0.0, 0, 0, 0]
            for (p, tp), (_, tv) in zip(*[got[e][0][uid][1] for e in ENGINES]):
                ms = [1000 * sum(got[e][1][substitute(t['expr'], variables)] for t in p['targets']) for e in ENGINES]
                data = [sum(1 for _, res in targets if res) for targets in (tp, tv)]
                total = [a + b for a, b in zip(total, ms + data + [len(tp)])]
                text.append('| %s / %s | %.1f | %.1f | %d/%d, %d/%d |' % (uid, p['title'], ms[0], ms[1], data[0], len(tp), data[1], len(tp)))
                for e, targets in zip(ENGINES, (tp, tv)):
                    for x, (_, res) in zip(p['targets'], targets):
                        if not res:
                            empty.setdefault((uid, p['title'], x['expr']), []).append((e, r))
            text.append('| **%s, all panels one after another** | **%.1f** | **%.1f** | %d/%d, %d/%d |' % (
                uid, total[0], total[1], total[2], total[4], total[3], total[4]))
    return text, empty


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=40)
    ap.add_argument('--gpus', type=int, default=8)
    ap.add_argument('--hours', type=int, default=24)
    ap.add_argument('--interval', type=int, default=15, help='seconds between samples and between rule evaluations')
    ap.add_argument('--table-out')
    args = ap.parse_args()
    n, i, hours = args.nodes, args.interval, args.hours
    if n < 1 or hours < 1 or i < 1:
        fail("--nodes, --hours and --interval: at least 1")
    command = 'command: ' + ' '.join(shlex.quote(a) for a in sys.argv)
    print(command, flush=True)
    rec = Recording(os.path.join(HERE, 'recordings'))
    nodes = [Node(k, n, args.gpus, clusters_for(n), rec) for k in range(n)]
    t_end = int(time.time()) // i * i
    t0 = t_end - hours * 3600
    # Half-way through: a gpu fault, and a tcp one (the agent exports a process's TCP series only
    # once its connections retransmit: without it the TCP panels would read nothing).
    faults = [{'node': n // 7, 'kind': 'gpu', 'start': hours * 1800, 'end': hours * 1800 + 40 * i},
              {'node': n // 2, 'kind': 'tcp', 'start': hours * 1800, 'end': hours * 1800 + 40 * i}]
    for f in faults:
        nodes[f['node']].faults.append(f)
        if f['kind'] == 'tcp':
            nodes[f['node']].stalls.append((f, nodes[f['node']].peer))
    said = ', '.join('%s on node %d' % (f['kind'], f['node']) for f in faults)
    writer = Writer(nodes)
    print("history: %d nodes x %d GPUs, %d h every %d s (%s .. %s), faults %s at +%d..+%d s" % (
        n, args.gpus, hours, i, rfc3339(t0), rfc3339(t_end), said, faults[0]['start'], faults[0]['end']), flush=True)
    with Engines(hours // 24 + 31, i) as eng:
        took = import_history(eng, writer, t0, t_end, i)
        samples, series = writer.samples, sum(len(s) for s in writer.series)
        raw_names = {k.split(b'{')[0].decode() for s in writer.series for k in s}
        eng.start_prometheus(backfill=True)
        query_back(eng, raw_names, t0, t_end, samples, series)
        print("imported: %d samples of %d series, all queried back from both engines; rule backfill:" % (samples, series), flush=True)
        render_rules(eng.path('rules.yaml'), rule_overrides(i))
        groups = yaml.safe_load(open(eng.path('rules.yaml')))['groups']
        rules = backfill_rules(eng, groups, t0, t_end, i)
        # Every record sample the backfill wrote reads back (and vmalert's ALERTS and ALERTS_FOR_STATE).
        record_names = {r['record'] for g in groups for r in g['rules'] if 'record' in r} | {'ALERTS', 'ALERTS_FOR_STATE'}
        for e in ENGINES:
            got = count_back(eng, e, record_names, t0, t_end)[0]
            if got != rules[e][1]:
                fail("%s returns %d record samples over the history; its backfill wrote %d" % (e, got, rules[e][1]))
        print("merging: VictoriaMetrics force_merge, Prometheus compaction (its first cycle a minute after its start)", flush=True)
        compaction, force_merge = merge(eng)
        for e in ENGINES:  # and nothing lost in the merge
            got = count_back(eng, e, raw_names | record_names, t0, t_end)[0]
            if got != samples + rules[e][1]:
                fail("%s returns %d samples after merging; %d raw and %d record samples were written" % (
                    e, got, samples, rules[e][1]))
        vmm, pb = eng.scrape('victoria-metrics'), blocks(eng.path('prom'))
        size = {'prometheus': [sum(x) for x in zip(*[(m['stats']['numSamples'], c, ix) for m, c, ix in pb])],
                'victoria-metrics': [pick(vmm, 'vm_rows', 'storage/'), pick(vmm, 'vm_data_size_bytes', 'storage/'),
                                     pick(vmm, 'vm_data_size_bytes', 'indexdb')]}
        records = {e: sum(int(r['value'][1]) for r in eng.instant(e, 'count({__name__=~".+:.+"})', t_end)) for e in ENGINES}
        fired = {e: len(eng.instant(e, 'count by (alertname) (last_over_time(ALERTS{alertstate="firing"}[%ds]))' % (hours * 3600), t_end))
                 for e in ENGINES}
        print("querying the panels", flush=True)
        panels, empty = panel_tables(eng, t_end, hours, i)
        rss = {e: proc(eng.procs[e][0].pid) for e in ENGINES}
    both = lambda f: ' | '.join(f(e) for e in ENGINES)  # noqa: E731
    per_s = lambda s: '%.0f s, %.0f samples/s' % (s, samples / s if s else float('nan'))  # noqa: E731
    rows = [command, '', 'fleet history: %d nodes x %d GPU processes, %d h every %d s, backfilled; faults half-way for %d s: %s' % (
        n, args.gpus, hours, i, 40 * i, said), '',
        '| what | Prometheus 2.42 | VictoriaMetrics 1.79 |', '|---|---|---|',
        '| series generated (incl. up), samples generated | %d, %d | same |' % (series, samples),
        '| generation: render, target labels, OpenMetrics text (one file read by both) | %s | same |' % per_s(took['generation']),
        '| import (promtool create-blocks-from openmetrics; POST /api/v1/import/prometheus) | %s |' % both(lambda e: per_s(took[e])),
        '| rule backfill, levels one after another (promtool: recording rules only; vmalert -replay: alerting too) | %s |' % both(
            lambda e: '%.0f s' % rules[e][0]),
        '| record samples written (all queried back); record series at the end; alert names that fired (ALERTS) | %s |' % both(
            lambda e: '%d; %d; %d' % (rules[e][1], records[e], fired[e])),
        '| merge: Prometheus compaction (sum of durations), VictoriaMetrics force_merge | %.0f s; blocks after: %s | %.0f s; parts after: %d small, %d big |' % (
            compaction, ', '.join('%.1f h' % ((m['maxTime'] - m['minTime']) / 3.6e6) for m, _, _ in pb), force_merge,
            pick(vmm, 'vm_parts', 'storage/small'), pick(vmm, 'vm_parts', 'storage/big')),
        '| samples stored (raw + records) | %s |' % both(lambda e: '%d' % size[e][0]),
        '| bytes per sample after merge: data; with the index | %s |' % both(
            lambda e: '%.3f; %.3f' % (size[e][1] / size[e][0], (size[e][1] + size[e][2]) / size[e][0])),
        '| data, index on disk | %s |' % both(lambda e: '%.1f MiB, %.1f MiB' % (size[e][1] / 2**20, size[e][2] / 2**20)),
        '| RSS after the panel queries (peak: Prometheus since its last restart, VictoriaMetrics since its start) | %s |' % both(
            lambda e: '%.0f MiB (peak %.0f)' % rss[e][:2]),
        '', 'Simulated values (gauges constant, counters linear, exact timestamps) compress better than a real fleet\'s: bytes '
        'per sample here are a lower bound for such series. Prometheus has no ALERTS: promtool backfills no alerting rule, so '
        'its `vigil_fleet:alerts_firing:count` is the rule\'s 0 fallback. VictoriaMetrics ran with -search.disableCache; each '
        'expression ran once per engine and range.'] + panels
    rows += ['', 'Panel targets without data: %d' % len(empty)] + ['- %s / %s: `%s`: %s' % (uid, panel, expr, '; '.join(
        '%s %s' % (e, ', '.join('%d h' % r for x, r in where if x == e)) for e in ENGINES if any(x == e for x, _ in where)))
        for (uid, panel, expr), where in empty.items()]
    report('\n'.join(rows), args.table_out)
    print("ok")


if __name__ == '__main__':
    main()
