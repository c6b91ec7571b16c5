#!/usr/bin/env python3
"""deploy/helm/vigil through Helm's own engine (helm-python-sdk: Helm's Go packages as a library):
`helm lint --strict`, values.schema.json refusing wrong types, every agent config key reaching the
agent's ConfigMap, the monitor and dashboard toggles, the install closed by default (#46: the
worker's key from a Secret, both NetworkPolicies, only /sys/fs/bpf/vigil mounted), and the
PrometheusRule and dashboards equal to the generated files (alerts/generated, dashboards/generated).
usage: helm_chart_test.py"""
import glob
import json
import os
import sys

import helm_python as helm
import yaml

import podman_flags

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))

CHART = podman_flags.CHART
KUBE_VERSIONS = ['v1.29.0', 'v1.37.0']
errors = []


def check(ok, msg):
    if not ok:
        errors.append(msg)


def objects(values=None):
    return {(o['kind'], o['metadata']['name']): o for o in podman_flags.render_chart(values)}


def lint():
    for kube in KUBE_VERSIONS:
        report = helm.lint(CHART, strict=True, kube_version=kube)
        problems = [m for m in report['messages'] if m['severity'] >= 2] + report['errors']
        print('helm lint --strict --kube-version %s: %d charts, %d warnings or errors' % (
            kube, report['total_charts_linted'], len(problems)))
        check(report['total_charts_linted'] == 1 and not problems, 'lint %s: %s' % (kube, problems))


def schema_refuses():
    """Wrong types must be refused before anything renders (values.schema.json)."""
    for bad in ({'agent': {'config': {'probes': {'cuda': 'no'}}}},
                {'agent': {'config': {'bpf_stats': 'yes'}}},
                {'agent': {'config': {'probes': {'disable': 'cuda'}}}},
                {'agent': {'monitor': {'sampleLimit': '1000'}}},
                {'agent': {'monitor': {'kind': 'Probe'}}},
                {'agent': {'nodeSelector': {'gpu': True}}},
                {'worker': {'replicas': '2'}},
                {'namespaces': {'agent': 'Vigil_System'}},
                {'prometheusRule': {'runbookUrlBase': 'docs/runbooks/'}},
                {'agent': {'networkPolicy': {'enabled': True, 'from': [{}]}}},
                {'agent': {'webConfig': {'probes': 'exec'}}},
                {'agent': {'webConfig': {'file': 'web/web.yml'}}},
                {'agent': {'imagee': {}}},
                {'worker': {'config': {'server': {'api_key': 'sk-in-a-configmap'}}}},
                {'worker': {'apiKey': {'existingSecret': 'Worker_Key'}}},
                {'worker': {'apiKey': {'key': 'a/b'}}},
                {'worker': {'networkPolicy': {'clients': [{}]}}},
                {'worker': {'networkPolicy': {'scraper': {'podSelector': {}}}}}):
        try:
            podman_flags.render_chart(bad)
            errors.append('values accepted, the schema should refuse them: %s' % json.dumps(bad))
        except podman_flags.ManifestError as e:
            print('refused %s: %s' % (json.dumps(bad), str(e).splitlines()[-1].strip()))


