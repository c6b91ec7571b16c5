"""The Pod Security Standards' controls, as the standard publishes them
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Baseline" and
"Restricted" tables, policy version latest as of Kubernetes 1.34): violations(pod_spec, level)
lists every control a pod spec breaks at level "baseline" or "restricted" ("privileged" has none).
Pod-level annotations (AppArmor's legacy annotations) are passed in with the pod spec's metadata."""

# Baseline, "Capabilities": adding any other is forbidden.
BASELINE_CAPABILITIES = {'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD',
                         'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'}
# Baseline, "Sysctls": the safe set.
SAFE_SYSCTLS = {'kernel.shm_rmid_forced', 'net.ipv4.ip_local_port_range', 'net.ipv4.ip_unprivileged_port_start',
                'net.ipv4.tcp_syncookies', 'net.ipv4.ping_group_range', 'net.ipv4.ip_local_reserved_ports',
                'net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl',
                'net.ipv4.tcp_keepalive_probes'}
# Baseline, "SELinux": the allowed types.
SELINUX_TYPES = {None, '', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'}
# Restricted, "Volume Types": the only ones allowed.
RESTRICTED_VOLUMES = {'configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim',
                      'projected', 'secret'}
LEVELS = ('privileged', 'baseline', 'restricted')


def containers(spec):
    for field in ('initContainers', 'containers', 'ephemeralContainers'):
        for c in spec.get(field) or []:
            yield '%s[%s]' % (field, c.get('name')), c


def baseline(spec, annotations):
    v = []
    psc = spec.get('securityContext') or {}
    scs = [(where, c.get('securityContext') or {}) for where, c in containers(spec)]
    if (psc.get('windowsOptions') or {}).get('hostProcess') or any((sc.get('windowsOptions') or {}).get('hostProcess') for _, sc in scs):
        v.append('HostProcess: windowsOptions.hostProcess')
    for ns in ('hostNetwork', 'hostPID', 'hostIPC'):
        if spec.get(ns):
            v.append('Host Namespaces: spec.%s' % ns)
    for where, sc in scs:
        if sc.get('privileged'):
            v.append('Privileged Containers: %s' % where)
        added = set((sc.get('capabilities') or {}).get('add') or []) - BASELINE_CAPABILITIES
        if added:
            v.append('Capabilities: %s adds %s' % (where, sorted(added)))
        if (sc.get('procMount') or 'Default') != 'Default':
            v.append('/proc Mount Type: %s' % where)
    for vol in spec.get('volumes') or []:
        if 'hostPath' in vol:
            v.append('HostPath Volumes: %s (%s)' % (vol['name'], vol['hostPath']['path']))
    for where, c in containers(spec):
        if any(p.get('hostPort') for p in c.get('ports') or []):
            v.append('Host Ports: %s' % where)
    for where, sc in [('pod', psc)] + scs:
        if (sc.get('appArmorProfile') or {}).get('type') not in (None, 'RuntimeDefault', 'Localhost'):
            v.append('AppArmor: %s %s' % (where, sc['appArmorProfile']))
        se = sc.get('seLinuxOptions') or {}
        if se.get('type') not in SELINUX_TYPES or se.get('user') or se.get('role'):
            v.append('SELinux: %s %s' % (where, se))
        if (sc.get('seccompProfile') or {}).get('type') == 'Unconfined':
            v.append('Seccomp: %s Unconfined' % where)
    for key, value in (annotations or {}).items():
        if key.startswith('container.apparmor.security.beta.kubernetes.io/') and not (
                value == 'runtime/default' or value.startswith('localhost/')):
            v.append('AppArmor: annotation %s=%s' % (key, value))
    for s in psc.get('sysctls') or []:
        if s['name'] not in SAFE_SYSCTLS:
            v.append('Sysctls: %s' % s['name'])
    return v


def restricted(spec):
    v = []
    psc = spec.get('securityContext') or {}
    for vol in spec.get('volumes') or []:
        kinds = set(vol) - {'name'}
        if not kinds <= RESTRICTED_VOLUMES:
            v.append('Volume Types: %s is %s' % (vol['name'], sorted(kinds)))
    for where, c in containers(spec):
        sc = c.get('securityContext') or {}
        if sc.get('allowPrivilegeEscalation') is not False:
            v.append('Privilege Escalation: %s allowPrivilegeEscalation not false' % where)
        if not sc.get('runAsNonRoot', psc.get('runAsNonRoot')):
            v.append('Running as Non-root: %s' % where)
        if sc.get('runAsUser', psc.get('runAsUser')) == 0:
            v.append('Running as Non-root user: %s runAsUser 0' % where)
        if (sc.get('seccompProfile') or psc.get('seccompProfile') or {}).get('type') not in ('RuntimeDefault', 'Localhost'):
            v.append('Seccomp: %s neither RuntimeDefault nor Localhost' % where)
        caps = sc.get('capabilities') or {}
        if 'ALL' not in (caps.get('drop') or []):
            v.append('Capabilities: %s does not drop ALL' % where)
        if set(caps.get('add') or []) - {'NET_BIND_SERVICE'}:
            v.append('Capabilities: %s adds %s' % (where, sorted(set(caps['add']) - {'NET_BIND_SERVICE'})))
    if psc.get('runAsUser') == 0:
        v.append('Running as Non-root user: pod runAsUser 0')
    return v


def violations(spec, level, annotations=None):
    if level not in LEVELS:
        raise ValueError('no Pod Security Standards level %r' % level)
    if level == 'privileged':
        return []
    v = baseline(spec, annotations)
    return v + restricted(spec) if level == 'restricted' else v
