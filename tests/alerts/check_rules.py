#!/usr/bin/env python3
"""Checks the generated rules against their contract: files up to date with the jsonnet source,
mixin.libsonnet exposing its alerts, recording rules and dashboards (each kind in its own field),
recording rules read only after them in their own group, every alert with severity/priority/summary/description/runbook, a non-zero `for`, a runbook page,
and a promtool case that it is silent before `for` and one that it fires after; every recording
rule with a promtool case that expects a non-zero value of it, and, where it reads a counter (itself
or through the records it reads), cases with that counter born mid-test at 1 or more (the agent
creates a failure counter's series at the first failure) and rising.
usage: check_rules.py  (run by CTest with the ops venv's python)"""
import glob
import json
import os
import re
import urllib.parse
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
GENERATED = ['alerts/generated/vigil.rules.yaml', 'deploy/kubernetes/base/prometheusrule.yaml',
             'deploy/kubernetes/base/alertmanager-secret.yaml']
# Overlays with their own runbook URLs (alerts-config.json) get their own PrometheusRule.
OVERLAY_RULES = sorted(os.path.relpath(os.path.join(os.path.dirname(c), 'prometheusrule.yaml'), ROOT)
                       for c in glob.glob(os.path.join(ROOT, 'deploy/kubernetes/overlays/*/alerts-config.json')))
TESTS = ['tests/alerts/vigil_rules_test.yaml', 'tests/alerts/vigil_rules_risk_test.yaml',
         'tests/alerts/vigil_rules_cross_node_test.yaml', 'tests/alerts/vigil_rules_fleet_test.yaml',
         'tests/alerts/vigil_rules_agent_cost_test.yaml', 'tests/alerts/vigil_rules_rank_stuck_test.yaml']
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


def check_runbook_url(name, url):
    """An absolute http(s) URL (a pager opens it outside any checkout) naming an existing runbook."""
    u = urllib.parse.urlparse(url)
    check(u.scheme in ('http', 'https') and u.netloc, name + ': runbook_url %r is not an absolute URL' % url)
    page = os.path.basename(u.path)
    check(page == name + '.md' and os.path.exists(os.path.join(ROOT, 'docs', 'runbooks', page)),
          name + ': runbook_url %r names no runbook in docs/runbooks' % url)


def check_record_order(groups):
    """A rule that reads a recorded series must come after its recording rule in the same group.
    Prometheus evaluates the rules of one group in order at one timestamp, but the groups
    independently: a reader in another group sees the record one interval late or not yet, in
    production and at random in promtool's tests."""
    recorded_in = {r['record']: g['name'] for g in groups for r in g['rules'] if 'record' in r}
    for g in groups:
        seen = set()
        for r in g['rules']:
            name = r.get('alert') or r['record']
            for rec, home in recorded_in.items():
                if re.search(r'(?<![\w:])%s(?![\w:])' % re.escape(rec), r['expr']):
                    check(home == g['name'], '%s (group %s) reads %s, recorded in group %s: put it after '
                          'the record in that group' % (name, g['name'], rec, home))
                    check(home != g['name'] or rec in seen,
                          '%s reads %s before the rule that records it' % (name, rec))
            if 'record' in r:
                seen.add(r['record'])


COUNTER = re.compile(r'(?<![\w:])([a-zA-Z_]\w*_(?:total|bucket|count))(?![\w:])')
SAMPLE_LABELS = re.compile(r'^\s*([\w:]*)\s*(?:\{(.*)\})?\s*$')
LABEL = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
TERM = re.compile(r'^(-?[\d.]+(?:[eE][+-]?\d+)?)(?:([+-][\d.]+(?:[eE][+-]?\d+)?))?x(\d+)$')


def expand(values):
    """promtool's series notation as a list: a number, or None for '_' and 'stale'."""
    out = []
    for term in str(values).split():
        m = TERM.match(term)
        if term in ('_', 'stale'):
            out.append(None)
        elif term.startswith('_x'):
            out.extend([None] * int(term[2:]))  # '_xN' is N blanks ('axN' is N + 1 values)
        elif m:
            a, b, n = float(m.group(1)), float(m.group(2) or 0), int(m.group(3))
            out.extend(a + i * b for i in range(n + 1))
        else:
            out.append(float(term))
    return out


def born(values):
    """Absent first, then at 1 or more: a counter the agent created at its first events."""
    v = expand(values)
    first = next((x for x in v if x is not None), None)
    return bool(v) and v[0] is None and first is not None and first >= 1


def rising(values):
    v = [x for x in expand(values) if x is not None]
    return any(b > a for a, b in zip(v, v[1:]))


def parse_sample(text):
    m = SAMPLE_LABELS.match(text)
    return (m.group(1), dict(LABEL.findall(m.group(2) or ''))) if m else ('', {})


