#!/usr/bin/env python3
"""From signal to page, with the real servers: vigil-agent and vigil-worker scraped by a real
Prometheus running the rules of alerts/ (windows shortened), alerting a real Alertmanager with
the routing of deploy/alertmanager, whose receivers are this test's webhook.
  1. GPU: a process on the stand-in libcuda makes small allocations while its cuGraphLaunch calls
     fail -> the P1 VigilGpuFragmentationGraphFailures reaches the paging receivers (PagerDuty
     and webhook) with exact labels, not the ticket receiver; failures stop -> resolved arrives
     (awaited after phase 2, which runs during the failures' window; the process still runs).
  2. TCP: an NCCL process (real libnccl.so.2) streams between two network namespaces; the link is
     blackholed -> the P1 VigilNcclTcpTimeoutRiskHigh pages for that pid; the process aborts its
     communicator while TCP backs off -> the P1 VigilNcclTcpCorrelatedTimeouts pages; the link
     comes back -> both resolve while the process still runs.
  3. With --dashboards DIR: every panel query of the generated dashboards returns data from this
     run (vigil_harness.dashboard_queries), and every panel of the agent dashboard's row "What Vigil costs
     this node" a value other than 0 (BPF run time, runs, the agent's CPU, memory, fds, threads,
     housekeeping); with --render-to DIR each panel is drawn to a PNG there.
usage: alerting_e2e.py VIGIL_AGENT VIGIL_WORKER MODEL LIBCUDA TCP_BULK [--dashboards DIR] [--render-to DIR]"""
import argparse
import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time

from vigil_harness.agent import Agent
from vigil_harness.fail import fail, require_root
from vigil_harness.netns import B_ADDR, Namespaces
from vigil_harness.ports import free_port
from vigil_harness.stack import Stack
from vigil_harness.wait import wait_for
from vigil_harness.worker_client import call

STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'standins')

NCCL_LIB = '/usr/local/cuda/lib64/libnccl.so.2'
LIBM = '/lib/x86_64-linux-gnu/libm.so.6'
COLLECTIVE_TIMEOUT_S = 10
GPU_ALERT = 'VigilGpuFragmentationGraphFailures'
# Short windows so a fault fires and resolves in seconds; thresholds and expressions unchanged.
RULE_OVERRIDES = {'graphFailuresWindow': '20s', 'p1For': '5s', 'timeoutRiskFor': '3s',
                  'correlatedTimeoutWindow': '20s', 'correlatedFor': '3s', 'fleetHistogramInterval': '1s'}
PAGE, PAGERDUTY, TICKET = '/page', '/pagerduty', '/ticket'
# What the agent costs its node (issue #32): every panel of this row must show more than zeros.
COST_ROW = ('vigil-agent', 'What Vigil costs this node')
# Data only while a rank of a communicator is stuck, which this run never makes (its NCCL process
# has no communicator: ncclCommInitRank fails without a GPU); alerting_rank_stuck shows their data.
STUCK_RANK_PANELS = [('Vigil / NCCL and TCP', 'Stuck collectives'),
                     ('Vigil / NCCL and TCP', 'Time since the last collective, by rank')]
# Data only on a node whose NVIDIA driver reports an XID: this run has no GPU and its xid set is
# off. The promtool cases of VigilGpuXidFatal and VigilGpuXidErrors (tests/alerts/
# vigil_rules_test.yaml) count the same series with the same failuresIn expression.
XID_PANELS = [('Vigil / GPU memory and CUDA Graphs', 'XIDs by GPU, code and class')]


