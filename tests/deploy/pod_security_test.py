#!/usr/bin/env python3
"""The agent and the worker each in a namespace whose PodSecurity label admits its pod: every pod
template rendered by the chart (defaults, and the worker enabled with every toggle) and by the
kustomize base and overlays is checked against the Pod Security Standards' rules
(pod_security.py) at the level its namespace enforces. The worker's namespace must enforce
"restricted" and the agent's must be the only "privileged" one; that the agent's pod needs it
is shown too (its baseline violations are the privileges docs/deploy.md explains). The checker is
first run on hand-made pods that break one control each, so a checker that passes everything
fails here.
usage: pod_security_test.py"""
import sys

import podman_flags
from pod_security import violations

ENFORCE = 'pod-security.kubernetes.io/enforce'
# The agent's reasons to be privileged: each is in docs/deploy.md's privilege table.
AGENT_BASELINE_VIOLATIONS = {'Host Namespaces: spec.hostPID', "Capabilities: containers[agent] adds ['DAC_READ_SEARCH', 'SYS_ADMIN', 'SYS_PTRACE']",
                             'HostPath Volumes: btf (/sys/kernel/btf)', 'HostPath Volumes: tracing (/sys/kernel/tracing)',
                             'HostPath Volumes: container-logs (/var/log/containers)', 'HostPath Volumes: bpffs (/sys/fs/bpf/vigil)'}
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


RESTRICTED_POD = {'securityContext': {'runAsNonRoot': True, 'seccompProfile': {'type': 'RuntimeDefault'}},
                  'containers': [{'name': 'c', 'securityContext': {'allowPrivilegeEscalation': False,
                                                                   'capabilities': {'drop': ['ALL']}}}],
                  'volumes': [{'name': 'v', 'persistentVolumeClaim': {'claimName': 'x'}}]}


def with_change(path, value):
    import copy
    pod = copy.deepcopy(RESTRICTED_POD)
    node = pod
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return pod


def checker_catches():
    """One broken control at a time: baseline catches its own, restricted catches all of them."""
    check(violations(RESTRICTED_POD, 'restricted') == [], 'the compliant pod fails: %s' % violations(RESTRICTED_POD, 'restricted'))
    baseline_cases = [
        (('hostPID',), True), (('hostNetwork',), True), (('hostIPC',), True),
        (('containers', 0, 'securityContext', 'privileged'), True),
        (('containers', 0, 'securityContext', 'capabilities', 'add'), ['SYS_ADMIN']),
        (('volumes', 0), {'name': 'h', 'hostPath': {'path': '/'}}),
        (('containers', 0, 'ports'), [{'containerPort': 80, 'hostPort': 80}]),
        (('securityContext', 'seccompProfile'), {'type': 'Unconfined'}),
        (('containers', 0, 'securityContext', 'procMount'), 'Unmasked'),
        (('securityContext', 'sysctls'), [{'name': 'kernel.msgmax', 'value': '1'}]),
        (('securityContext', 'seLinuxOptions'), {'type': 'spc_t'}),
        (('containers', 0, 'securityContext', 'appArmorProfile'), {'type': 'Unconfined'}),
    ]
    restricted_cases = [
        (('volumes', 0), {'name': 'n', 'nfs': {'server': 'x', 'path': '/'}}),
        (('containers', 0, 'securityContext', 'allowPrivilegeEscalation'), True),
        (('securityContext', 'runAsNonRoot'), False),
        (('securityContext', 'runAsUser'), 0),
        (('securityContext', 'seccompProfile'), None),
        (('containers', 0, 'securityContext', 'capabilities', 'drop'), []),
        (('containers', 0, 'securityContext', 'capabilities', 'add'), ['CHOWN']),
    ]
    for path, value in baseline_cases:
        pod = with_change(path, value)
        check(violations(pod, 'baseline') and violations(pod, 'restricted') and not violations(pod, 'privileged'),
              'the checker misses %s=%s at baseline' % ('.'.join(map(str, path)), value))
    for path, value in restricted_cases:
        pod = with_change(path, value)
        check(violations(pod, 'restricted') and not violations(pod, 'baseline'),
              'the checker misses %s=%s at restricted only' % ('.'.join(map(str, path)), value))
    check(violations(RESTRICTED_POD, 'baseline', {'container.apparmor.security.beta.kubernetes.io/c': 'unconfined'}),
          'the checker misses an unconfined AppArmor annotation')
    print('checker: %d baseline and %d restricted controls each caught alone' % (len(baseline_cases), len(restricted_cases)))


def check_render(name, objs):
    levels = {o['metadata']['name']: o['metadata'].get('labels', {}).get(ENFORCE) for o in objs if o['kind'] == 'Namespace'}
    pods = [o for o in objs if o['kind'] in ('DaemonSet', 'StatefulSet', 'Deployment', 'Job', 'CronJob')]
    for o in pods:
        ns = o['metadata'].get('namespace')
        level = levels.get(ns)
        if level is None:
            errors.append('%s: %s/%s in namespace %s, which carries no %s label' % (name, o['kind'], o['metadata']['name'], ns, ENFORCE))
            continue
        tmpl = o['spec']['template']
        v = violations(tmpl['spec'], level, tmpl['metadata'].get('annotations'))
        check(not v, '%s: %s/%s breaks %s in namespace %s: %s' % (name, o['kind'], o['metadata']['name'], level, ns, v))
        if o['metadata']['name'] == 'vigil-worker':
            check(level == 'restricted', '%s: the worker\'s namespace %s enforces %s, not restricted' % (name, ns, level))
        if o['metadata']['name'] == 'vigil-agent':
            needs = set(violations(tmpl['spec'], 'baseline'))
            check(needs == AGENT_BASELINE_VIOLATIONS, '%s: the agent\'s reasons for privileged changed: %s' % (name, sorted(needs)))
        print('%s: %s/%s in %s (enforce %s): admitted' % (name, o['kind'], o['metadata']['name'], ns, level))
    privileged = sorted(ns for ns, level in levels.items() if level == 'privileged')
    check(privileged == ['vigil-system'], '%s: privileged namespaces %s, expected only the agent\'s' % (name, privileged))


def main():
    checker_catches()
    for target in ('base', 'overlays/production', 'overlays/cpu-dev', 'overlays/agent-web-config'):
        check_render('kustomize ' + target, podman_flags.render(target))
    check_render('helm defaults', podman_flags.render_chart())
    check_render('helm toggles', podman_flags.render_chart({
        'agent': {'monitor': {'kind': 'ServiceMonitor'}, 'networkPolicy': {'enabled': False}},
        'worker': {'replicas': 3, 'extraVolumes': [{'name': 'cache', 'emptyDir': {}}],
                   'extraVolumeMounts': [{'name': 'cache', 'mountPath': '/cache'}]}}))
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
