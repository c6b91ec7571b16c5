#!/usr/bin/env python3
"""Checks deploy/kubernetes: renders the base and each overlay with `kubectl kustomize` (the
renderer users run; deploy/podman_flags.py uses the same), validates every core object against the Kubernetes OpenAPI schemas of the
oldest and newest supported versions (kubernetes-validate, strict, offline), checks the
prometheus-operator objects' wiring (selectors, ports, promtool on the PrometheusRule) and the
security and lifecycle contract of the agent and the worker.
usage: check_manifests.py"""
import json
import os
import re
import subprocess
import sys
import tempfile

import kubernetes_validate
import yaml

import podman_flags

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
KDIR = os.path.join(ROOT, 'deploy', 'kubernetes')
TARGETS = ['base', 'overlays/production', 'overlays/cpu-dev']
K8S_VERSIONS = ['1.29.0', '1.37.0']
CRDS = {'PodMonitor', 'ServiceMonitor', 'PrometheusRule'}
# The smallest set the container test passes with (tests/containers/agent_in_container.py).
AGENT_CAPS = {'SYS_ADMIN', 'SYS_PTRACE', 'DAC_READ_SEARCH'}
AGENT_HOST_PATHS = {'/sys/kernel/btf', '/sys/kernel/tracing', '/var/log/containers', '/sys/fs/bpf/vigil'}
# The one host path the agent writes: its pinned state (docs/deploy.md, Restarts), the node's
# /sys/fs/bpf/vigil mounted here and named as the pin root.
AGENT_WRITABLE_MOUNTS = {'/var/lib/vigil/bpf'}
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


def pod_spec(obj):
    return obj.get('spec', {}).get('template', {}).get('spec')


def render(target):
    """The rendered objects, through the renderer deploy/podman_flags.py uses."""
    try:
        return podman_flags.render(target)
    except podman_flags.ManifestError as e:
        check(False, '%s: %s' % (target, e))
        return []


def key(o):
    return (o['kind'], o['metadata']['name'])


def seconds(duration):
    m = re.fullmatch(r'(\d+)(ms|s|m|h)?', duration)
    return int(m.group(1)) * {'ms': 0.001, 's': 1, 'm': 60, 'h': 3600, None: 1}[m.group(2)]


