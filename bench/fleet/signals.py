"""What the simulated faults must page, and the check that exactly that reached the webhook: the
right alerts with exact labels, grouped as deploy/alertmanager/alertmanager.yml says, resolved
after each fault ends, and nothing about any other node (bench/fleet/run.py, tests/fleet/)."""
import os
import time

import yaml

from pipeline import ROOT
from vigil_harness.fail import fail
from simulate import clusters_for, comm_members, communicator_of, identity, rank_labels

PAGE, TICKET = '/page', '/ticket'
GROUP_BY = yaml.safe_load(open(os.path.join(ROOT, 'deploy', 'alertmanager', 'alertmanager.yml')))['route']['group_by']
P1 = {'severity': 'critical', 'priority': 'P1', 'component': 'agent'}
P2_AGENT = {'severity': 'warning', 'priority': 'P2', 'component': 'agent-self'}


def seconds(duration):
    return int(duration[:-1]) * {'s': 1, 'm': 60, 'h': 3600}[duration[-1]]


def expected(fault, nodes, clusters=0):
    """[(receiver path, labels)] the fault must raise: exact label sets."""
    clusters = clusters or clusters_for(nodes)
    ids = identity(fault['node'], nodes, clusters)
    target = {'cluster': ids['cluster'], 'node': ids['node'], 'instance': ids['instance']}
    proc = dict(target, **rank_labels(ids['node'], 0), **P1)
    if fault['kind'] == 'gpu':
        return [(PAGE, dict(proc, alertname='VigilGpuFragmentationGraphFailures'))]
    if fault['kind'] == 'tcp':
        return [(PAGE, dict(proc, alertname='VigilNcclTcpTimeoutRiskHigh')),
                (PAGE, dict(proc, alertname='VigilNcclTcpCorrelatedTimeouts', source='nccl', kind='abort'))]
    if fault['kind'] == 'tcp_remote':  # the rank that timed out pages, naming the sender's node
        sender = identity((fault['node'] + 1) % nodes, nodes, clusters)
        return [(PAGE, dict(proc, alertname='VigilNcclTcpCrossNodeCorrelatedTimeouts', source='nccl', kind='abort',
                            peer_node=sender['node']))]
    if fault['kind'] == 'rank_stuck':  # the laggard's own labels (the record keeps the series')
        members = comm_members(nodes, clusters, ids['cluster'])
        return [(PAGE, dict(proc, job='vigil-agent', alertname='VigilCollectiveRankStuck', state='running',
                            communicator=communicator_of(ids['cluster']), rank=str(members.index(fault['node'])),
                            nranks=str(len(members))))]
    return [(TICKET, dict(target, job='vigil-agent', alertname='VigilAgentDown', **P2_AGENT))]


def key(labels):
    return tuple(sorted(labels.items()))


def earliest_resolve(labels, fault, overrides):
    """A state (a ratio, failures going on, a failed scrape) ends with its fault; a correlated
    abort is one event, counted for one window after it whatever the link does next."""
    if labels['alertname'] in ('VigilNcclTcpCorrelatedTimeouts', 'VigilNcclTcpCrossNodeCorrelatedTimeouts'):
        return fault['start'] + seconds(overrides['correlatedTimeoutWindow'])
    return fault['end']


def check(pipe, faults, nodes, overrides, resolve_by, clusters=0):
    """Waits for every expected firing (by its fault's end) and resolved notification (not before
    earliest_resolve, by RESOLVE_BY seconds after start); fails on anything else the receivers
    got. Returns [(alertname, node, s from fault start to page, s from earliest_resolve to resolved)]."""
    want = {key(labels): (path, dict(f, resolve_from=earliest_resolve(labels, f, overrides)))
            for f in faults for path, labels in expected(f, nodes, clusters)}
    fired, resolved = {}, {}
    while len(resolved) < len(want):
        pipe.check_alive()
        for t, path, body in list(pipe.receiver.got):
            if path not in (PAGE, TICKET):
                continue
            for a in body['alerts']:
                k = key(a['labels'])
                if k not in want or want[k][0] != path:
                    fail("unexpected %s %s at %s: %s" % (a['status'], a['labels'].get('alertname'), path, a['labels']))
                group = {g: a['labels'][g] for g in GROUP_BY if g in a['labels']}
                if body['groupLabels'] != group:
                    fail("notification grouped by %s, routing says %s" % (body['groupLabels'], group))
                f = want[k][1]
                if a['status'] == 'firing':
                    fired.setdefault(k, t - pipe.t0)
                elif k in fired and t - pipe.t0 >= f['resolve_from']:
                    resolved.setdefault(k, t - pipe.t0)
                else:
                    fail("%s for %s resolved at %.0f s, before %d s" % (dict(k)['alertname'], dict(k)['node'], t - pipe.t0, f['resolve_from']))
        now = pipe.now()
        for k, (path, f) in want.items():
            if k not in fired and now > f['end']:
                fail("no %s for %s at %s while its fault lasted (%d..%d s)" % (
                    dict(k)['alertname'], dict(k)['node'], path, f['start'], f['end']))
            if k not in resolved and now > resolve_by:
                fail("%s for %s not resolved by %d s (fault ended at %d s)" % (dict(k)['alertname'], dict(k)['node'], resolve_by, f['end']))
        time.sleep(1)
    return sorted((dict(k)['alertname'], dict(k)['node'], fired[k] - want[k][1]['start'],
                   resolved[k] - want[k][1]['resolve_from']) for k in want)
