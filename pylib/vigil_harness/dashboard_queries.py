"""Runs every panel query of the generated dashboards against a Prometheus API over a time range:
each must parse and return data. Optionally draws each dashboard to a PNG (matplotlib) the way
Grafana would lay it out and show it: every panel at its gridPos, drawn as its type says (a stat as
big numbers coloured by its thresholds, a table as a table, a timeseries as lines, a heatmap as a
heatmap of its buckets), values in the panel's unit (fieldConfig.defaults.unit).
Used by the alerting e2e (its Prometheus) and by bench/fleet/dashboards.py (the simulation)."""
import glob
import json
import math
import os
import re

from vigil_harness.fail import fail

# Variables as Grafana expands "All" (allValue '.*'); $__rate_interval as Grafana computes it
# for a 1 s scrape interval at this test's resolution; $__range, the dashboard's time range, as
# its default hour (panels counting events over the range).
VARIABLES = {'$cluster': '.*', '$node': '.*', '$namespace': '.*', '$pod': '.*', '$__rate_interval': '10s',
             '$__range': '1h'}
STEP = 2


def substitute(expr, variables=None):
    for k, v in (variables or VARIABLES).items():
        expr = expr.replace(k, v)
    return expr


def expressions(dashboard):
    """(panel title, legend, expr) of every target."""
    return [(p['title'], t.get('legendFormat', ''), t['expr']) for p in dashboard['panels'] for t in p['targets']]


def legend(fmt, metric):
    return re.sub(r'\{\{\s*(\w+)\s*\}\}', lambda m: metric.get(m.group(1), ''), fmt) or str(metric)


def query_dashboards(query_range, paths, start, end, step=STEP, variables=None):
    """Every target of every dashboard in PATHS over [start, end]: ({uid: (title, [(panel,
    [(legend, result)])])}, [(dashboard title, panel title, expr) that returned nothing]).
    query_range(expr, start, end, step) returns a Prometheus API matrix."""
    rendered, empty = {}, []
    for path in paths:
        d = json.load(open(path))
        panels = []
        for p in d['panels']:
            targets = []
            for t in p['targets']:
                result = query_range(substitute(t['expr'], variables), start, end, step)
                if not result:
                    empty.append((d['title'], p['title'], t['expr']))
                targets.append((t.get('legendFormat', ''), result))
            panels.append((p, targets))
        rendered[d['uid']] = (d['title'], panels)
    return rendered, empty


def row_panels(panels, title):
    """The (panel, targets) of PANELS (a dashboard of query_dashboards) in the row TITLE: those
    after its header up to the next row, as Grafana groups them; None without such a row."""
    starts = [i for i, (p, _) in enumerate(panels) if p['type'] == 'row' and p['title'] == title]
    if not starts:
        return None
    out = []
    for p, targets in panels[starts[0] + 1:]:
        if p['type'] == 'row':
            break
        out.append((p, targets))
    return out


def check_dashboards(stack, directory, start, end, render_to=None, nonzero_rows=(), empty_here=()):
    """Every panel query returns data, but those of the (dashboard title, panel title) pairs in
    EMPTY_HERE (panels with data only in a fault this run does not make; the caller names the
    test that shows their data); in each (dashboard uid, row title) of NONZERO_ROWS every panel
    also shows a value other than 0 somewhere (where an exported 0 would already count as data,
    e.g. run time while the kernel does not count it)."""
    paths = sorted(glob.glob(os.path.join(directory, '*.json')))
    rendered, empty = query_dashboards(
        lambda e, s, t, st: stack.query(e, 'query_range', start=s, end=t, step=st), paths, start, end)
    unknown = set(empty_here) - {(title, p['title']) for title, panels in rendered.values() for p, _ in panels}
    if unknown:
        fail("empty_here names panels the dashboards do not have: %s" % sorted(unknown))
    empty = [e for e in empty if (e[0], e[1]) not in set(empty_here)]
    if empty:
        fail("%d panel queries returned no data:\n  %s" % (len(empty), '\n  '.join('%s / %s: %s' % e for e in empty)))
    total = sum(len(p['targets']) for _, panels in rendered.values() for p, _ in panels)
    print("dashboards: %d queries over %d dashboards returned data" % (total, len(rendered)))
    for uid, row in nonzero_rows:
        title, panels = rendered.get(uid, (uid, []))
        inside = row_panels(panels, row)
        if not inside:
            fail("%s has no row %r with panels" % (title, row))
        zeros = [p['title'] for p, targets in inside
                 if not any(float(v) != 0 for _, res in targets for r in res for _, v in r['values'])]
        if zeros:
            fail("%s / %s: panels showing only 0: %s" % (title, row, ', '.join(zeros)))
        print("dashboards: %s / %s: %d panels with data other than 0" % (title, row, len(inside)))
    if render_to:
        render(rendered, render_to, start, caption='end-to-end test run')