def agent_config_passes_through():
    """Any agent key, known to the chart or not, reaches agent.yaml unchanged: the agent's own
    parser (agent/config/config.cpp) is the judge of its keys."""
    cfg = {'bpf_stats': True, 'probes': {'cuda': False, 'disable': ['cuda:cuMemAlloc_v2', 'cuda:cuGraphLaunch']},
           'libraries': {'discover': False, 'cuda': ['/usr/lib/x86_64-linux-gnu/libcuda.so.1']},
           'kubernetes': {'container_logs': '/var/log/containers'}, 'tcp': {'top_peers': 7},
           'a_key_added_later': {'nested': 1}}
    objs = objects({'agent': {'config': cfg}})
    rendered = yaml.safe_load(objs[('ConfigMap', 'vigil-agent')]['data']['agent.yaml'])
    defaults = yaml.safe_load(open(os.path.join(CHART, 'values.yaml')))['agent']['config']
    for key, value in cfg.items():
        want = dict(defaults.get(key, {}), **value) if isinstance(value, dict) else value
        check(rendered.get(key) == want, 'agent config %s: rendered %s, set %s' % (key, rendered.get(key), want))
    print('agent.yaml with the set keys: %s' % json.dumps({k: rendered[k] for k in cfg}))
    # The metrics port follows the config's listen address.
    objs = objects({'agent': {'config': {'listen': '0.0.0.0:9500'}}})
    port = objs[('DaemonSet', 'vigil-agent')]['spec']['template']['spec']['containers'][0]['ports'][0]['containerPort']
    check(port == 9500, 'containerPort %s, listen says 9500' % port)


def monitors():
    objs = objects()
    pm = objs[('PodMonitor', 'vigil-agent')]['spec']
    relabel = pm['podMetricsEndpoints'][0]['relabelings']
    check({'targetLabel': 'job', 'replacement': 'vigil-agent'} in relabel, 'agent PodMonitor sets job=vigil-agent')
    check('sampleLimit' not in pm, 'sampleLimit 0 is not rendered (no limit)')
    extra = {'action': 'replace', 'targetLabel': 'cluster', 'replacement': 'gpu-a'}
    objs = objects({'agent': {'monitor': {'kind': 'ServiceMonitor', 'sampleLimit': 20000, 'interval': '30s',
                                          'relabelings': [extra], 'labels': {'release': 'kps'}}}})
    check(('PodMonitor', 'vigil-agent') not in objs, 'ServiceMonitor kind still renders a PodMonitor')
    sm = objs[('ServiceMonitor', 'vigil-agent')]
    ep = sm['spec']['endpoints'][0]
    check(sm['spec']['sampleLimit'] == 20000 and ep['interval'] == '30s', 'ServiceMonitor sampleLimit/interval')
    check(ep['relabelings'][:3] == relabel and ep['relabelings'][3:] == [extra],
          'the rules\' relabelings first, the user\'s after: %s' % ep['relabelings'])
    check(sm['metadata']['labels'].get('release') == 'kps', 'monitor labels')
    svc = objs.get(('Service', 'vigil-agent'))
    check(svc is not None and svc['spec']['clusterIP'] == 'None' and svc['spec']['ports'][0]['port'] == 9435,
          'a ServiceMonitor gets a headless Service on the metrics port')
    objs = objects({'agent': {'monitor': {'enabled': False}}, 'worker': {'monitor': {'enabled': False}}})
    check(not any(k in ('PodMonitor', 'ServiceMonitor') for k, _ in objs), 'monitors disabled')
    print('monitors: PodMonitor by default, ServiceMonitor + headless Service, sampleLimit, relabelings, off')


SCRAPER = {'namespaceSelector': {'matchLabels': {'kubernetes.io/metadata.name': 'monitoring'}},
           'podSelector': {'matchLabels': {'app.kubernetes.io/name': 'prometheus'}}}


