#!/usr/bin/env python3
"""The fleet pipeline's short check (bench/fleet, docs/scale.md): 50 simulated nodes scraped by two
vmagent shards into VictoriaMetrics, vmalert on Vigil's rules (windows scaled to 3 s scrapes),
the shipped Alertmanager routing, Prometheus beside it. One node gets the fragmentation + graph
failure fault: its P1 must reach the paging webhook with exact labels, grouped as routed, and
resolve after the fault; any notification about another node fails the test. Then every panel of
the vigil-fleet dashboard must return data from both Prometheus and VictoriaMetrics (the
recording rules of group vigil-fleet evaluated by each); the other dashboards' panels without
data are listed (bench/fleet/dashboards.py; vigil-worker is skipped: no worker in the simulation).
usage: fleet_e2e.py [--nodes 50] [--break-fault]   (--break-fault: a fault that cannot page,
to see this test fail)"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'bench', 'fleet'))
from pipeline import Pipeline, rule_overrides, wait_until  # noqa: E402
from signals import check  # noqa: E402
import dashboards  # noqa: E402

INTERVAL = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=50)
    ap.add_argument('--break-fault', action='store_true')
    args = ap.parse_args()
    start, end = 6 * INTERVAL, 16 * INTERVAL
    fault = {'node': args.nodes // 3, 'kind': 'gpu', 'start': start, 'end': end}
    overrides = rule_overrides(INTERVAL)
    if args.break_fault:
        overrides['fragmentationThreshold'] = '0.95'  # above the recorded fault's 0.90: no page
    with Pipeline(args.nodes, 8, INTERVAL, [fault], overrides) as pipe:
        wait_until('fault under way', lambda: pipe.now() > start, 60, step=1)
        for alertname, node, fired, resolved in check(pipe, [fault], args.nodes, overrides, resolve_by=end + 10 * INTERVAL):
            print("%s on %s: paged %.0f s after the fault began, resolved %.0f s after it ended" % (alertname, node, fired, resolved))
        if pipe.receiver.notifications('/ticket'):
            sys.exit("FAIL: tickets from a fleet with one GPU fault: %s" % pipe.receiver.notifications('/ticket'))
        dashboards.check(pipe, 0, pipe.now(), required=['vigil-fleet'])
    print("ok")


if __name__ == '__main__':
    main()
