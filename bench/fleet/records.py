"""What the simulated faults must show in the vigil-fleet records, in both engines (signals.py is
what they must page). The per-cluster counts end in a zero fallback (`or on (cluster) (0 * group
by (cluster) (up))`), so a panel of them has data whenever `up` does: "every panel has data"
cannot fail on a wrong record. Here the values are asserted, per cluster, from the fault schedule
alone (which node has which fault, the node-to-cluster layout of simulate.py), and every target of
the vigil-fleet dashboard is compared between Prometheus and VictoriaMetrics (compare()).
usage (a running pipeline): from records import check_values, compare"""
import json
import math
import os
import subprocess
import urllib.parse

from pipeline import ROOT
from vigil_harness.fail import fail
from vigil_harness.stack import http_get
from simulate import identity

ENGINES = ('prometheus', 'victoria-metrics')


def thresholds(overrides):
    """The mixin's fragmentation and timeout-risk thresholds, as the rules were rendered."""
    cfg = json.loads(subprocess.run(['jsonnet', '-J', ROOT, '-e', "(import 'mixin.libsonnet')._config"],
                                    check=True, capture_output=True, text=True).stdout)
    cfg.update(overrides)
    return float(cfg['fragmentationThreshold']), float(cfg['timeoutRiskThreshold'])


def per_cluster(faults, nodes, clusters, kind, at=None):
    """{cluster: number of KIND faults} (those under way at AT, if given)."""
    out = {}
    for f in faults:
        if f['kind'] == kind and (at is None or f['start'] <= at < f['end']):
            c = identity(f['node'], nodes, clusters)['cluster']
            out[c] = out.get(c, 0) + 1
    return out


def expected(faults, nodes, clusters, gpus, overrides, at):
    """([(expr, {cluster: (op, value)})], {expr of the nodes above a threshold: fault kind}) at AT,
    a time when every fault is under way and both engines have seen it: counts exact, rates and
    maxima above 0 or the threshold where a fault runs, 0 or below it elsewhere."""
    frag, risk = thresholds(overrides)
    names = ['fleet-%d' % k for k in range(clusters)]
    size = {c: sum(identity(i, nodes, clusters)['cluster'] == c for i in range(nodes)) for c in names}
    n = {k: per_cluster(faults, nodes, clusters, k, at) for k in ('gpu', 'tcp', 'tcp_remote', 'rank_stuck', 'down', 'gone')}
    up = {c: size[c] - n['down'].get(c, 0) - n['gone'].get(c, 0) for c in names}
    eq = lambda f: {c: ('==', f(c)) for c in names}  # noqa: E731
    some = lambda kind: {c: ('>', 0) if n[kind].get(c) else ('==', 0) for c in names}  # noqa: E731
    above = lambda kind, t: {c: ('>', t) if n[kind].get(c) else ('<=', t) for c in names}  # noqa: E731
    return [
        ('vigil_fleet:agents_up:sum', eq(lambda c: up[c])),
        ('vigil_fleet:agents_down:sum', eq(lambda c: n['down'].get(c, 0))),
        ('vigil_fleet:agents_gone:count', eq(lambda c: n['gone'].get(c, 0))),
        ('vigil_fleet:gpu_processes:sum', eq(lambda c: gpus * up[c])),  # one process per GPU
        ('vigil_fleet:gpu_fragmented_nodes:count', eq(lambda c: n['gpu'].get(c, 0))),
        ('vigil_fleet:gpu_memory_fragmentation_ratio:max', above('gpu', frag)),
        ('vigil_fleet:cuda_graph_launch_failures:rate5m', some('gpu')),
        ('vigil_fleet:nccl_tcp_risky_nodes:count', eq(lambda c: n['tcp'].get(c, 0))),
        ('vigil_fleet:nccl_comm_laggards:count', eq(lambda c: n['rank_stuck'].get(c, 0))),
        ('vigil_fleet:nccl_tcp_timeout_risk_ratio:max', above('tcp', risk)),
        ('vigil_fleet:tcp_stall_seconds:max', some('tcp')),
        ('vigil_fleet:tcp_retransmits:rate5m', some('tcp')),
        # VigilAgentDown for each agent down or gone; nothing else files a ticket here.
        ('vigil_fleet:alerts_firing:count{priority="P2"}', eq(lambda c: n['down'].get(c, 0) + n['gone'].get(c, 0))),
        # The fragmentation and stuck-rank P1s last as long as their faults; a cluster without GPU,
        # TCP or stuck-rank faults pages nothing.
        ('vigil_fleet:alerts_firing:count{priority="P1"}',
         {c: ('>=', n['gpu'].get(c, 0) + n['tcp'].get(c, 0) + n['rank_stuck'].get(c, 0))
          if any(n[k].get(c) for k in ('gpu', 'tcp', 'tcp_remote', 'rank_stuck'))
          else ('==', 0) for c in names}),
    ], {'vigil_node:gpu_memory_fragmentation_ratio:max > %g' % frag: 'gpu', 'vigil_node:nccl_tcp_timeout_risk_ratio:max > %g' % risk: 'tcp'}