def check_record_cases(groups, tests):
    """Every record (by name and its static labels: alerts_firing:count per priority) needs a
    promql_expr_test expecting a non-zero value of it; a case of zeros or no data passes whatever
    the expression computes. Where it reads a counter, directly or through the records it reads,
    the cases' inputs must hold that counter born mid-test at >= 1 and rising: the first is where
    increase() sees nothing (failuresIn exists for it), the second where the window matters."""
    records = [r for g in groups for r in g['rules'] if 'record' in r]
    names = {r['record'] for r in records}
    reads = lambda expr: {n for n in names if re.search(r'(?<![\w:])%s(?![\w:])' % re.escape(n), expr)}  # noqa: E731
    counters = {}

    def counters_of(name, seen=()):
        if name not in counters:
            own = set()
            for r in (r for r in records if r['record'] == name):
                own |= set(COUNTER.findall(r['expr'])) - names
                for other in reads(r['expr']) - {name} - set(seen):
                    own |= counters_of(other, seen + (name,))
            counters[name] = own
        return counters[name]

    for r in records:
        name, static = r['record'], r.get('labels', {})
        label = name + (str(static) if static else '')
        inputs = []  # the input series of every test group with a non-zero case of this record
        for group in tests:
            for case in group.get('promql_expr_test', []):
                if name not in reads(case['expr']):
                    continue
                for s in case.get('exp_samples') or []:
                    metric, labels = parse_sample(s.get('labels', ''))
                    if metric == name and all(labels.get(k) == v for k, v in static.items()) and float(s['value']) != 0:
                        inputs.append(group.get('input_series', []))
                        break
        check(inputs, label + ': no promtool case (promql_expr_test) expecting a non-zero value of this record')
        for c in sorted(counters_of(name)):
            series = [s for i in inputs for s in i if parse_sample(s['series'])[0] == c]
            check(any(born(s['values']) for s in series),
                  label + ': reads the counter %s, but no non-zero case has it born mid-test at >= 1' % c)
            check(any(rising(s['values']) for s in series),
                  label + ': reads the counter %s, but no non-zero case has it rising' % c)


def check_mixin():
    """mixin.libsonnet's three fields, non-empty, as mixin consumers read them: alerts only in
    prometheusAlerts, records only in prometheusRules."""
    r = subprocess.run(['jsonnet', '-J', ROOT, '-e', "local m = import 'mixin.libsonnet'; "
                        '{ alerts: m.prometheusAlerts.groups, rules: m.prometheusRules.groups, '
                        'dashboards: std.objectFields(m.grafanaDashboards) }'], capture_output=True, text=True)
    check(r.returncode == 0, 'mixin.libsonnet lacks a field:\n' + r.stderr)
    if r.returncode:
        return
    m = json.loads(r.stdout)
    for field, groups, kind in (('prometheusAlerts', m['alerts'], 'alert'), ('prometheusRules', m['rules'], 'record')):
        rules = [r for g in groups for r in g['rules']]
        check(rules, 'mixin.libsonnet: %s is empty' % field)
        check(all(kind in r for r in rules), 'mixin.libsonnet: %s holds a rule that is not an %s' % (field, kind))
    check(m['dashboards'], 'mixin.libsonnet: grafanaDashboards is empty')


def main():
    check_mixin()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([os.path.join(ROOT, 'alerts', 'generate.sh'), tmp], check=True)
        for f in GENERATED + OVERLAY_RULES:
            with open(os.path.join(tmp, f)) as a, open(os.path.join(ROOT, f)) as b:
                check(a.read() == b.read(), f + ' is stale: run alerts/generate.sh')

    rules = yaml.safe_load(open(os.path.join(ROOT, GENERATED[0])))
    operator = yaml.safe_load(open(os.path.join(ROOT, GENERATED[1])))
    check(operator['kind'] == 'PrometheusRule' and operator['spec'] == rules,
          'the PrometheusRule does not hold the same groups as the rule file')
    secret = yaml.safe_load(open(os.path.join(ROOT, GENERATED[2])))
    check(secret['stringData']['alertmanager.yaml'] == open(os.path.join(ROOT, 'deploy/alertmanager/alertmanager.yml')).read(),
          'the Alertmanager Secret does not hold deploy/alertmanager/alertmanager.yml')

    cases, tests = {}, []
    for f in TESTS:
        for t in yaml.safe_load(open(os.path.join(ROOT, f)))['tests']:
            tests.append(t)
            for c in t.get('alert_rule_test', []):
                cases.setdefault(c['alertname'], []).append(c['exp_alerts'])

    check_record_order(rules['groups'])
    check_record_cases(rules['groups'], tests)

    alerts = [r for g in rules['groups'] for r in g['rules'] if 'alert' in r]
    for r in alerts:
        name, labels, ann = r['alert'], r.get('labels', {}), r.get('annotations', {})
        check(labels.get('severity') in ('critical', 'warning', 'info'), name + ': severity')
        check(labels.get('priority') in ('P1', 'P2', 'P3'), name + ': priority')
        check((labels.get('severity') == 'critical') == (labels.get('priority') == 'P1'),
              name + ': critical and P1 go together (critical pages, P1 pages)')
        check(r.get('for') not in (None, '0s', '0m'), name + ': needs a non-zero for')
        check(ann.get('summary') and '{{' not in ann['summary'], name + ': summary must be static')
        check('{{' in ann.get('description', ''), name + ': description must be templated')
        check_runbook_url(name, ann.get('runbook_url', ''))
        got = cases.get(name, [])
        check(any(e == [] for e in got), name + ': no promtool case where it is silent (just before for)')
        check(any(e for e in got), name + ': no promtool case where it fires with exact labels')
        for e in got:
            for a in e:
                check(set(a.get('exp_annotations', {})) == {'summary', 'description', 'runbook_url'},
                      name + ': a firing case must assert every annotation')
    # Each overlay's rules: the same groups, with the runbook URLs of its own pattern.
    for f in OVERLAY_RULES:
        pattern = json.load(open(os.path.join(ROOT, os.path.dirname(f), 'alerts-config.json')))['runbookURLPattern']
        overlay = yaml.safe_load(open(os.path.join(ROOT, f)))
        for r in (r for g in overlay['spec']['groups'] for r in g['rules'] if 'alert' in r):
            check_runbook_url(r['alert'], r['annotations'].get('runbook_url', ''))
            check(r['annotations'].get('runbook_url') == pattern % r['alert'], f + ': ' + r['alert'] + ': runbook_url not from its pattern')
    print('checked %d alerts and %d recording rules' % (len(alerts), sum('record' in r for g in rules['groups'] for r in g['rules'])))
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
