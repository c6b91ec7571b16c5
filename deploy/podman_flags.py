#!/usr/bin/env python3
"""The `podman run` arguments that reproduce a workload's pod from deploy/, so that the
securityContext the cluster would apply is the one a local run gets: derived from the rendered
manifests (`kubectl kustomize` of deploy/kubernetes, or Helm's own engine rendering the chart
deploy/helm/vigil through helm-python-sdk), never written twice.

Maps, for the workload's first container: hostPID, hostNetwork; the container's capabilities
(drop, add), readOnlyRootFilesystem, runAsUser/runAsGroup (pod or container), allowPrivilegeEscalation,
seccompProfile; every volumeMount of a hostPath (same path on this host), configMap (its data
written to files under --state-dir) or emptyDir (a tmpfs); the image and args. A pod that asks for
`privileged` is refused: nothing here runs privileged. Resources are not mapped (limits are the
kubelet's business; this sandbox's cgroup v1 hierarchy refuses podman's).

usage: deploy/podman_flags.py [--overlay base | --chart] [--workload vigil-agent] --state-dir DIR
       [--publish HOST:CONTAINER] [--image IMAGE]
Prints one argument per line (everything after `podman run`).
"""
import argparse
import os
import shutil
import subprocess
import sys

import yaml

KDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'kubernetes')
CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'helm', 'vigil')


class ManifestError(Exception):
    pass


def render(overlay):
    kubectl = shutil.which('kubectl')
    if kubectl is None:
        raise ManifestError('kubectl not found (kubectl kustomize renders deploy/kubernetes)')
    out = subprocess.run([kubectl, 'kustomize', os.path.join(KDIR, overlay)], capture_output=True, text=True)
    if out.returncode != 0:
        raise ManifestError('kubectl kustomize %s: %s' % (overlay, out.stderr.strip()))
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def render_chart(values=None, release='vigil', namespace='monitoring'):
    """The chart's objects as `helm template` would print them, rendered by Helm's engine."""
    import helm_python as helm  # only the chart needs it (tests/alerts/python_env.sh installs it)
    helm.disable_logging()
    try:
        with helm.Chart.load(CHART) as chart:
            out = chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm.HelmError as e:
        raise ManifestError('helm template %s: %s' % (CHART, e))
    return [d for _, text in sorted(out.items()) for d in yaml.safe_load_all(text) if d]


def workload(objs, name):
    for o in objs:
        if o['kind'] in ('DaemonSet', 'Deployment', 'StatefulSet') and o['metadata']['name'] == name:
            return o
    raise ManifestError('no DaemonSet, Deployment or StatefulSet named %s in the rendered manifests' % name)


def config_map(objs, name):
    for o in objs:
        if o['kind'] == 'ConfigMap' and o['metadata']['name'] == name:
            return o.get('data', {})
    raise ManifestError('ConfigMap %s is mounted but not in the rendered manifests' % name)


def podman_args(objs, name, state_dir, publish=None, image=None):
    pod = workload(objs, name)['spec']['template']['spec']
    c = pod['containers'][0]
    sc = c.get('securityContext', {})
    psc = pod.get('securityContext', {})
    if sc.get('privileged'):
        raise ManifestError('%s asks for privileged: refused (the point is to run without it)' % name)
    args = []
    if pod.get('hostPID'):
        args.append('--pid=host')
    if pod.get('hostNetwork'):
        args.append('--network=host')
    caps = sc.get('capabilities', {})
    for cap in caps.get('drop', []):
        args.append('--cap-drop=' + cap.lower())
    if caps.get('add'):
        args.append('--cap-add=' + ','.join(cap.lower() for cap in caps['add']))
    if sc.get('readOnlyRootFilesystem'):
        args.append('--read-only')
    user = sc.get('runAsUser', psc.get('runAsUser'))
    group = sc.get('runAsGroup', psc.get('runAsGroup'))
    if user is not None:
        args += ['--user', str(user) if group is None else '%s:%s' % (user, group)]
    if sc.get('allowPrivilegeEscalation') is False:
        args += ['--security-opt', 'no-new-privileges']
    seccomp = sc.get('seccompProfile', psc.get('seccompProfile', {})).get('type', 'RuntimeDefault')
    if seccomp == 'Unconfined':
        args += ['--security-opt', 'seccomp=unconfined']
    elif seccomp != 'RuntimeDefault':
        raise ManifestError('seccompProfile %s is not mapped' % seccomp)
    volumes = {v['name']: v for v in pod.get('volumes', [])}
    for m in c.get('volumeMounts', []):
        v = volumes.get(m['name'])
        if v is None:
            raise ManifestError('volumeMount %s names no volume' % m['name'])
        ro = ':ro' if m.get('readOnly') else ''
        if 'hostPath' in v:
            args += ['-v', '%s:%s%s' % (v['hostPath']['path'], m['mountPath'], ro)]
        elif 'configMap' in v:
            d = os.path.join(state_dir, 'configmap-' + v['configMap']['name'])
            os.makedirs(d, exist_ok=True)
            for key, text in config_map(objs, v['configMap']['name']).items():
                with open(os.path.join(d, key), 'w') as f:
                    f.write(text)
            args += ['-v', '%s:%s%s' % (d, m['mountPath'], ro)]
        elif 'emptyDir' in v:
            args += ['--tmpfs', m['mountPath']]
        else:
            raise ManifestError('volume %s: only hostPath, configMap and emptyDir are mapped' % m['name'])
    if publish:
        args += ['-p', publish]
    args.append(image or c['image'])
    args += c.get('command', []) + c.get('args', [])
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument('--overlay', default='base', help='kustomize target under deploy/kubernetes')
    src.add_argument('--chart', action='store_true', help='the Helm chart with its default values')
    ap.add_argument('--workload', default='vigil-agent')
    ap.add_argument('--state-dir', required=True, help='where mounted ConfigMaps are written')
    ap.add_argument('--publish')
    ap.add_argument('--image')
    a = ap.parse_args()
    try:
        objs = render_chart() if a.chart else render(a.overlay)
        print('\n'.join(podman_args(objs, a.workload, a.state_dir, a.publish, a.image)))
    except ManifestError as e:
        print('podman_flags: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