def holds(op, got, want):
    return {'==': got == want, '>': got > want, '>=': got >= want, '<=': got <= want}[op]


def check_values(pipe, faults, nodes, clusters, gpus, overrides, at, window):
    """Asserts expected() at AT in both engines, the nodes above each threshold (the worst-nodes
    tables) at AT, and the correlated sums over WINDOW = (a, b): a collective abort is one event,
    counted for one correlatedTimeoutWindow after it, which each engine shows at its own delay,
    so their maximum over the window is asserted: one per injected abort, 0 elsewhere."""
    cases, nodes_above = expected(faults, nodes, clusters, gpus, overrides, at)
    a, b = window
    span = '%ds' % (b - a)
    per_fault = {'vigil_fleet:nccl_tcp_correlated_timeouts:sum': 'tcp',  # the abort during its own backoff
                 'vigil_fleet:nccl_tcp_cross_node_correlated_timeouts:sum': 'tcp_remote'}  # the peer's
    names = ['fleet-%d' % k for k in range(clusters)]
    checks = [(expr, want, at) for expr, want in cases]
    for record, kind in per_fault.items():
        count = per_cluster(faults, nodes, clusters, kind)
        checks.append(('max_over_time(%s[%s])' % (record, span), {c: ('==', count.get(c, 0)) for c in names}, b))
    failed = []
    for engine in ENGINES:
        for expr, want, t in checks:
            got = {r['metric'].get('cluster'): float(r['value'][1]) for r in pipe.query(engine, expr, at=t)}
            for c, (op, value) in sorted(want.items()):
                ok = c in got and holds(op, got[c], value)
                print("  %-4s %s %-60s %-8s %s %s %g" % ('ok' if ok else 'FAIL', engine[:4], expr[:60], c,
                                                        got.get(c, 'no data'), op, value))
                if not ok:
                    failed.append('%s at %.0f s: %s{cluster="%s"} = %s, want %s %g' % (engine, t, expr, c, got.get(c, 'no data'), op, value))
        for expr, kind in nodes_above.items():
            got = sorted((r['metric']['cluster'], r['metric']['node']) for r in pipe.query(engine, expr, at=at))
            want = sorted((identity(f['node'], nodes, clusters)['cluster'], identity(f['node'], nodes, clusters)['node'])
                          for f in faults if f['kind'] == kind and f['start'] <= at < f['end'])
            print("  %-4s %s %s: %s" % ('ok' if got == want else 'FAIL', engine[:4], expr, got))
            if got != want:
                failed.append('%s at %.0f s: %s is %s, want the %s fault nodes %s' % (engine, at, expr, got, kind, want))
    if failed:
        fail("vigil-fleet records off the fault schedule:\n  " + '\n  '.join(failed))


# How far apart the engines may show one state, in scrape intervals: VictoriaMetrics' records
# trail, each record that reads a record adding a remote write and -search.latencyOffset
# (pipeline.py) before vmalert sees its input (measured 16 s at 3 s intervals for the cross-node
# sum, three records deep); Prometheus sees a target leave file_sd later than vmagent (its
# discovery manager updates every 5 s, vmagent checks every second). HOLD: a state is compared
# once it lasts this many steps; a shorter one is one engine's timing (Prometheus scrapes a target
# that just left discovery once more and counts it down for one interval; vmalert's records read
# ALERTS a few intervals late and miss an alert that fires for less).
LAG, HOLD = 8, 3


def series(pipe, engine, expr, a, b, step):
    """{key: {t: value}} of a range query: key = the labels without __name__, or for topk(...) the
    rank (the tables' tied nodes come in either engine's order)."""
    body = json.loads(http_get(pipe.url(engine, '/api/v1/query_range?' + urllib.parse.urlencode(
        {'query': expr, 'start': a, 'end': b, 'step': step})), timeout=120))
    if body['status'] != 'success':
        fail("%s query_range %s: %s" % (engine, expr, body))
    out = {}
    for r in body['data']['result']:
        key = tuple(sorted((k, v) for k, v in r['metric'].items() if k != '__name__'))
        for t, v in r['values']:
            out.setdefault(key, {})[round(float(t))] = float(v)
    if expr.startswith('topk('):
        ranked = {}
        for t in sorted({t for s in out.values() for t in s}):
            for rank, v in enumerate(sorted((s[t] for s in out.values() if t in s), reverse=True)):
                ranked.setdefault((('rank', str(rank + 1)),), {})[t] = v
        out = ranked
    return out