class Worker:
    """vigil-worker serve on a free loopback port, with a trickle of completions for the serving metrics."""

    def __init__(self, binary, model):
        self.port = free_port()
        self.log = open(os.path.join('/tmp', 'vigil-alerting-worker-%d.log' % os.getpid()), 'w+')
        # A step latency target, so its series (and the dashboard panels on them) exist.
        self.config = os.path.join('/tmp', 'vigil-alerting-worker-%d.yaml' % os.getpid())
        with open(self.config, 'w') as f:
            f.write('engine:\n  step_latency_target: 100ms\n')
        self.proc = subprocess.Popen([binary, 'serve', '-m', model, '--port', str(self.port), '--config', self.config],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for('worker ready', self.ready, 60)
        except BaseException:  # fail() exits: the worker must not outlive the test
            self.proc.kill()
            self.proc.wait()
            os.unlink(self.config)
            raise
        self.stopping = threading.Event()
        self.requests = 0
        self.thread = threading.Thread(target=self.trickle, daemon=True)
        self.thread.start()

    def ready(self):
        if self.proc.poll() is not None:
            self.log.seek(0)
            fail("worker exited %d: %s" % (self.proc.returncode, self.log.read()[-2000:]))
        try:
            status, _, raw = call(self.port, 'GET', '/ready', timeout=5)
            return status == 200 and b'"ready"' in raw
        except (OSError, http.client.HTTPException):
            return False

    def trickle(self):
        body = {'prompt': 'The capital of France is', 'max_tokens': 8}
        while not self.stopping.wait(1.0):
            try:
                status, _, raw = call(self.port, 'POST', '/v1/completions', body, timeout=30)
            except (OSError, http.client.HTTPException) as e:
                print("worker request failed: %s" % e, flush=True)
                continue
            if status == 200:
                self.requests += 1
            else:
                print("worker request failed: %d %s" % (status, raw[:200]), flush=True)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=35)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)
        os.unlink(self.config)


def process_labels(agent, metric, pid):
    """The identity labels the agent gives PID on METRIC (container_id and pod_uid are empty
    outside containers, and Prometheus drops empty labels)."""
    for name, labels, _ in agent.scrape():
        if name == metric and labels.get('pid') == str(pid):
            return {k: labels[k] for k in ('pid', 'comm', 'container_id', 'pod_uid') if labels.get(k)}
    return None


def pages(receiver, path, alertname, status, pid):
    """(arrival, alert, notification) of PID's ALERTNAME with STATUS in the webhook notifications
    to PATH: the agent sees every process on the machine, so another's alert may page too."""
    want = {'alertname': alertname, 'pid': str(pid)}
    return [(t, a, b) for t, b in receiver.notifications(path) for a in b['alerts']
            if a['status'] == status and all(a['labels'].get(k) == v for k, v in want.items())]


def pagerduty_events(receiver, notification, action):
    """The PagerDuty events with ACTION of the webhook NOTIFICATION's group: Alertmanager sends
    both for one group, its dedup_key the SHA-256 of the group key (notify.Key.Hash)."""
    key = hashlib.sha256(notification['groupKey'].encode()).hexdigest()
    return [b for _, b in receiver.notifications(PAGERDUTY)
            if b.get('event_action') == action and b.get('dedup_key') == key]


def expect_page(stack, alertname, want_labels, rule):
    """Waits for the firing notification on both paging receivers and checks it exactly."""
    r = stack.receiver
    pid = want_labels['pid']
    t, alert, notification = wait_for('%s firing at the webhook' % alertname,
                                      lambda: (pages(r, PAGE, alertname, 'firing', pid) or [None])[0], 90)
    if alert['labels'] != want_labels:
        fail("%s labels:\n got  %s\n want %s" % (alertname, sorted(alert['labels'].items()), sorted(want_labels.items())))
    ann = alert['annotations']
    if ann['summary'] != rule['annotations']['summary'] or ann['runbook_url'] != rule['annotations']['runbook_url']:
        fail("%s annotations: %s" % (alertname, ann))
    if 'pid %s' % want_labels['pid'] not in ann['description'] or '{{' in ann['description']:
        fail("%s description not rendered for the process: %s" % (alertname, ann['description']))
    print("paged: %s %s\n  %s" % (alertname, json.dumps(alert['labels'], sort_keys=True), ann['description']), flush=True)
    pd = wait_for('%s at the PagerDuty receiver' % alertname,
                  lambda: pagerduty_events(r, notification, 'trigger'), 30)[0]
    if pd['routing_key'] != 'e2e-routing-key' or pd['payload']['severity'] != 'critical' \
            or alertname not in pd['payload']['summary']:
        fail("PagerDuty event: %s" % pd)
    print("  PagerDuty event: %s, severity %s, dedup_key %s" % (pd['event_action'], pd['payload']['severity'], pd['dedup_key']))
    if pages(r, TICKET, alertname, 'firing', pid):
        fail("%s (P1) also went to the ticket receiver" % alertname)
    return t


