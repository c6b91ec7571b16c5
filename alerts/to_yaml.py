#!/usr/bin/env python3
"""Writes the JSON document on stdin as YAML on stdout, multi-line strings (PromQL, embedded
files) as literal blocks. jsonnet's own YAML output is too slow on these documents.
usage: to_yaml.py HEADER_COMMENT < doc.json > doc.yaml"""
import json
import sys

import yaml


class Dumper(yaml.SafeDumper):
    pass


def string(dumper, value):
    style = '|' if '\n' in value else None
    return dumper.represent_scalar('tag:yaml.org,2002:str', value, style=style)


Dumper.add_representer(str, string)


def main():
    doc = json.load(sys.stdin)
    sys.stdout.write('# %s\n' % sys.argv[1])
    yaml.dump(doc, sys.stdout, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True)


if __name__ == '__main__':
    main()
