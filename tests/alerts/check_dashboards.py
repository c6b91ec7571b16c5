#!/usr/bin/env python3
"""Checks the generated Grafana dashboards without a server: up to date with the jsonnet source,
valid dashboard JSON (unique uids and panel ids, grid within 24 columns, every target with a
query and the $datasource), the five template variables, every job matcher from the mixin's
configured selectors, and every PromQL expression parsed by promtool (written as recording rules
into a temp file, with the variables substituted).
usage: check_dashboards.py"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

from vigil_harness.dashboard_queries import expressions, substitute

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))

VARIABLES = ['datasource', 'cluster', 'node', 'namespace', 'pod']
# Selectors no deployment has: rendered with them, a job matcher left is written in a dashboard.
SELECTORS = {'agentSelector': 'job="check-agent"', 'workerSelector': 'job="check-worker"',
             'vigilSelector': 'job=~"check-agent|check-worker"'}
JOB_MATCHER = re.compile(r'\bjob\s*(=|!=|=~|!~)')
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([os.path.join(ROOT, 'dashboards', 'generate.sh'), tmp], check=True)
        fresh = sorted(os.path.relpath(p, tmp) for p in glob.glob(tmp + '/dashboards/generated/*.json'))
        have = sorted(os.path.relpath(p, ROOT) for p in glob.glob(ROOT + '/dashboards/generated/*.json'))
        check(fresh == have, 'generated dashboards differ in names: run dashboards/generate.sh')
        for f in fresh + ['deploy/kubernetes/base/dashboards-configmap.yaml']:
            with open(os.path.join(tmp, f)) as a, open(os.path.join(ROOT, f)) as b:
                check(a.read() == b.read(), f + ' is stale: run dashboards/generate.sh')

    overridden = json.loads(subprocess.run(
        ['jsonnet', '--tla-code', 'overrides=' + json.dumps(SELECTORS), os.path.join(ROOT, 'dashboards', 'dashboards.jsonnet')],
        check=True, capture_output=True, text=True).stdout)
    for name, d in sorted(overridden.items()):
        queries = [v['query']['query'] for v in d['templating']['list'][1:]] + [e for _, _, e in expressions(d)]
        for q in queries:
            rest = q
            for sel in SELECTORS.values():
                rest = rest.replace(sel, '')
            check(not JOB_MATCHER.search(rest), '%s: %r matches a job itself: use a selector of the mixin\'s _config' % (name, q))

    uids, rules = set(), []
    files = sorted(glob.glob(ROOT + '/dashboards/generated/*.json'))
    check(len(files) >= 5, 'expected the five dashboards')
    for path in files:
        name = os.path.basename(path)
        d = json.load(open(path))
        check(d['uid'] not in uids, name + ': duplicate uid')
        uids.add(d['uid'])
        check([v['name'] for v in d['templating']['list']] == VARIABLES, name + ': template variables')
        ids = [p['id'] for p in d['panels']]
        check(len(ids) == len(set(ids)), name + ': duplicate panel ids')
        for p in d['panels']:
            gp = p['gridPos']
            check(gp['x'] + gp['w'] <= 24 and gp['w'] > 0 and gp['h'] > 0, '%s: panel %s outside the grid' % (name, p['title']))
            if p['type'] == 'row':  # a header: full width, its panels follow it, no query
                check(gp['x'] == 0 and gp['w'] == 24 and not p['targets'] and p['title'], '%s: row %r' % (name, p['title']))
                continue
            check(p['datasource']['uid'] == '${datasource}', '%s: panel %s not on $datasource' % (name, p['title']))
            check(p.get('description'), '%s: panel %s has no description' % (name, p['title']))
            check(p['targets'], '%s: panel %s has no query' % (name, p['title']))
            for t in p['targets']:
                check(t['datasource']['uid'] == '${datasource}', '%s: %s target not on $datasource' % (name, p['title']))
        for v in d['templating']['list'][1:]:
            rules.append(substitute(v['query']['query'].replace('label_values(', '').rsplit(',', 1)[0]))
        rules += [substitute(e) for _, _, e in expressions(d)]

    with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
        yaml.safe_dump({'groups': [{'name': 'dashboards', 'rules': [
            {'record': 'dashboard:expr%d' % i, 'expr': e} for i, e in enumerate(rules)]}]}, f)
        f.flush()
        r = subprocess.run(['promtool', 'check', 'rules', f.name], capture_output=True, text=True)
        check(r.returncode == 0, 'promtool could not parse every expression:\n' + r.stdout + r.stderr)
    print('checked %d dashboards, %d expressions' % (len(files), len(rules)))
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
