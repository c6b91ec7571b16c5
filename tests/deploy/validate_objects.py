#!/usr/bin/env python3
"""Every object the chart renders (its defaults, and every toggle on) and the kustomize base and
overlays render is validated offline: core objects against the Kubernetes OpenAPI schemas of the
oldest and newest supported versions (kubernetes-validate, strict: unknown fields fail), the
prometheus-operator objects against the operator's own CRD schemas (tests/deploy/crds, strict the
way `kubectl apply`'s server-side field validation is: a field the schema does not declare fails).
An object of a kind neither knows fails too.
usage: validate_objects.py"""
import glob
import os
import sys

import jsonschema
import kubernetes_validate
import yaml

import podman_flags

K8S_VERSIONS = ['1.29.0', '1.37.0']
CRD_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'crds')
# Every toggle away from its default, so that each template renders at least once.
ALL_TOGGLES = {
    'agent': {'monitor': {'kind': 'ServiceMonitor', 'sampleLimit': 50000,
                          'relabelings': [{'targetLabel': 'cluster', 'replacement': 'a'}], 'labels': {'release': 'kps'}},
              'networkPolicy': {'from': [{'namespaceSelector': {}}]}, 'podLabels': {'team': 'sre'}, 'podAnnotations': {'a': 'b'},
              'extraEnv': [{'name': 'TZ', 'value': 'UTC'}],
              'extraVolumes': [{'name': 'debugfs', 'hostPath': {'path': '/sys/kernel/debug', 'type': 'Directory'}}],
              'extraVolumeMounts': [{'name': 'debugfs', 'mountPath': '/sys/kernel/debug', 'readOnly': True}],
              'affinity': {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {'nodeSelectorTerms': [
                  {'matchExpressions': [{'key': 'kubernetes.io/os', 'operator': 'In', 'values': ['linux']}]}]}}}},
    'worker': {'monitor': {'kind': 'PodMonitor', 'sampleLimit': 10000}, 'image': {'pullPolicy': 'Always'},
               'priorityClassName': 'high', 'updateStrategy': {'type': 'RollingUpdate'},
               'tolerations': [{'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}],
               'apiKey': {'existingSecret': 'llm-key', 'key': 'token'}, 'extraEnv': [{'name': 'TZ', 'value': 'UTC'}],
               'networkPolicy': {'clients': [], 'scraper': []}},
    'prometheusRule': {'labels': {'release': 'kps'}, 'namespace': 'monitoring'},
    'dashboards': {'namespace': 'grafana'},
}
errors = []


def strict(schema):
    """The CRD schema with undeclared fields refused: every object schema that lists properties
    and neither allows others nor preserves unknown fields gets additionalProperties false."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ('properties' in out and 'additionalProperties' not in out
                and not out.get('x-kubernetes-preserve-unknown-fields')):
            out['additionalProperties'] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validators():
    out = {}
    for path in sorted(glob.glob(os.path.join(CRD_DIR, '*.yaml'))):
        crd = yaml.safe_load(open(path))
        group = crd['spec']['group']
        for v in crd['spec']['versions']:
            schema = strict(v['schema']['openAPIV3Schema'])
            # metadata is the API server's ObjectMeta: checked by name and namespace shape only.
            schema['properties']['metadata'] = {'type': 'object'}
            out[('%s/%s' % (group, v['name']), crd['spec']['names']['kind'])] = jsonschema.Draft7Validator(schema)
    return out


def validate(name, objs, crds):
    counts = {'core': 0, 'crd': 0}
    for o in objs:
        what = '%s: %s/%s' % (name, o['kind'], o['metadata']['name'])
        key = (o['apiVersion'], o['kind'])
        if key in crds:
            errs = sorted(crds[key].iter_errors(o), key=lambda e: list(e.path))
            for e in errs:
                errors.append('%s against its CRD: %s at %s' % (what, e.message, list(e.path)))
            counts['crd'] += 1
            continue
        for version in K8S_VERSIONS:
            try:
                kubernetes_validate.validate(o, version, strict=True)
            except kubernetes_validate.SchemaNotFoundError:
                errors.append('%s: no Kubernetes %s schema and no CRD for %s' % (what, version, key))
                break
            except kubernetes_validate.ValidationError as e:
                errors.append('%s against Kubernetes %s: %s at %s' % (what, version, e.message, list(e.path)))
        counts['core'] += 1
    print('%s: %d objects: %d against Kubernetes %s, %d against prometheus-operator CRDs' % (
        name, len(objs), counts['core'], ' and '.join(K8S_VERSIONS), counts['crd']))


def main():
    crds = crd_validators()
    # The validators must refuse what the API server would, or a pass means nothing.
    probe = {'apiVersion': 'monitoring.coreos.com/v1', 'kind': 'PodMonitor', 'metadata': {'name': 'x'},
             'spec': {'selector': {}, 'podMetricsEndpoints': [{'port': 'metrics', 'intervall': '15s'}]}}
    if not list(crds[('monitoring.coreos.com/v1', 'PodMonitor')].iter_errors(probe)):
        errors.append('the PodMonitor schema accepts an unknown field (intervall)')
    try:
        kubernetes_validate.validate({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'x'}, 'date': {}},
                                     K8S_VERSIONS[0], strict=True)
        errors.append('the Kubernetes schema accepts an unknown field (date)')
    except kubernetes_validate.ValidationError:
        pass
    validate('helm defaults', podman_flags.render_chart(), crds)
    validate('helm every toggle', podman_flags.render_chart(ALL_TOGGLES), crds)
    validate('helm agent only', podman_flags.render_chart({'worker': {'enabled': False}, 'namespaces': {'create': False}}), crds)
    for target in ('base', 'overlays/production', 'overlays/cpu-dev', 'overlays/agent-web-config'):
        validate('kustomize ' + target, podman_flags.render(target), crds)
    for e in errors:
        print('FAIL: ' + e)
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
