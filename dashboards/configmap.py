#!/usr/bin/env python3
"""Prints, as JSON, the ConfigMap holding the generated dashboards, labelled for Grafana's
dashboard sidecar (deploy/kubernetes/base/dashboards-configmap.yaml after to_yaml.py).
usage: configmap.py GENERATED_DIR"""
import glob
import json
import os
import sys


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], '*.json')))
    json.dump({
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': 'vigil-dashboards',
            'labels': {'grafana_dashboard': '1', 'app.kubernetes.io/part-of': 'vigil'},
            'annotations': {'grafana_folder': 'Vigil'},
        },
        'data': {os.path.basename(f): open(f).read() for f in files},
    }, sys.stdout)


if __name__ == '__main__':
    main()