def network_policies():
    """Both on by default: the agent's admits the scraper, the worker's its namespace's pods and
    the scraper, each to its one port; off, or opened, by values."""
    objs = objects()
    agent = objs.get(('NetworkPolicy', 'vigil-agent'))
    check(agent is not None and agent['spec']['podSelector']['matchLabels'] == {'app.kubernetes.io/name': 'vigil-agent'}
          and agent['spec']['policyTypes'] == ['Ingress']
          and agent['spec']['ingress'] == [{'from': [SCRAPER], 'ports': [{'port': 'metrics', 'protocol': 'TCP'}]}],
          'agent NetworkPolicy by default, only the scraper, only metrics: %s' % (agent and agent['spec']))
    worker = objs.get(('NetworkPolicy', 'vigil-worker'))
    check(worker is not None and worker['metadata']['namespace'] == 'vigil'
          and worker['spec']['podSelector']['matchLabels'] == {'app.kubernetes.io/name': 'vigil-worker'}
          and worker['spec']['policyTypes'] == ['Ingress']
          and worker['spec']['ingress'] == [{'from': [{'podSelector': {}}, SCRAPER], 'ports': [{'port': 'http', 'protocol': 'TCP'}]}],
          'worker NetworkPolicy by default, its namespace\'s pods and the scraper, only http: %s' % (worker and worker['spec']))
    scraper = {'namespaceSelector': {'matchLabels': {'kubernetes.io/metadata.name': 'observability'}},
               'podSelector': {'matchLabels': {'app': 'vmagent'}}}
    gateway = {'namespaceSelector': {'matchLabels': {'kubernetes.io/metadata.name': 'gateway'}}}
    objs = objects({'agent': {'networkPolicy': {'from': [scraper]}},
                    'worker': {'networkPolicy': {'clients': [gateway], 'scraper': [scraper]}}})
    check(objs[('NetworkPolicy', 'vigil-agent')]['spec']['ingress'][0]['from'] == [scraper], 'agent from replaced')
    check(objs[('NetworkPolicy', 'vigil-worker')]['spec']['ingress'][0]['from'] == [gateway, scraper], 'worker peers replaced')
    # No peer at all admits nobody (but the node): never a rule without `from`, which admits everyone.
    closed = objects({'worker': {'networkPolicy': {'clients': [], 'scraper': []}}})[('NetworkPolicy', 'vigil-worker')]
    check(closed['spec']['ingress'] == [], 'worker with no peers: %s' % closed['spec'])
    objs = objects({'agent': {'networkPolicy': {'enabled': False}}, 'worker': {'networkPolicy': {'enabled': False}}})
    check(not any(k == 'NetworkPolicy' for k, _ in objs), 'NetworkPolicies off: %s' % sorted(objs))
    print('NetworkPolicies: on by default (agent: the scraper to metrics; worker: its namespace and the scraper to http), peers replaced, none admits nobody, off')


def worker_env(values=None):
    return objects(values)[('StatefulSet', 'vigil-worker')]['spec']['template']['spec']['containers'][0].get('env')


def worker_api_key():
    """VIGIL_API_KEY from the Secret named by worker.apiKey (default vigil-worker-api-key, key
    "key"), never a value in the manifests; "" serves /v1/* open and keeps the NetworkPolicy."""
    key_from = lambda name, key: {'name': 'VIGIL_API_KEY', 'valueFrom': {'secretKeyRef': {'name': name, 'key': key}}}
    env = worker_env()
    check(env == [key_from('vigil-worker-api-key', 'key')], 'default worker env %s' % env)
    extra = {'name': 'OMP_NUM_THREADS', 'value': '4'}
    env = worker_env({'worker': {'apiKey': {'existingSecret': 'llm-key', 'key': 'token'}, 'extraEnv': [extra]}})
    check(env == [key_from('llm-key', 'token'), extra], 'worker env with another Secret and extraEnv %s' % env)
    objs = objects({'worker': {'apiKey': {'existingSecret': ''}}})
    env = objs[('StatefulSet', 'vigil-worker')]['spec']['template']['spec']['containers'][0].get('env')
    check(env is None, 'existingSecret "" still renders env %s' % env)
    check(('NetworkPolicy', 'vigil-worker') in objs, 'existingSecret "" drops the worker NetworkPolicy')
    cfg = yaml.safe_load(objects()[('ConfigMap', 'vigil-worker')]['data']['worker.yaml'])
    check('api_key' not in cfg['server'] and not cfg['server'].get('metrics_need_key'),
          'the scrape needs no key by default: %s' % cfg['server'])
    try:
        objects({'worker': {'config': {'server': {'api_key': 'sk-test'}}}})
        errors.append('worker.config.server.api_key accepted: the key would be in the ConfigMap')
    except podman_flags.ManifestError as e:
        check('/worker/config/server/api_key' in str(e), 'the refusal does not name the key: %s' % e)
    schema = json.load(open(os.path.join(CHART, 'values.schema.json')))
    why = schema['properties']['worker']['properties']['config']['properties']['server']['properties']['api_key']
    check('worker.apiKey.existingSecret' in why.get('description', ''), 'the schema does not say where the key goes: %s' % why)
    try:
        objects({'worker': {'apiKey': {'existingSecret': ''}, 'config': {'server': {'metrics_need_key': True}}}})
        errors.append('metrics_need_key without a key rendered (the worker refuses it at start)')
    except podman_flags.ManifestError as e:
        check('worker.apiKey.existingSecret' in str(e), 'metrics_need_key without a key: %s' % e)
    print('worker key: VIGIL_API_KEY from Secret vigil-worker-api-key by default, another Secret and key, "" open, '
          'none in worker.config, metrics_need_key needs one')


