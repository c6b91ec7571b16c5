// Small builders for Grafana dashboards (schema 39): the few panel kinds Vigil uses, the shared
// template variables and a grid layout, so each dashboard file lists only its queries.
{
  // Every query filters with these; the e2e check substitutes '.*' for them.
  agentSel: 'cluster=~"$cluster", node=~"$node"',
  workerSel: 'cluster=~"$cluster", namespace=~"$namespace", pod=~"$pod"',

  local ds = { type: 'prometheus', uid: '${datasource}' },

  local variable(name, label, query) = {
    name: name,
    label: label,
    type: 'query',
    datasource: ds,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    definition: query,
    refresh: 2,
    includeAll: true,
    allValue: '.*',
    multi: true,
    current: { selected: true, text: ['All'], value: ['$__all'] },
    sort: 1,
  },

  // The data source and the four filters; selector matches both scrape jobs (the cluster list).
  variables(selector):: [
    {
      name: 'datasource',
      label: 'Data source',
      type: 'datasource',
      query: 'prometheus',
      current: { selected: false, text: 'Prometheus', value: 'prometheus' },
    },
    variable('cluster', 'Cluster', 'label_values(up{%s}, cluster)' % selector),
    variable('node', 'Node', 'label_values(vigil_agent_build_info{cluster=~"$cluster"}, node)'),
    variable('namespace', 'Namespace', 'label_values(vigil_worker_info{cluster=~"$cluster"}, namespace)'),
    variable('pod', 'Pod', 'label_values(vigil_worker_info{cluster=~"$cluster", namespace=~"$namespace"}, pod)'),
  ],

  // target(expr, legend): one PromQL query of a panel.
  target(expr, legend='')::
    { expr: expr, legendFormat: legend, range: true, datasource: ds },

  // A time series panel; unit is Grafana's (percentunit, s, bytes, reqps, short, ...).
  timeseries(title, description, targets, unit='short', stack=false):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: ds,
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        custom: { drawStyle: 'line', lineWidth: 1, fillOpacity: if stack then 30 else 10, stacking: { mode: if stack then 'normal' else 'none' } },
      },
      overrides: [],
    },
    options: { legend: { displayMode: 'table', placement: 'bottom', calcs: ['max', 'lastNotNull'] }, tooltip: { mode: 'multi', sort: 'desc' } },
  },

  // A heatmap of a histogram's buckets (targets must sum by (le)).
  heatmap(title, description, targets, unit='bytes'):: {
    type: 'heatmap',
    title: title,
    description: description,
    datasource: ds,
    targets: [t { format: 'heatmap' } for t in targets],
    options: { calculate: false, yAxis: { unit: unit }, cellGap: 1, color: { scheme: 'Oranges', mode: 'scheme' } },
  },

  // Lays panels out two per row (width 12, height 8) and numbers them; refIds A, B, ...
  dashboard(uid, title, description, variables, panels):: {
    uid: uid,
    title: title,
    description: description,
    tags: ['vigil'],
    editable: false,
    graphTooltip: 1,
    schemaVersion: 39,
    time: { from: 'now-1h', to: 'now' },
    refresh: '30s',
    timezone: 'utc',
    templating: { list: variables },
    links: [{ type: 'dashboards', tags: ['vigil'], asDropdown: true, title: 'Vigil dashboards' }],
    panels: [
      panels[i] {
        id: i + 1,
        gridPos: { x: (i % 2) * 12, y: std.floor(i / 2) * 8, w: 12, h: 8 },
        targets: [panels[i].targets[j] { refId: std.char(65 + j) } for j in std.range(0, std.length(panels[i].targets) - 1)],
      }
      for i in std.range(0, std.length(panels) - 1)
    ],
  },
}