# Grafana's named colours.
COLORS = {'green': '#73BF69', 'red': '#F2495C', 'orange': '#FF9830', 'yellow': '#FADE2A', 'blue': '#5794F2',
          'purple': '#B877D9', 'text': '#333333'}


def fmt_value(v, unit):
    """v as Grafana shows it in UNIT (the few units Vigil's panels use)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return 'No data'

    def si(x, suffix=''):
        for div, p in ((1e9, 'G'), (1e6, 'M'), (1e3, 'K')):
            if abs(x) >= div:
                return '%.3g %s%s' % (x / div, p, suffix)
        return ('%.3g' % x) + ((' ' + suffix) if suffix else '')
    if unit == 'percentunit':
        return '%.3g%%' % (100 * v)
    if unit == 'bytes':
        for div, p in ((2 ** 40, 'TiB'), (2 ** 30, 'GiB'), (2 ** 20, 'MiB'), (2 ** 10, 'KiB')):
            if abs(v) >= div:
                return '%.3g %s' % (v / div, p)
        return '%.3g B' % v
    if unit == 's':
        if v != 0 and abs(v) < 1:
            return '%.3g ms' % (1000 * v)
        return '%.3g s' % v
    if unit == 'ops':
        return si(v, 'ops/s')
    if unit == 'reqps':
        return si(v, 'req/s')
    return si(v)


def threshold_color(v, thresholds):
    color = 'green'
    for s in (thresholds or {}).get('steps', []):
        if s.get('value') is None or (v is not None and v >= s['value']):
            color = s['color']
    return COLORS.get(color, color)


def value_at(result, at):
    """The last value of a range result at or before AT (None if none)."""
    v = None
    for t, x in result['values']:
        if float(t) <= at:
            v = float(x)
    return v


def render(rendered, out, start, caption='', at=None, only=None):
    """Draws each dashboard of RENDERED (query_dashboards) to OUT/<uid>.png. Stats and tables
    show the value at AT (default: the end of the range), timeseries and heatmaps the range."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    os.makedirs(out, exist_ok=True)
    for uid, (title, panels) in rendered.items():
        if only and uid not in only:
            continue
        end = max([float(r['values'][-1][0]) for _, targets in panels for _, res in targets for r in res] or [start])
        t_at = end if at is None else at
        rows = max(p['gridPos']['y'] + p['gridPos']['h'] for p, _ in panels)
        cw, rh = 0.75, 0.42  # inches per grid column and row
        fig = plt.figure(figsize=(24 * cw, rows * rh + 0.8))
        H = rows * rh + 0.8
        for p, targets in panels:
            gp = p['gridPos']
            if p['type'] == 'row':  # a header line across the grid, as Grafana shows an open row
                fig.text(0.01, 1 - ((gp['y'] + gp['h']) * rh + 0.6) / H + 0.1 / H, p['title'], fontsize=11, weight='bold')
                continue
            pad = 0.12
            left = (gp['x'] * cw + pad + 0.45) / (24 * cw)
            width = (gp['w'] * cw - 2 * pad - 0.55) / (24 * cw)
            bottom = 1 - ((gp['y'] + gp['h']) * rh + 0.6) / H + pad / H + 0.3 / H
            height = (gp['h'] * rh - 2 * pad - 0.55) / H
            ax = fig.add_axes([left, bottom, width, height])
            kind = p['type']
            unit = p.get('fieldConfig', {}).get('defaults', {}).get('unit', 'short')
            if kind == 'heatmap':
                unit = p.get('options', {}).get('yAxis', {}).get('unit', unit)
            thresholds = p.get('fieldConfig', {}).get('defaults', {}).get('thresholds')
            series = [(fmt, r) for fmt, res in targets for r in res]
            label = {'stat': 'stat', 'table': 'table', 'heatmap': 'heatmap', 'timeseries': 'time series'}.get(kind, kind)
            ax.set_title('%s  [%s]' % (p['title'], label), fontsize=8 if kind == 'stat' else 9, loc='left')
            if kind == 'stat':
                draw_stat(ax, series, unit, thresholds, t_at)
            elif kind == 'table':
                draw_table(ax, series, unit, thresholds, t_at)
            elif kind == 'heatmap':
                draw_heatmap(ax, series, unit, start)
            else:
                draw_timeseries(ax, series, unit, start, thresholds)
        heading = '%s (%s; stats and tables at +%.0f s)' % (title, caption, t_at - start) if caption else title
        fig.suptitle(heading, y=1 - 0.25 / H)
        fig.savefig(os.path.join(out, uid + '.png'), dpi=70)
        plt.close(fig)
        print("rendered %s" % os.path.join(out, uid + '.png'))