def agent_bpffs():
    """Only the node's /sys/fs/bpf/vigil, created if missing, mounted read-write outside the
    container's /sys and named as the agent's pin root."""
    pod = objects()[('DaemonSet', 'vigil-agent')]['spec']['template']['spec']
    c = pod['containers'][0]
    host = {v['name']: v['hostPath'] for v in pod['volumes'] if 'hostPath' in v}
    check(host.get('bpffs') == {'path': '/sys/fs/bpf/vigil', 'type': 'DirectoryOrCreate'}, 'bpffs volume %s' % host.get('bpffs'))
    check(not any(h['path'] == '/sys/fs/bpf' for h in host.values()), 'the whole /sys/fs/bpf is mounted: %s' % host)
    mount = [m for m in c['volumeMounts'] if m['name'] == 'bpffs']
    check(mount == [{'name': 'bpffs', 'mountPath': '/var/lib/vigil/bpf', 'mountPropagation': 'HostToContainer'}],
          'bpffs mount %s' % mount)
    check(c['args'][-2:] == ['--bpf-pin-root', '/var/lib/vigil/bpf'], 'the pin root is not the mount: %s' % c['args'])
    print('bpffs: /sys/fs/bpf/vigil (DirectoryOrCreate) at /var/lib/vigil/bpf, --bpf-pin-root there')


