"""The panel-has-data check against the fleet simulation: every panel expression of
dashboards/generated/*.json, with the variables as Grafana expands "All", queried over the run
from the baseline Prometheus and from VictoriaMetrics' Prometheus API (the recording rules
evaluated there by Prometheus and by vmalert respectively); optionally each dashboard drawn to a
PNG per panel type (pylib/vigil_harness/dashboard_queries.py).

vigil-worker is skipped: its panels read vigil-worker's own series, and the simulator serves
vigil-agent endpoints only (SKIP). Panels of the other dashboards that read series the recordings
never hold are reported by `check`, and fail only for the dashboards in `required`.
Each query's wall time is kept (TIMES); panel_times() makes the per-panel table (Prometheus ms,
VictoriaMetrics ms) of the last check.
usage (a running pipeline): from dashboards import check; check(pipe, start, end, required=['vigil-fleet'])"""
import glob
import json
import os
import time
import urllib.parse

from vigil_harness.dashboard_queries import query_dashboards, render, substitute
from vigil_harness.fail import fail
from vigil_harness.stack import http_get

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..'))

GENERATED = os.path.join(ROOT, 'dashboards', 'generated')
SKIP = {'vigil-worker': 'reads vigil-worker series; the simulator serves vigil-agent endpoints only'}
ENGINES = ('prometheus', 'victoria-metrics')
# Wall time of each panel query, in the order check() ran them: [(engine, expr, seconds)].
TIMES = []
VARIABLES_USED = {}


def query_range(pipe, engine):
    def q(expr, start, end, step):
        t = time.time()
        raw = http_get(pipe.url(engine, '/api/v1/query_range?' + urllib.parse.urlencode(
            {'query': expr, 'start': start, 'end': end, 'step': step})), timeout=120)
        TIMES.append((engine, expr, time.time() - t))
        body = json.loads(raw)
        if body['status'] != 'success':
            fail("%s query_range %s: %s" % (engine, expr, body))
        return body['data']['result']
    return q


def check(pipe, start, end, required=('vigil-fleet',), engines=ENGINES, render_to=None, render_at=None,
          render_engine='prometheus', caption=''):
    """Queries every panel of every dashboard but SKIP over [start, end] (pipe.now() seconds) in
    each engine; prints the queries without data; fails if one belongs to a dashboard in REQUIRED.
    Returns {engine: [(dashboard title, panel, expr)]} of the empty ones."""
    paths = [p for p in sorted(glob.glob(os.path.join(GENERATED, '*.json')))
             if os.path.basename(p)[:-5] not in SKIP]
    for uid, why in SKIP.items():
        print("dashboards: %s skipped: %s" % (uid, why))
    titles = {json.load(open(p))['title']: json.load(open(p))['uid'] for p in paths}
    i = pipe.interval
    # $__rate_interval: Grafana's max(4 x scrape interval, step + scrape interval).
    variables = VARIABLES_USED
    variables.clear()
    variables.update({'$cluster': '.*', '$node': '.*', '$namespace': '.*', '$pod': '.*', '$__rate_interval': '%ds' % (4 * i),
                      '$__range': '%ds' % max(1, end - start)})
    a, b = pipe.t0 + start, pipe.t0 + end
    step = max(1, i)
    del TIMES[:]
    empties, failed = {}, []
    for engine in engines:
        rendered, empty = query_dashboards(query_range(pipe, engine), paths, a, b, step, variables)
        empties[engine] = empty
        total = sum(len(p['targets']) for _, panels in rendered.values() for p, _ in panels)
        print("dashboards (%s): %d of %d queries over %d dashboards returned data" % (
            engine, total - len(empty), total, len(rendered)))
        for title, panel, expr in empty:
            must = titles[title] in required
            print("  %s no data: %s / %s: %s" % ('FAIL' if must else 'note', title, panel, expr))
            if must:
                failed.append('%s: %s / %s' % (engine, title, panel))
        if render_to and engine == render_engine:
            render(rendered, render_to, pipe.t0, caption=caption, at=None if render_at is None else pipe.t0 + render_at,
                   only=list(required) if required else None)
    if failed:
        fail("panels without data in the simulation:\n  " + '\n  '.join(failed))
    return empties


def panel_times(start, end, step, only=('vigil-fleet', 'vigil-gpu', 'vigil-nccl-tcp', 'vigil-agent')):
    """The query time of every panel target check() ran (the last call's TIMES), as a table: per
    dashboard and panel, Prometheus ms and VictoriaMetrics ms (a panel's targets summed)."""
    took = {}
    for engine, expr, s in TIMES:
        took.setdefault((engine, expr), s)  # the first (uncached) run of an expression
    rows = ['| dashboard / panel (range query over %.0f s, step %d s) | Prometheus ms | VictoriaMetrics ms |' % (end - start, step),
            '|---|---|---|']
    totals = [0.0, 0.0]
    for path in sorted(glob.glob(os.path.join(GENERATED, '*.json'))):
        uid = os.path.basename(path)[:-5]
        if uid in SKIP or (only and uid not in only):
            continue
        for p in json.load(open(path))['panels']:
            t = [sum(took.get((e, substitute(x['expr'], VARIABLES_USED)), float('nan')) for x in p['targets']) for e in ENGINES]
            totals = [a + b for a, b in zip(totals, t)]
            rows.append('| %s / %s | %.1f | %.1f |' % (uid, p['title'], 1000 * t[0], 1000 * t[1]))
    rows.append('| all panels above, one after another | %.1f | %.1f |' % (1000 * totals[0], 1000 * totals[1]))
    return '\n'.join(rows)
