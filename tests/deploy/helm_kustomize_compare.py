#!/usr/bin/env python3
"""One source of truth: the Helm chart with its default values and the kustomize base render the
same objects. Every object of `kubectl kustomize deploy/kubernetes/base` but the Alertmanager
Secret (not the chart's business) must come out of Helm's engine with the same kind, name and
namespace (the rules and dashboards: the release's), the same spec or data (ConfigMaps parsed),
the same pod template spec (security context, capabilities, mounts, probes: everything), and
kustomize's labels among Helm's. The same again for the overlay agent-web-config (the agent
behind its web config, scraped over HTTPS) against the chart's agent.webConfig and
agent.monitor.endpoint.
usage: helm_kustomize_compare.py"""
import json
import sys

import yaml

import podman_flags

NOT_IN_CHART = {('Secret', 'alertmanager-vigil')}
# The kustomize base puts the rules and dashboards in namespace vigil; the chart in the release's.
RELEASE_NAMESPACE = 'vigil'
SCRAPE_SECRET = 'vigil-agent-scrape'
# The chart's values that render deploy/kubernetes/overlays/agent-web-config.
WEB_CONFIG_VALUES = {'agent': {
    'webConfig': {'secretName': 'vigil-agent-web'},
    'monitor': {'endpoint': {
        'scheme': 'https',
        'tlsConfig': {'ca': {'secret': {'name': SCRAPE_SECRET, 'key': 'ca.crt'}},
                      'cert': {'secret': {'name': SCRAPE_SECRET, 'key': 'tls.crt'}},
                      'keySecret': {'name': SCRAPE_SECRET, 'key': 'tls.key'},
                      'serverName': 'vigil-agent'},
        'basicAuth': {'username': {'name': SCRAPE_SECRET, 'key': 'username'},
                      'password': {'name': SCRAPE_SECRET, 'key': 'password'}}}}}}
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


def body(o):
    """What must be equal: everything but metadata, ConfigMap files parsed as YAML, and a pod
    template's metadata (Helm adds its release labels and a config checksum there)."""
    b = {k: v for k, v in o.items() if k != 'metadata'}
    if o['kind'] == 'ConfigMap':
        b['data'] = {k: (json.loads(v) if k.endswith('.json') else yaml.safe_load(v)) for k, v in o['data'].items()}
    tmpl = b.get('spec', {}).get('template')
    if tmpl:
        b['spec'] = dict(b['spec'], template={'spec': tmpl['spec']})
    return b


def first_difference(a, b, path=''):
    if type(a) is not type(b):
        return '%s: %r vs %r' % (path or '.', a, b)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return '%s.%s only in %s' % (path, k, 'kustomize' if k in a else 'helm')
            d = first_difference(a[k], b[k], '%s.%s' % (path, k))
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return '%s: %d items vs %d' % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, '%s[%d]' % (path, i))
            if d:
                return d
        return None
    return None if a == b else '%s: %r vs %r' % (path, a, b)


def compare(target, values):
    print('kustomize %s against the chart with %s:' % (target, json.dumps(values) if values else 'its defaults'))
    kustomize = {(o['kind'], o['metadata']['name']): o for o in podman_flags.render(target)}
    chart = {(o['kind'], o['metadata']['name']): o for o in podman_flags.render_chart(values, namespace=RELEASE_NAMESPACE)}
    for key, k in sorted(kustomize.items()):
        if key in NOT_IN_CHART:
            continue
        h = chart.get(key)
        if h is None:
            errors.append('%s/%s: in the kustomize base, not in the chart' % key)
            continue
        check(k['metadata'].get('namespace') == h['metadata'].get('namespace'),
              '%s/%s: namespace %s (kustomize) vs %s (helm)' % (key + (k['metadata'].get('namespace'), h['metadata'].get('namespace'))))
        missing = {l: v for l, v in k['metadata'].get('labels', {}).items() if h['metadata'].get('labels', {}).get(l) != v}
        check(not missing, '%s/%s: kustomize labels missing from the chart\'s: %s' % (key + (missing,)))
        d = first_difference(body(k), body(h))
        check(d is None, '%s/%s differs: %s' % (key + (d,)))
        tmpl = k.get('spec', {}).get('template')
        if tmpl:
            hl = h['spec']['template']['metadata']['labels']
            check(tmpl['metadata']['labels'].items() <= hl.items(), '%s/%s: pod labels %s not among %s' % (key + (tmpl['metadata']['labels'], hl)))
        print('%-20s %-18s %-13s same in both' % (key + (k['metadata'].get('namespace'),)))
    extra = sorted(set(chart) - set(kustomize))
    check(not extra, 'the chart renders objects kustomize %s does not: %s' % (target, extra))


def main():
    compare('base', None)
    compare('overlays/agent-web-config', WEB_CONFIG_VALUES)
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