def expect_resolved(stack, alertname, pid, still_running):
    r = stack.receiver
    t, alert, notification = wait_for('%s resolved at the webhook' % alertname,
                                      lambda: (pages(r, PAGE, alertname, 'resolved', pid) or [None])[0], 120)
    if not still_running():
        fail("%s resolved only after the faulty process exited: the fault stopping did not resolve it" % alertname)
    # PagerDuty resolves a group once every alert of it has: another process's alert of the same
    # name on this node (groups do not split by pid) keeps it open, and only the webhook can say.
    firing = [a['labels'].get('pid') for a in notification['alerts'] if a['status'] == 'firing']
    if firing:
        print("resolved: %s (pid %s); PagerDuty resolve not expected: pids %s of the group still fire"
              % (alertname, pid, firing), flush=True)
        return t
    wait_for('%s resolve at the PagerDuty receiver' % alertname,
             lambda: pagerduty_events(r, notification, 'resolve'), 30)
    print("resolved: %s (pid %s), PagerDuty resolve received" % (alertname, pid), flush=True)
    return t


def gpu_phase(stack, agent, fault, rules, base):
    """Pages on FAULT's graph failures, then turns them off; returns FAULT's pid and when. FAULT
    keeps running: its resolve (the failures' 20 s window) is awaited after the TCP phase, which
    runs meanwhile instead of waiting beside it."""
    pid = int(fault.stdout.readline().split('pid=')[1])
    ident = wait_for('agent sees the GPU process', lambda: process_labels(agent, 'gpu_memory_fragmentation_ratio', pid), 20)
    start = time.time()
    expect_page(stack, GPU_ALERT, dict(base, **ident, **rules[GPU_ALERT]['labels'], alertname=GPU_ALERT), rules[GPU_ALERT])
    print("  %.1f s from the first failure to the page" % (time.time() - start))
    fault.stdin.write('off\n')
    fault.stdin.flush()
    return pid, time.time()