def web_config():
    """agent.webConfig (#30): off by default; with a Secret, mounted read-only as a directory (so the
    kubelet's updates arrive), --web.config.file naming its file, probes over HTTPS, or TCP when
    the web config requires client certificates the kubelet cannot present."""
    def agent(values):
        pod = objects(values)[('DaemonSet', 'vigil-agent')]['spec']['template']['spec']
        return pod, pod['containers'][0]
    pod, c = agent(None)
    check(not any(a.startswith('--web.config.file') for a in c['args']), 'web config on by default: %s' % c['args'])
    check(c['livenessProbe']['httpGet'].get('scheme', 'HTTP') == 'HTTP', 'default probe not plain HTTP')
    pod, c = agent({'agent': {'webConfig': {'secretName': 'agent-tls', 'file': 'config.yml'}}})
    check(c['args'][-1] == '--web.config.file=/etc/vigil/web/config.yml', 'args %s' % c['args'])
    mount = [m for m in c['volumeMounts'] if m['name'] == 'web-config']
    check(mount == [{'name': 'web-config', 'mountPath': '/etc/vigil/web', 'readOnly': True}], 'mount %s' % mount)
    volume = [v for v in pod['volumes'] if v['name'] == 'web-config']
    check(volume == [{'name': 'web-config', 'secret': {'secretName': 'agent-tls', 'defaultMode': 0o400}}],
          'volume %s' % volume)
    for probe, path in (('livenessProbe', '/healthz'), ('readinessProbe', '/readyz')):
        check(c[probe]['httpGet'] == {'path': path, 'port': 'metrics', 'scheme': 'HTTPS'}, '%s %s' % (probe, c[probe]))
    pod, c = agent({'agent': {'webConfig': {'secretName': 'agent-tls', 'probes': 'tcp'}}})
    for probe in ('livenessProbe', 'readinessProbe'):
        check(c[probe].get('tcpSocket') == {'port': 'metrics'} and 'httpGet' not in c[probe], '%s %s' % (probe, c[probe]))
    endpoint = objects({'agent': {'monitor': {'endpoint': {'scheme': 'https', 'tlsConfig': {'serverName': 'vigil-agent'}}}}})[
        ('PodMonitor', 'vigil-agent')]['spec']['podMetricsEndpoints'][0]
    check(endpoint.get('scheme') == 'https' and endpoint.get('tlsConfig') == {'serverName': 'vigil-agent'},
          'monitor endpoint %s' % endpoint)
    auth = {'type': 'Bearer', 'credentials': {'name': 'vigil-worker-api-key', 'key': 'key'}}
    endpoint = objects({'worker': {'monitor': {'endpoint': {'authorization': auth}}}})[
        ('ServiceMonitor', 'vigil-worker')]['spec']['endpoints'][0]
    check(endpoint.get('authorization') == auth, 'worker monitor endpoint %s' % endpoint)
    print('webConfig: Secret mounted read-only, --web.config.file set, probes HTTPS (or TCP), scrape endpoints merged')


def rules_and_dashboards():
    """The PrometheusRule's spec is alerts/generated/vigil.rules.yaml, the dashboards ConfigMap
    holds dashboards/generated/*.json byte for byte; a runbook base moves every link."""
    objs = objects()
    generated = yaml.safe_load(open(os.path.join(ROOT, 'alerts', 'generated', 'vigil.rules.yaml')))
    check(objs[('PrometheusRule', 'vigil')]['spec'] == generated, 'PrometheusRule differs from the generated rules')
    alerts = [r for g in generated['groups'] for r in g['rules'] if 'alert' in r]
    base = 'https://wiki.example.com/sre/vigil/'
    moved = objects({'prometheusRule': {'runbookUrlBase': base}})[('PrometheusRule', 'vigil')]['spec']
    urls = {r['alert']: r['annotations']['runbook_url'] for g in moved['groups'] for r in g['rules'] if 'alert' in r}
    check(len(urls) == len(alerts) and all(u == '%s%s.md' % (base, a) for a, u in urls.items()),
          'runbook links not all on %s: %s' % (base, urls))
    files = {os.path.basename(f): open(f).read() for f in glob.glob(os.path.join(ROOT, 'dashboards', 'generated', '*.json'))}
    cm = objs[('ConfigMap', 'vigil-dashboards')]
    check(cm['data'] == files, 'dashboards ConfigMap differs from dashboards/generated: %s vs %s' % (sorted(cm['data']), sorted(files)))
    check(cm['metadata']['labels'].get('grafana_dashboard') == '1', 'dashboards carry the sidecar label')
    check(('ConfigMap', 'vigil-dashboards') not in objects({'dashboards': {'enabled': False}}), 'dashboards toggle')
    check(('PrometheusRule', 'vigil') not in objects({'prometheusRule': {'enabled': False}}), 'rule toggle')
    print('PrometheusRule = alerts/generated/vigil.rules.yaml (%d alerts, links moved to %s); dashboards = %d generated files'
          % (len(alerts), base, len(files)))


def main():
    helm.disable_logging()
    print('Helm SDK %s (helm-python-sdk %s)' % (helm.helm_sdk_version(), helm.__version__))
    lint()
    schema_refuses()
    agent_config_passes_through()
    monitors()
    network_policies()
    worker_api_key()
    agent_bpffs()
    web_config()
    rules_and_dashboards()
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
