"""Runs every panel query of the generated dashboards against the end-to-end Prometheus over the
run's time range: each must parse and return data. Optionally draws each dashboard, one subplot
per panel, to a PNG (matplotlib)."""
import glob
import json
import os
import re

from stack import fail

# Variables as Grafana expands "All" (allValue '.*'); $__rate_interval as Grafana computes it
# for a 1 s scrape interval at this test's resolution.
VARIABLES = {'$cluster': '.*', '$node': '.*', '$namespace': '.*', '$pod': '.*', '$__rate_interval': '10s'}
STEP = 2


def substitute(expr):
    for k, v in VARIABLES.items():
        expr = expr.replace(k, v)
    return expr


def expressions(dashboard):
    """(panel title, legend, expr) of every target."""
    return [(p['title'], t.get('legendFormat', ''), t['expr']) for p in dashboard['panels'] for t in p['targets']]


def legend(fmt, metric):
    return re.sub(r'\{\{\s*(\w+)\s*\}\}', lambda m: metric.get(m.group(1), ''), fmt) or str(metric)


def check_dashboards(stack, directory, start, end, render_to=None):
    empty = []
    rendered = {}
    for path in sorted(glob.glob(os.path.join(directory, '*.json'))):
        d = json.load(open(path))
        panels = []
        for title, fmt, expr in expressions(d):
            result = stack.query(substitute(expr), 'query_range', start=start, end=end, step=STEP)
            if not result:
                empty.append('%s / %s: %s' % (d['title'], title, expr))
            panels.append((title, fmt, result))
        rendered[d['uid']] = (d['title'], panels)
    if empty:
        fail("%d panel queries returned no data:\n  %s" % (len(empty), '\n  '.join(empty)))
    total = sum(len(p) for _, p in rendered.values())
    print("dashboards: %d queries over %d dashboards returned data" % (total, len(rendered)))
    if render_to:
        render(rendered, render_to, start)


def render(rendered, out, start):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    os.makedirs(out, exist_ok=True)
    for uid, (title, targets) in rendered.items():
        by_panel = {}
        for panel, fmt, result in targets:
            by_panel.setdefault(panel, []).extend((fmt, r) for r in result)
        n = len(by_panel)
        fig, axes = plt.subplots((n + 1) // 2, 2, figsize=(14, 3.2 * ((n + 1) // 2)), squeeze=False)
        for ax, (panel, series) in zip(axes.flat, by_panel.items()):
            for fmt, r in series[:12]:
                xs = [float(t) - start for t, _ in r['values']]
                ys = [float(v) for _, v in r['values']]
                ax.plot(xs, ys, linewidth=1, label=legend(fmt, r['metric'])[:60])
            ax.set_title(panel, fontsize=10)
            ax.set_xlabel('seconds into the e2e run', fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6, loc='upper left')
        for ax in list(axes.flat)[n:]:
            ax.axis('off')
        fig.suptitle(title + ' (end-to-end test run)')
        fig.tight_layout()
        fig.savefig(os.path.join(out, uid + '.png'), dpi=70)
        plt.close(fig)
        print("rendered %s" % os.path.join(out, uid + '.png'))
