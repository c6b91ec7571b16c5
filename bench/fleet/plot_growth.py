#!/usr/bin/env python3
"""The growth with N of the fleet benchmark, from the tables run.py wrote (--table-out): one PNG
with series, samples/s, memory per component, rule-evaluation time, dashboard query time and
scrape duration against the number of nodes.
usage: $(tests/alerts/python_env.sh) bench/fleet/plot_growth.py docs/scale/n100.md docs/scale/n1000.md ... -o docs/scale/growth.png"""
import argparse
import re

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402


def num(s):
    m = re.search(r'-?[0-9][0-9.,]*|nan', s)
    return float(m.group(0).replace(',', '')) if m and m.group(0) != 'nan' else float('nan')


def parse(path):
    """{'nodes': N, 'rows': {first cell: [other cells]}} of one table file."""
    text = open(path).read()
    nodes = int(re.search(r'fleet: (\d+) nodes', text).group(1))
    rows = {}
    for line in text.splitlines():
        if line.startswith('|') and not line.startswith('|---'):
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            rows.setdefault(cells[0], cells[1:])
    return {'nodes': nodes, 'rows': rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('tables', nargs='+')
    ap.add_argument('-o', '--out', default='growth.png')
    args = ap.parse_args()
    runs = sorted((parse(p) for p in args.tables), key=lambda r: r['nodes'])
    ns = [r['nodes'] for r in runs]

    def series(key, col, f=num):
        return [f(r['rows'][key][col]) if key in r['rows'] else float('nan') for r in runs]

    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    ax = axes[0][0]
    ax.plot(ns, series('series in the TSDB', 0), 'o-', label='Prometheus (head series)')
    ax.plot(ns, series('series in the TSDB', 1), 's--', label='VictoriaMetrics')
    ax.set_title('series')
    ax = axes[0][1]
    ax.plot(ns, series('samples/s ingested', 0), 'o-', label='Prometheus')
    ax.plot(ns, series('samples/s ingested', 1), 's--', label='VictoriaMetrics')
    ax.set_title('samples/s ingested')
    ax = axes[0][2]
    for comp in ('prometheus', 'victoria-metrics', 'vmagent0', 'vmagent1', 'vmalert', 'alertmanager', 'simulator'):
        ax.plot(ns, series(comp, 0), 'o-', label=comp)
    ax.set_title('memory RSS (MiB)')
    ax = axes[1][0]
    groups = sorted(k for k in runs[-1]['rows'] if k.startswith('rule group') and 'evaluation time' in k)
    for k in groups:
        g = k.split()[2].rstrip(':')
        if 'worker' in g or 'histograms' in g:
            continue
        ax.plot(ns, series(k, 0), 'o-', label='%s Prometheus' % g)
        ax.plot(ns, series(k, 1), 's--', label='%s vmalert' % g)
    ax.set_title('rule group evaluation time (s)')
    ax = axes[1][1]
    for uid in sorted({k.split(' / ')[0] for k in runs[-1]['rows'] if k.startswith('vigil-') and ' / ' in k}):
        for col, style, engine in ((0, 'o-', 'Prometheus'), (1, 's--', 'VictoriaMetrics')):
            ax.plot(ns, [sum(num(v[col]) for k, v in r['rows'].items() if k.startswith(uid + ' / ')) for r in runs],
                    style, label='%s, all panels, %s' % (uid, engine))
    ax.set_title('dashboard panel query time (ms, range over the run)')
    ax = axes[1][2]
    for i in (0, 1):
        key = [k for k in runs[-1]['rows'] if k.startswith('shard %d:' % i)][0]
        ax.plot(ns, series(key, 1, lambda s: num(s.split(',')[2])), 'o-', label='vmagent shard %d' % i)
    ax.plot(ns, series('Prometheus mean scrape duration', 0), 's--', label='Prometheus (all targets)')
    ax.set_title('mean scrape duration per target (s)')
    for row in axes:
        for ax in row:
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.set_xlabel('simulated nodes (8 GPU processes each)')
            ax.grid(True, which='both', alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle('Vigil fleet simulation: growth with N (bench/fleet/run.sh, tables in %s)' % ', '.join(args.tables))
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print("wrote", args.out)


if __name__ == '__main__':
    main()