def tcp_phase(stack, agent, bulk, rules, base):
    with Namespaces() as nets:
        server = subprocess.Popen(['ip', 'netns', 'exec', nets.b, bulk, 'listen', '5301', '0'],
                                  stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        client = subprocess.Popen(['ip', 'netns', 'exec', nets.a, sys.executable, os.path.join(STANDINS, 'nccl_tcp_fault.py'),
                                   NCCL_LIB, B_ADDR, '5301'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            pid = int(client.stdout.readline().split('pid=')[1].split()[0])
            ident = wait_for('risk gauge for the NCCL process', lambda: process_labels(agent, 'nccl_tcp_timeout_risk_ratio', pid), 20)
            # The gauge in Prometheus, not only in the agent: a query that finds nothing is not a 0.
            risk = wait_for('risk gauge for the NCCL process in Prometheus',
                            lambda: stack.query('nccl_tcp_timeout_risk_ratio{pid="%d"}' % pid), 10)
            if len(risk) != 1 or float(risk[0]['value'][1]) != 0:
                fail("risk before the blackhole: %s" % risk)
            nets.nft(nets.b, 100)
            start = time.time()
            risky, correlated = 'VigilNcclTcpTimeoutRiskHigh', 'VigilNcclTcpCorrelatedTimeouts'
            expect_page(stack, risky, dict(base, **ident, **rules[risky]['labels'], alertname=risky), rules[risky])
            print("  %.1f s from the blackhole to the page" % (time.time() - start))
            # The watchdog gives up while TCP is still backing off: the abort is correlated.
            client.stdin.write('abort\n')
            client.stdin.flush()
            client.stdout.readline()
            aborted = time.time()
            expect_page(stack, correlated, dict(base, **ident, **rules[correlated]['labels'], alertname=correlated,
                                                source='nccl', kind='abort'), rules[correlated])
            print("  %.1f s from the abort to the page" % (time.time() - aborted))
            nets.nft(nets.b, 0)
            up = time.time()
            expect_resolved(stack, risky, pid, lambda: client.poll() is None)
            print("  %.1f s from the link's return to the resolved notification" % (time.time() - up))
            expect_resolved(stack, correlated, pid, lambda: client.poll() is None)
            print("  %.1f s from the abort to the resolved notification (the window is %s)" % (
                time.time() - aborted, RULE_OVERRIDES['correlatedTimeoutWindow']))
        finally:
            for p in (client, server):
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser()
    for a in ('agent', 'worker', 'model', 'libcuda', 'tcp_bulk'):
        ap.add_argument(a)
    ap.add_argument('--dashboards')
    ap.add_argument('--render-to')
    args = ap.parse_args()
    require_root()
    if not os.path.exists(NCCL_LIB):
        fail(NCCL_LIB + " missing: the TCP phase needs a real NCCL process")

    rules = {}
    import yaml
    worker = Worker(args.worker, args.model)
    try:
        # libm stands for a libcuda without the driver's symbols (stripped, or not NVIDIA's): the
        # agent counts the probes it cannot attach, which the agent-health dashboard shows.
        config = ('grace_period: 10s\nwindows: {fragmentation: 10s}\nprobes: {xid: false}\n'
                  'correlation: {collective_timeout: %ds}\nlibraries: {cuda: [%s, %s], nccl: [%s]}\n'
                  % (COLLECTIVE_TIMEOUT_S, os.path.abspath(args.libcuda), LIBM, NCCL_LIB))
        with Agent(args.agent, config) as agent:
            scrape = [
                {'job_name': 'vigil-agent', 'static_configs': [{'targets': ['127.0.0.1:%d' % agent.port],
                                                                 'labels': {'cluster': 'e2e', 'node': 'e2e-node'}}]},
                {'job_name': 'vigil-worker', 'static_configs': [{'targets': ['127.0.0.1:%d' % worker.port],
                                                                  'labels': {'cluster': 'e2e', 'namespace': 'e2e',
                                                                             'pod': 'vigil-worker-0'}}]},
            ]
            with Stack(scrape, RULE_OVERRIDES) as stack:
                with open(os.path.join(stack.dir, 'rules.yaml')) as f:
                    rules = {r['alert']: r for g in yaml.safe_load(f)['groups'] for r in g['rules'] if 'alert' in r}
                began = time.time()
                wait_for('both targets up', lambda: stack.targets_up(['vigil-agent', 'vigil-worker']), 30)
                base = {'cluster': 'e2e', 'node': 'e2e-node', 'instance': '127.0.0.1:%d' % agent.port}
                fault = subprocess.Popen([sys.executable, os.path.join(STANDINS, 'gpu_fault.py'), args.libcuda],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                try:
                    pid, off = gpu_phase(stack, agent, fault, rules, base)
                    tcp_phase(stack, agent, args.tcp_bulk, rules, base)
                    arrived = expect_resolved(stack, GPU_ALERT, pid, lambda: fault.poll() is None)
                    print("  %s: %.1f s from the last failure to the resolved notification" % (GPU_ALERT, arrived - off))
                finally:
                    fault.kill()
                    fault.wait()
                if worker.requests == 0:
                    fail("no completion succeeded during the run: the serving metrics would be empty")
                if args.dashboards:
                    from vigil_harness.dashboard_queries import check_dashboards
                    check_dashboards(stack, args.dashboards, began, time.time(), args.render_to,
                                     nonzero_rows=[COST_ROW], empty_here=STUCK_RANK_PANELS + XID_PANELS)
    finally:
        worker.stop()
    print("ok")


if __name__ == '__main__':
    main()
