#!/usr/bin/env python3
"""The fleet benchmark (bench/fleet/run.sh): N simulated nodes through the pipeline (pipeline.py),
faults on chosen nodes (a fragmentation + graph-failure P1 on two, a TCP stall with a correlated
abort on one, an abort whose stall is on the next node only, a rank of a cluster-wide communicator
stuck while the others wait (beside the first GPU fault, as in tests/fleet/fleet_e2e.py), an agent
that stops answering and one that leaves discovery), the pages checked (signals.py), every
dashboard panel queried in both engines (dashboards.py: vigil-fleet's must all return data), then
the measurement table (measure.py).
usage: run.py [--nodes 1000] [--gpus 8] [--clusters K] [--interval 15] [--table-out FILE] [--dashboards-png DIR]
  --dashboards-png DIR: draw vigil-fleet (from the baseline Prometheus) to DIR/vigil-fleet.png, its
  stats and tables as they were half-way through the faults (docs/dashboards: DIR=docs/dashboards)"""
import argparse
import sys

from measure import report, snapshot, table
from pipeline import Pipeline, rule_overrides
from vigil_harness.wait import wait_for
from signals import check
from simulate import clusters_for, identity
import dashboards


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=1000)
    ap.add_argument('--gpus', type=int, default=8)
    ap.add_argument('--interval', type=int, default=15, help='seconds between scrapes and between rule evaluations')
    ap.add_argument('--clusters', type=int, default=0, help='default: one per 250 nodes')
    ap.add_argument('--table-out')
    ap.add_argument('--dashboards-png', metavar='DIR')
    args = ap.parse_args()
    n, i = args.nodes, args.interval
    if n < 10:
        sys.exit("--nodes: at least 10")
    # Faults start once every target has been scraped a few times and last long enough for each
    # alert's `for` (rule_overrides); the resolves need one failure window after the end.
    start, end = 6 * i, 16 * i
    faults = [{'node': n // 7, 'kind': 'gpu', 'start': start, 'end': end},
              {'node': n // 2, 'kind': 'tcp', 'start': start, 'end': end},
              {'node': 4 * n // 5, 'kind': 'tcp_remote', 'start': start, 'end': end},  # and node 4n/5 + 1
              {'node': n - 2, 'kind': 'gpu', 'start': start, 'end': end},
              {'node': n // 3, 'kind': 'down', 'start': start, 'end': end},
              {'node': 2 * n // 3, 'kind': 'gone', 'start': start, 'end': end}]
    # A rank stuck in its cluster's communicator, beside the first GPU fault (as in fleet_e2e),
    # where no agent down or gone shares that cluster: their ranks would page too (as gone,
    # rightly), and the stuck rank's page is to be the only one. Few clusters (the default's one
    # or two up to 500 nodes) can put them together: then it is left out, and says so.
    stuck = n // 7 + 1
    cluster = lambda j: identity(j, n, args.clusters or clusters_for(n))['cluster']  # noqa: E731
    if cluster(stuck) in {cluster(f['node']) for f in faults if f['kind'] in ('down', 'gone')}:
        print("rank_stuck left out: node %d's cluster holds the agent down or gone (--clusters 4 keeps it)" % stuck)
    else:
        faults.append({'node': stuck, 'kind': 'rank_stuck', 'start': start, 'end': end})
    overrides = rule_overrides(i)
    with Pipeline(n, args.gpus, i, faults, overrides, args.clusters) as pipe:
        print("pipeline up in %.0f s; faults at %d..%d s: %s" % (
            pipe.now(), start, end, ', '.join('%s on node %d' % (f['kind'], f['node']) for f in faults)), flush=True)
        wait_for('every target scraped', lambda: pipe.now() > start - 2 * i, 10 * i, step=1)
        a = snapshot(pipe)
        wait_for('the faults under way', lambda: pipe.now() > end - i, 20 * i, step=1)
        b = snapshot(pipe)
        firing = sorted((r['metric']['alertname'], r['metric'].get('node', '')) for r in pipe.query(
            'prometheus', 'ALERTS{alertstate="firing"}'))
        signals = check(pipe, faults, n, overrides, resolve_by=end + 10 * i, clusters=args.clusters)
        print("\nsignals (alert, node, s from fault start to notification, s from the fault's end to resolved;"
              " for the correlated abort, from one window after it):")
        for alertname, node, fired, resolved in signals:
            print("  %-40s %s  fired +%.0f s  resolved +%.0f s" % (alertname, node, fired, resolved))
        print("Prometheus (baseline) firing near the fault's end: %s" % firing)
        print()
        qend = pipe.now()
        dashboards.check(pipe, 0, qend, required=['vigil-fleet'], render_to=args.dashboards_png,
                         render_at=(start + end) // 2, caption='fleet simulation: %d nodes, faults %s from +%d s to +%d s' % (
                             n, ', '.join(sorted({f['kind'] for f in faults})), start, end))
        text = table(pipe, a, b, n, args.gpus)
        text += '\n\nPanel query times (every panel target as a range query over the run, first run of each expression):\n\n'
        text += dashboards.panel_times(0, qend, max(1, i))
        report(text, args.table_out)
    print("ok")


if __name__ == '__main__':
    main()
