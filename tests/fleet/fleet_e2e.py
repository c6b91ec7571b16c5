#!/usr/bin/env python3
"""The fleet pipeline's short check (bench/fleet, docs/scale.md): 50 simulated nodes in 4 clusters
scraped by two vmagent shards into VictoriaMetrics, vmalert on Vigil's rules (windows scaled to
3 s scrapes), the shipped Alertmanager routing, Prometheus beside it. Faults, one cluster each
but fleet-0 and fleet-1, which get two each: a fragmentation + graph failure (gpu),
a TCP stall with a correlated abort (tcp), an abort whose stall is on the next node
(tcp_remote), a rank of a cluster-wide communicator stuck while the others wait (rank_stuck),
an agent down and one gone from discovery. Each page and ticket must reach its webhook with
exact labels, grouped as routed, and resolve after its fault; anything else fails. Then the
vigil-fleet records must hold the values the fault schedule implies, per cluster and in both
engines (bench/fleet/records.py: the zero fallbacks give every panel data, so data alone proves
nothing), every vigil-fleet target must agree between Prometheus and VictoriaMetrics, and every
panel must return data (the other dashboards' empty panels listed; vigil-worker skipped: no
worker in the simulation).
usage: fleet_e2e.py [--nodes 50] [--break-fault]   (--break-fault: a fault that cannot page,
to see this test fail)"""
import argparse
import sys

from pipeline import Pipeline, rule_overrides
from vigil_harness.wait import wait_for
from records import LAG, check_values, compare
from signals import check, seconds
import dashboards

INTERVAL = 3
CLUSTERS = 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--nodes', type=int, default=50)
    ap.add_argument('--break-fault', action='store_true')
    args = ap.parse_args()
    n, i = args.nodes, INTERVAL
    if n < 20:
        sys.exit("--nodes: at least 20 (one fault per cluster, %d clusters)" % CLUSTERS)
    # 22 intervals long: the records are checked one interval before the end, and VictoriaMetrics
    # counts the stuck-rank page (three records deep, then ALERTS) up to about 20 s after
    # Prometheus, which notified it 27-38 s after the fault began (with 20 * i, 42 s, its P1 count
    # in fleet-1 was still 1 at 57 s in 1 run of 2).
    start, end = 6 * i, 28 * i
    # Node K is in cluster K * CLUSTERS // n (simulate.identity): fleet-0 the agents, fleet-1 the
    # GPU, fleet-2 the TCP stall, fleet-3 the cross-node abort (its sender, node 4n/5 + 1, too).
    # fleet-1's communicator its stuck rank (node n/3 + 1).
    faults = [{'node': n // 10, 'kind': 'down'}, {'node': n // 6, 'kind': 'gone'},
              {'node': n // 3, 'kind': 'gpu'}, {'node': n // 2, 'kind': 'tcp'},
              {'node': 4 * n // 5, 'kind': 'tcp_remote'}, {'node': n // 3 + 1, 'kind': 'rank_stuck'}]
    for f in faults:
        f.update(start=start, end=end)
    overrides = rule_overrides(i)
    # 15 intervals, not 6: a one-off abort must stay counted well past the time vmalert's chain of
    # records takes to see it (records.LAG), or VictoriaMetrics' vigil_fleet:alerts_firing:count
    # misses the cross-node page its own vmalert sent (at 6 and at 10 it did, in 2 runs of 2:
    # vmalert fired it for 11 s, 20 s after Prometheus).
    overrides['correlatedTimeoutWindow'] = '%ds' % (15 * i)
    if args.break_fault:
        overrides['fragmentationThreshold'] = '0.95'  # above the recorded fault's 0.90: no page
    with Pipeline(n, 8, i, faults, overrides, CLUSTERS) as pipe:
        wait_for('fault under way', lambda: pipe.now() > start, 60, step=1)
        for alertname, node, fired, resolved in check(pipe, faults, n, overrides, resolve_by=end + 10 * i, clusters=CLUSTERS):
            print("%s on %s: notified %.0f s after the fault began, resolved %.0f s after it could" % (alertname, node, fired, resolved))
        # The engines' last points after the faults: VictoriaMetrics' records trail by up to LAG intervals.
        wait_for('the records after the faults', lambda: pipe.now() > end + (LAG + 2) * i, (LAG + 20) * i, step=1)
        window = (start, start + seconds(overrides['correlatedTimeoutWindow']) + LAG * i)
        print("vigil-fleet records at %d s (every fault under way), the correlated sums' maximum over %d..%d s:" % ((end - i,) + window))
        check_values(pipe, faults, n, CLUSTERS, 8, overrides, at=end - i, window=window)
        compare(pipe, 4 * i, pipe.now())
        dashboards.check(pipe, 0, pipe.now(), required=['vigil-fleet'])
    print("ok")


if __name__ == '__main__':
    main()