def check_contract(name, objs):
    by = {key(o): o for o in objs}
    ds = by[('DaemonSet', 'vigil-agent')]
    spec = pod_spec(ds)
    agent = spec['containers'][0]
    sc = agent['securityContext']
    check(sc.get('privileged') is False and sc.get('allowPrivilegeEscalation') is False, name + ': agent must not be privileged')
    check(set(sc['capabilities']['drop']) == {'ALL'} and set(sc['capabilities']['add']) == AGENT_CAPS,
          name + ': agent capabilities must be exactly %s' % sorted(AGENT_CAPS))
    check(sc.get('readOnlyRootFilesystem') is True, name + ': agent root filesystem read-only')
    check(spec.get('hostPID') is True and not spec.get('hostNetwork'), name + ': agent needs hostPID, not hostNetwork')
    host = {v['name']: v['hostPath']['path'] for v in spec['volumes'] if 'hostPath' in v}
    check(set(host.values()) == AGENT_HOST_PATHS, name + ': agent host paths %s' % sorted(host.values()))
    for m in agent['volumeMounts']:
        if m['mountPath'] in AGENT_WRITABLE_MOUNTS:
            check(m.get('mountPropagation') == 'HostToContainer',
                  name + ': agent mount %s must see the host\'s later mounts (HostToContainer)' % m['mountPath'])
            continue
        check(m.get('readOnly') is True, name + ': agent mount %s must be read-only' % m['mountPath'])
    pin_root = agent['args'][agent['args'].index('--bpf-pin-root') + 1] if '--bpf-pin-root' in agent['args'] else None
    check(pin_root in AGENT_WRITABLE_MOUNTS, name + ': agent pin root %s is not its bpffs mount' % pin_root)
    check(agent['livenessProbe']['httpGet']['path'] == '/healthz' and agent['readinessProbe']['httpGet']['path'] == '/readyz',
          name + ': agent probes on /healthz and /readyz')
    check(agent['resources'].get('requests') and agent['resources'].get('limits'), name + ': agent resources')
    check(any(t.get('key') == 'nvidia.com/gpu' for t in spec.get('tolerations', [])), name + ': agent tolerates GPU taints')
    if name != 'overlays/cpu-dev':
        check(spec.get('nodeSelector', {}).get('nvidia.com/gpu.present') == 'true', name + ': agent on GPU nodes only')

    sts = by[('StatefulSet', 'vigil-worker')]
    wspec = pod_spec(sts)
    w = wspec['containers'][0]
    check(w['startupProbe']['httpGet']['path'] == '/health' and w['livenessProbe']['httpGet']['path'] == '/health'
          and w['readinessProbe']['httpGet']['path'] == '/ready', name + ': worker probes on /health and /ready')
    cfg = yaml.safe_load(by[('ConfigMap', 'vigil-worker')]['data']['worker.yaml'])
    drain = seconds(cfg['server']['drain_grace'])
    pre = w['lifecycle']['preStop'].get('sleep', {}).get('seconds')
    check(pre is not None, name + ': preStop is a sleep action (the image has no sleep binary)')
    check(wspec['terminationGracePeriodSeconds'] >= int(pre or 0) + drain,
          name + ': terminationGracePeriodSeconds %d < preStop %s + drain %d' % (wspec['terminationGracePeriodSeconds'], pre, drain))
    check(cfg['server']['port'] == w['ports'][0]['containerPort'], name + ': worker config port = container port')
    check(w['resources'].get('requests') and w['resources'].get('limits'), name + ': worker resources')
    api_key = [e for e in w.get('env', []) if e['name'] == 'VIGIL_API_KEY']
    check(len(api_key) == 1 and 'secretKeyRef' in api_key[0].get('valueFrom', {}), name + ': worker API key from a Secret: %s' % api_key)
    check('api_key' not in cfg['server'], name + ': an API key in the worker\'s ConfigMap')

    # Each NetworkPolicy selects its pods and admits them on a port they have, from named peers.
    for np, pods, c in (('vigil-agent', ds, agent), ('vigil-worker', sts, w)):
        spec = by[('NetworkPolicy', np)]['spec']
        check(spec['podSelector']['matchLabels'].items() <= pods['spec']['template']['metadata']['labels'].items(),
              name + ': NetworkPolicy %s selects its pods' % np)
        check(spec['policyTypes'] == ['Ingress'] and all(r.get('from') for r in spec['ingress']),
              name + ': NetworkPolicy %s: ingress rules, each from named peers' % np)
        ports = {p['port'] for r in spec['ingress'] for p in r['ports']}
        check(ports <= {p['name'] for p in c['ports']}, name + ': NetworkPolicy %s ports %s' % (np, ports))

    # prometheus-operator objects: their selectors and ports must reach the pods.
    pm = by[('PodMonitor', 'vigil-agent')]
    check(pm['spec']['selector']['matchLabels'].items() <= ds['spec']['template']['metadata']['labels'].items(), name + ': PodMonitor selects the agent')
    check({e['port'] for e in pm['spec']['podMetricsEndpoints']} <= {p['name'] for p in agent['ports']}, name + ': PodMonitor port')
    sm = by[('ServiceMonitor', 'vigil-worker')]
    svc = by[('Service', 'vigil-worker')]
    check(sm['spec']['selector']['matchLabels'].items() <= svc['metadata']['labels'].items(), name + ': ServiceMonitor selects the Service')
    check({e['port'] for e in sm['spec']['endpoints']} <= {p['name'] for p in svc['spec']['ports']}, name + ': ServiceMonitor port')
    check(svc['spec']['selector'].items() <= sts['spec']['template']['metadata']['labels'].items(), name + ': Service selects the workers')
    check(sts['spec']['serviceName'] == svc['metadata']['name'], name + ': StatefulSet governing service')
    for mon, job in ((pm['spec']['podMetricsEndpoints'][0], 'vigil-agent'), (sm['spec']['endpoints'][0], 'vigil-worker')):
        check({'targetLabel': 'job', 'replacement': job} in mon.get('relabelings', []), name + ': job label %s for the rules' % job)
    with tempfile.NamedTemporaryFile('w', suffix='.yaml') as f:
        yaml.safe_dump(by[('PrometheusRule', 'vigil')]['spec'], f)
        f.flush()
        r = subprocess.run(['promtool', 'check', 'rules', f.name], capture_output=True, text=True)
        check(r.returncode == 0, name + ': PrometheusRule spec: ' + r.stdout + r.stderr)
    # Runbook links: the overlay's own pattern (alerts-config.json) where it sets one.
    cfg_path = os.path.join(KDIR, name, 'alerts-config.json')
    if os.path.exists(cfg_path):
        pattern = json.load(open(cfg_path))['runbookURLPattern']
        urls = [(r['alert'], r['annotations']['runbook_url']) for g in by[('PrometheusRule', 'vigil')]['spec']['groups']
                for r in g['rules'] if 'alert' in r]
        check(urls and all(u == pattern % a for a, u in urls), name + ': runbook URLs not from its alerts-config.json')
    am = yaml.safe_load(by[('Secret', 'alertmanager-vigil')]['stringData']['alertmanager.yaml'])
    check('route' in am and 'receivers' in am, name + ': Alertmanager Secret holds a config')


def main():
    for target in TARGETS:
        objs = render(target)
        if not objs:
            continue  # the renderer's error is recorded
        core = [o for o in objs if o['kind'] not in CRDS]
        for version in K8S_VERSIONS:
            for o in core:
                try:
                    kubernetes_validate.validate(o, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    errors.append('%s: %s/%s against Kubernetes %s: %s at %s' % (target, o['kind'], o['metadata']['name'], version, e.message, list(e.path)))
        check_contract(target, objs)
        print('%s: %d objects (%d validated against Kubernetes %s; %s wired and checked)' % (
            target, len(objs), len(core), ' and '.join(K8S_VERSIONS), ', '.join(sorted({o['kind'] for o in objs if o['kind'] in CRDS}))))
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