def runs(points):
    """[(first t, last t, value)] of the states in {t: value} held HOLD steps or more."""
    out, ts = [], sorted(points)
    k = 0
    while k < len(ts):
        m = k
        while m + 1 < len(ts) and points[ts[m + 1]] == points[ts[k]]:
            m += 1
        if m - k + 1 >= HOLD:
            out.append((ts[k], ts[m], points[ts[k]]))
        k = m + 1
    return out


def settled(pipe, a, b, i):
    """The first step from A on at which both engines have as many targets as they ever have, plus
    two intervals for the records that read them. Before it, a record of VictoriaMetrics can sum
    the shards' first scrapes only (24 GPU processes for 96 from +13 to +19 s, in one run of a
    loaded make test): the start of ingestion, not a difference of the rules."""
    first = a
    for e in ENGINES:
        for points in series(pipe, e, 'count(up)', a, b, i).values():
            top = max(points.values())
            first = max(first, min(t for t, v in points.items() if v == top) + 2 * i)
    return first


def compare(pipe, lo, hi, uid='vigil-fleet'):
    """Every target of dashboard UID (variables "All") as a range query over [LO, HI] (simulation
    seconds) in both engines: the same series, and every state one engine holds for HOLD steps
    within what the other showed from LAG intervals before it to LAG after (its lowest to its
    highest value there, to 1e-9 relative: a transition may pass through other intermediate
    states in the other engine, as when two alerts fire one scrape apart). rate5m records compare
    only as zero or not: a series younger than the 5 m window (this whole run) gets from Prometheus
    its extrapolated increase over 300 s, from VictoriaMetrics its increase over the span of its
    samples, 300 s / age times more."""
    i = pipe.interval
    d = json.load(open(os.path.join(ROOT, 'dashboards', 'generated', uid + '.json')))
    a = math.ceil((pipe.t0 + lo) / i) * i  # both engines step from the same aligned start
    b = pipe.t0 + hi
    a = settled(pipe, a, b, i)
    failed, compared = [], 0
    for p in d['panels']:
        for target in p['targets']:
            expr = target['expr'].replace('$cluster', '.*')
            # From LAG intervals before A: a state held from A is compared with what the other
            # engine showed just before it too (a fault starting at +18 s, one engine seeing it
            # by +20 s and the other by +27 s, is a lag, not a difference).
            got = {e: series(pipe, e, expr, a - LAG * i, b, i) for e in ENGINES}
            if 'rate5m' in expr:
                got = {e: {k: {t: float(v != 0) for t, v in s.items()} for k, s in got[e].items()} for e in ENGINES}
            prom, vm = got['prometheus'], got['victoria-metrics']
            shown = {e: {k for k, pts in got[e].items() if max(pts) >= a} for e in ENGINES}
            if shown['prometheus'] != shown['victoria-metrics']:
                failed.append('%s / %s: series only in Prometheus %s, only in VictoriaMetrics %s' % (
                    p['title'], expr, sorted(shown['prometheus'] - shown['victoria-metrics']),
                    sorted(shown['victoria-metrics'] - shown['prometheus'])))
                continue
            for key in shown['prometheus']:
                for mine, other, name in ((prom[key], vm.get(key, {}), 'Prometheus'),
                                          (vm[key], prom.get(key, {}), 'VictoriaMetrics')):
                    for first, last, v in runs({t: w for t, w in mine.items() if t >= a}):
                        near = {w for u, w in other.items() if first - LAG * i <= u <= last + LAG * i}
                        compared += 1
                        tol = 1e-9 * max(1.0, abs(v))
                        if not near or not min(near) - tol <= v <= max(near) + tol:
                            failed.append('%s / %s %s: %s holds %g from %+.0f to %+.0f s, the other engine %s within %d s of it' % (
                                p['title'], expr, dict(key), name, v, first - pipe.t0, last - pipe.t0, sorted(near), LAG * i))
    print("compare: every %s target from %+.0f s, %d states held %d+ steps, each within the other engine's values %d intervals around it"
          % (uid, a - pipe.t0, compared, HOLD, LAG))
    if failed:
        fail("%s differs between the engines:\n  %s" % (uid, '\n  '.join(failed)))