def draw_timeseries(ax, series, unit, start, thresholds=None):
    from matplotlib.ticker import FuncFormatter
    for fmt, r in series[:12]:
        xs = [float(t) - start for t, _ in r['values']]
        ys = [float(v) for _, v in r['values']]
        ax.plot(xs, ys, linewidth=1, label=legend(fmt, r['metric'])[:50])
    for s in (thresholds or {}).get('steps', []):  # thresholdsStyle dashed: an alert's line
        if s.get('value') is not None:
            ax.axhline(s['value'], linestyle='--', linewidth=1, color=threshold_color(s['value'], thresholds))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_value(v, unit)))
    ax.set_xlabel('seconds into the run', fontsize=7)
    ax.tick_params(labelsize=7)
    if series:
        ax.legend(fontsize=6, loc='upper left')
    if len(series) > 12:
        ax.text(1, 1.01, '12 of %d series' % len(series), transform=ax.transAxes, ha='right', fontsize=6)


def draw_stat(ax, series, unit, thresholds, at):
    from matplotlib.patches import Rectangle
    ax.axis('off')
    values = [(legend(fmt, r['metric']), value_at(r, at)) for fmt, r in series]
    if not values:
        ax.text(0.5, 0.5, 'No data', ha='center', va='center', fontsize=14)
        return
    values = values[:6]
    n = len(values)
    for i, (name, v) in enumerate(values):
        x0 = i / n
        ax.add_patch(Rectangle((x0 + 0.01, 0), 1 / n - 0.02, 1, transform=ax.transAxes, color=threshold_color(v, thresholds)))
        ax.text(x0 + 0.5 / n, 0.55, fmt_value(v, unit), ha='center', va='center', fontsize={1: 16, 2: 12, 3: 9}.get(n, 7),
                weight='bold', color='white', transform=ax.transAxes)
        ax.text(x0 + 0.5 / n, 0.15, name[:24], ha='center', va='center', fontsize=7, color='white', transform=ax.transAxes)


def draw_table(ax, series, unit, thresholds, at):
    ax.axis('off')
    rows = [(r['metric'], value_at(r, at)) for _, r in series]
    rows = sorted([x for x in rows if x[1] is not None], key=lambda x: -x[1])[:10]
    if not rows:
        ax.text(0.5, 0.5, 'No data', ha='center', va='center', fontsize=14)
        return
    cols = sorted({k for m, _ in rows for k in m if k != '__name__'})
    cells = [[m.get(c, '') for c in cols] + [fmt_value(v, unit)] for m, v in rows]
    colors = [['white'] * len(cols) + [threshold_color(v, thresholds)] for _, v in rows]
    t = ax.table(cellText=cells, colLabels=cols + ['Value'], cellColours=colors, loc='upper center', cellLoc='left')
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.scale(1, 0.9)


def draw_heatmap(ax, series, unit, start):
    """Buckets as Grafana's heatmap with format 'heatmap' shows them: each le's count minus the
    next lower one's, per time step."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter
    by_le = {}
    for _, r in series:
        le = r['metric'].get('le')
        if le is None:
            continue
        by_le[float('inf') if le == '+Inf' else float(le)] = {float(t): float(v) for t, v in r['values']}
    if not by_le:
        ax.text(0.5, 0.5, 'No data', ha='center', va='center', fontsize=14, transform=ax.transAxes)
        return
    les = sorted(by_le)
    times = sorted({t for v in by_le.values() for t in v})
    cum = np.array([[by_le[le].get(t, np.nan) for t in times] for le in les])
    cells = np.diff(np.vstack([np.zeros((1, len(times))), cum]), axis=0)
    cells[cells < 0] = 0
    # Rows above the last bucket with any count carry nothing: show up to it.
    used = [i for i in range(len(les)) if np.nansum(cells[i]) > 0]
    lo, hi = (min(used), max(used) + 1) if used else (0, len(les))
    xs = np.array(times) - start
    ax.pcolormesh(np.append(xs, xs[-1] + (xs[1] - xs[0] if len(xs) > 1 else 1)), np.arange(lo, hi + 1),
                  np.nan_to_num(cells[lo:hi]), cmap='Oranges', shading='flat')
    ticks = list(range(lo, hi, max(1, (hi - lo) // 6)))
    ax.set_yticks([i + 0.5 for i in ticks])
    ax.set_yticklabels(['<= ' + ('+Inf' if math.isinf(les[i]) else fmt_value(les[i], unit)) for i in ticks], fontsize=6)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: '%.0f' % v))
    ax.set_xlabel('seconds into the run', fontsize=7)
    ax.tick_params(labelsize=7)
