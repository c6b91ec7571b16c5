#!/usr/bin/env python3
"""The agent's own parser (agent/config/config.cpp) judges the agent.yaml the chart and the
kustomize base render: vigil-agent is started on each, without privileges (as nobody with no
capabilities, when run as root), so that a configuration it accepts gets as far as its privilege
check and exits 1 saying "missing privileges", and one it refuses exits 2 naming the key. Checked:
the chart's defaults, the chart with every key of config.cpp set through agent.config, the
kustomize base's, and a misspelt key set through the chart (refused, or the check means nothing).
usage: agent_config_accepted.py VIGIL_AGENT"""
import os
import subprocess
import sys
import tempfile

import yaml

import podman_flags

# Every key of agent/config/config.cpp, each away from its default where it can be.
EVERY_KEY = {
    'listen': '0.0.0.0:9500', 'kernel_btf': '/sys/kernel/btf/vmlinux', 'poll_interval': '2s',
    'discovery_interval': '15s', 'grace_period': '90s', 'housekeeping_stall_limit': '2m', 'bpf_stats': False,
    'probes': {'tcp': True, 'cuda': True, 'nccl': False, 'usdt': True, 'xid': False, 'disable': ['cuda:cuMemAlloc_v2']},
    'libraries': {'discover': False, 'cuda': ['/usr/lib/x86_64-linux-gnu/libcuda.so.1'], 'nccl': [], 'usdt': []},
    'windows': {'fragmentation': '10m'}, 'correlation': {'collective_timeout': '30m'},
    'kubernetes': {'container_logs': '/var/log/containers'}, 'tcp': {'top_peers': 10},
}
errors = []


def agent_yaml(objs):
    return next(o for o in objs if o['kind'] == 'ConfigMap' and o['metadata']['name'] == 'vigil-agent')['data']['agent.yaml']


def run_agent(agent, text, tmp):
    path = os.path.join(tmp, 'agent.yaml')
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, 0o644)
    drop = ['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups', '--inh-caps=-all',
            '--bounding-set=-all'] if os.geteuid() == 0 else []
    r = subprocess.run(drop + [agent, '--config', path], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stderr.strip()


def main():
    agent = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        cases = [('chart defaults', agent_yaml(podman_flags.render_chart()), 1),
                 ('chart with every key', agent_yaml(podman_flags.render_chart({'agent': {'config': EVERY_KEY}})), 1),
                 ('kustomize base', agent_yaml(podman_flags.render('base')), 1),
                 ('chart with a misspelt key', agent_yaml(podman_flags.render_chart({'agent': {'config': {'grace_periode': '1m'}}})), 2)]
        for name, text, want in cases:
            rc, err = run_agent(agent, text, tmp)
            ok = rc == want and ('missing privileges' in err if want == 1 else 'grace_periode' in err)
            print('%-26s exit %d: %s' % (name, rc, err.splitlines()[-1] if err else ''))
            if not ok:
                errors.append('%s: vigil-agent exited %d (%s), expected %d' % (name, rc, err, want))
        rendered = yaml.safe_load(agent_yaml(podman_flags.render_chart({'agent': {'config': EVERY_KEY}})))
        if rendered != EVERY_KEY:
            errors.append('agent.yaml is not agent.config: %s' % rendered)
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
