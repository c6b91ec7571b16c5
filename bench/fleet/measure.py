"""The fleet pipeline's measurement table: each component's own /metrics read twice (rates over the
interval between) and the kernel's account of its memory and CPU (/proc)."""
import os
import re
import time

from vigil_harness.stack import http_get

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)')
CLK = os.sysconf('SC_CLK_TCK')


def metrics(text):
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith('#'):
            out.append((m.group(1), m.group(2) or '', float(m.group(3))))
    return out


def pick(samples, name, contains=''):
    return sum(v for n, l, v in samples if n == name and contains in l)


def by_label(samples, name, label):
    """{label value: sample value} of NAME."""
    out = {}
    for n, l, v in samples:
        m = re.search(r'%s="([^"]*)"' % label, l)
        if n == name and m:
            out[m.group(1)] = v
    return out


def proc(pid):
    """(RSS MiB, peak RSS MiB, CPU seconds) of PID."""
    with open('/proc/%d/status' % pid) as f:
        st = dict(line.split(':', 1) for line in f)
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(st['VmRSS'].split()[0]) / 1024, int(st['VmHWM'].split()[0]) / 1024, (int(fields[11]) + int(fields[12])) / CLK


def snapshot(pipe):
    snap = {'time': time.time(), 'proc': {n: proc(p) for n, p in pipe.pids().items()}}
    for name, path in (('prometheus', '/metrics'), ('victoria-metrics', '/metrics'), ('vmagent0', '/metrics'),
                       ('vmagent1', '/metrics'), ('vmalert', '/metrics')):
        snap[name] = metrics(http_get(pipe.url(name, path), timeout=30))
    snap['queries'] = query_times(pipe)
    snap['vm_series'] = int(__import__('json').loads(http_get(pipe.url('victoria-metrics', '/api/v1/series/count'), timeout=60))['data'][0])
    return snap


def query_times(pipe):
    """{group: (Prometheus s, VictoriaMetrics s)}: each rule's expression run once as an instant
    query, one after another, summed per group. Engine cost alone, apart from how vmalert or
    Prometheus schedule their evaluations."""
    import yaml
    out = {}
    with open(os.path.join(pipe.dir, 'rules.yaml')) as f:
        groups = yaml.safe_load(f)['groups']
    for g in groups:
        took = []
        for engine in ('prometheus', 'victoria-metrics'):
            t = time.time()
            for rule in g['rules']:
                pipe.query(engine, rule['expr'])
            took.append(time.time() - t)
        out[g['name']] = tuple(took)
    return out


def table(pipe, a, b, nodes, gpus):
    """The measurement table over snapshots A..B, as text."""
    dt = b['time'] - a['time']
    rate = lambda comp, name, contains='': (pick(b[comp], name, contains) - pick(a[comp], name, contains)) / dt  # noqa: E731
    rows = ['fleet: %d nodes x %d GPU processes, %d series per node (simulator), scrape and evaluation every %d s, measured over %.0f s'
            % (nodes, gpus, pipe.series_per_node, pipe.interval, dt), '',
            '| what | Prometheus (baseline, all nodes) | VictoriaMetrics + 2 vmagent + vmalert |', '|---|---|---|']
    rows.append('| series in the TSDB | %d (head) | %d |' % (pick(b['prometheus'], 'prometheus_tsdb_head_series'), b['vm_series']))
    rows.append('| samples/s ingested | %.0f | %.0f |' % (rate('prometheus', 'prometheus_tsdb_head_samples_appended_total'),
                                                         rate('victoria-metrics', 'vm_rows_inserted_total')))
    for i in (0, 1):
        s = 'vmagent%d' % i
        n = rate(s, 'vm_promscrape_scrape_duration_seconds_count')
        dur = rate(s, 'vm_promscrape_scrape_duration_seconds_sum') / n if n else float('nan')
        rows.append('| shard %d: targets up, scrapes/s, mean scrape duration, samples/s scraped | | %d, %.1f, %.3f s, %.0f |' % (
            i, pick(b[s], 'vm_promscrape_targets', 'status="up"'), n, dur, rate(s, 'vm_promscrape_scraped_samples_sum')))
    prom_dur = [q for q in pipe.query('prometheus', 'avg(scrape_duration_seconds{job="vigil-agent"})')]
    rows.append('| Prometheus mean scrape duration | %.3f s | |' % (float(prom_dur[0]['value'][1]) if prom_dur else float('nan')))
    prom_groups = by_label(b['prometheus'], 'prometheus_rule_group_last_duration_seconds', 'rule_group')
    vm_sum, vm_cnt = by_label(b['vmalert'], 'vmalert_iteration_duration_seconds_sum', 'group'), by_label(b['vmalert'], 'vmalert_iteration_duration_seconds_count', 'group')
    vm_sum_a, vm_cnt_a = by_label(a['vmalert'], 'vmalert_iteration_duration_seconds_sum', 'group'), by_label(a['vmalert'], 'vmalert_iteration_duration_seconds_count', 'group')
    for group in sorted({g.split(';')[-1] for g in prom_groups} | set(vm_sum)):
        p = [v for g, v in prom_groups.items() if g.split(';')[-1] == group]
        n = vm_cnt.get(group, 0) - vm_cnt_a.get(group, 0)
        v = (vm_sum.get(group, 0) - vm_sum_a.get(group, 0)) / n if n else float('nan')
        rows.append('| rule group %s: evaluation time (Prometheus last, vmalert mean) | %.3f s | %.3f s |' % (group, p[0] if p else float('nan'), v))
    for group, (tp, tv) in sorted(b['queries'].items()):
        rows.append('| rule group %s: its expressions as instant queries, one at a time | %.3f s | %.3f s |' % (group, tp, tv))
    size = pick(b['victoria-metrics'], 'vm_data_size_bytes', 'storage/')
    stored = pick(b['victoria-metrics'], 'vm_rows', 'storage/')
    rows.append('| VictoriaMetrics storage: data bytes, rows, bytes per sample (vm_data_size_bytes / vm_rows, storage parts; index %.1f MiB) | | %.1f MiB, %d, %.2f |' % (
        pick(b['victoria-metrics'], 'vm_data_size_bytes', 'indexdb') / 2**20, size / 2**20, stored, size / stored if stored else float('nan')))
    rows += ['', '| component | RSS | peak RSS | CPU (cores, mean) |', '|---|---|---|---|']
    for name in ('simulator', 'prometheus', 'victoria-metrics', 'vmagent0', 'vmagent1', 'vmalert', 'alertmanager'):
        rss, hwm, cpu = b['proc'][name]
        rows.append('| %s | %.0f MiB | %.0f MiB | %.2f |' % (name, rss, hwm, (cpu - a['proc'][name][2]) / dt))
    return '\n'.join(rows)


def report(text, table_out=None):
    """Prints the table, and writes it to TABLE_OUT (docs/scale/*.md) when given."""
    print('\n' + text, flush=True)
    if table_out:
        with open(table_out, 'w') as f:
            f.write(text + '\n')
