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

  // A time series panel; unit is Grafana's (percentunit, s, bytes, reqps, short, ...);
  // thresholds (thresholds()), when given, are drawn as dashed lines (an alert's threshold).
  timeseries(title, description, targets, unit='short', stack=false, links=[], thresholds=null):: {
    type: 'timeseries',
    title: title,
    description: description,
    datasource: ds,
    targets: targets,
    fieldConfig: {
      defaults: {
        unit: unit,
        [if links != [] then 'links']: links,
        [if thresholds != null then 'thresholds']: thresholds,
        custom: {
          drawStyle: 'line',
          lineWidth: 1,
          fillOpacity: if stack then 30 else 10,
          stacking: { mode: if stack then 'normal' else 'none' },
          [if thresholds != null then 'thresholdsStyle']: { mode: 'dashed' },
        },
      },
      overrides: [],
    },
    options: { legend: { displayMode: 'table', placement: 'bottom', calcs: ['max', 'lastNotNull'] }, tooltip: { mode: 'multi', sort: 'desc' } },
  },

  // A heatmap of a histogram's buckets (targets must sum by (le)).
  heatmap(title, description, targets, unit='bytes', links=[]):: {
    type: 'heatmap',
    title: title,
    description: description,
    datasource: ds,
    targets: [t { format: 'heatmap' } for t in targets],
    fieldConfig: { defaults: { unit: unit, [if links != [] then 'links']: links }, overrides: [] },
    options: { calculate: false, yAxis: { unit: unit }, cellGap: 1, color: { scheme: 'Oranges', mode: 'scheme' } },
  },

  // Thresholds as Grafana writes them: base colour, then [value, colour] steps upwards.
  thresholds(base, steps=[]):: {
    mode: 'absolute',
    steps: [{ color: base, value: null }] + [{ color: s[1], value: s[0] } for s in steps],
  },

  // A link to another Vigil dashboard with the current time range; params are extra URL
  // parameters (var-cluster=..., may use ${__field.labels.x} or ${__data.fields.x}).
  dashboardLink(title, uid, params=''):: {
    title: title,
    url: '/d/%s/%s?${__url_time_range}%s' % [uid, uid, if params == '' then '' else '&' + params],
  },

  // A row header: the panels after it, up to the next row, are its row (full width, one unit
  // high, never collapsed). An empty target list, so that readers of every panel's targets
  // (the e2e's and the fleet simulation's data checks) need no case for it.
  row(title):: {
    type: 'row',
    title: title,
    collapsed: false,
    panels: [],
    targets: [],
    gridW:: 24,
    gridH:: 1,
  },

  // A single value per series (e.g. per cluster), coloured by its thresholds; the reduction is
  // the last value. gridW/gridH: its size in the layout (hidden fields).
  stat(title, description, targets, unit='short', thresholds=self.thresholds('green'), links=[]):: {
    type: 'stat',
    title: title,
    description: description,
    datasource: ds,
    targets: targets,
    gridW:: 4,
    gridH:: 4,
    fieldConfig: {
      defaults: { unit: unit, thresholds: thresholds, color: { mode: 'thresholds' }, links: links },
      overrides: [],
    },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background',
      graphMode: 'area',
      textMode: 'value_and_name',
      justifyMode: 'auto',
      orientation: 'auto',
    },
  },

  // A table of an instant query (one row per series, its labels as columns, Value in unit and
  // coloured by thresholds); links on every cell (use ${__data.fields.<label>}).
  table(title, description, targets, unit='short', thresholds=self.thresholds('green'), links=[]):: {
    type: 'table',
    title: title,
    description: description,
    datasource: ds,
    targets: [t { instant: true, range: false, format: 'table' } for t in targets],
    fieldConfig: {
      defaults: { unit: unit, thresholds: thresholds, links: links, custom: { align: 'auto' } },
      overrides: [{
        matcher: { id: 'byName', options: 'Value' },
        properties: [{ id: 'custom.cellOptions', value: { type: 'color-background' } }, { id: 'color', value: { mode: 'thresholds' } }],
      }],
    },
    transformations: [{ id: 'organize', options: { excludeByName: { Time: true } } }],
    options: { showHeader: true, sortBy: [{ displayName: 'Value', desc: true }] },
  },

  // Lays panels out left to right, wrapping at 24 columns (gridW x gridH each, default 12 x 8:
  // two per row), and numbers them; refIds A, B, ...
  local layout(panels) = std.foldl(
    function(acc, p)
      local w = std.get(p, 'gridW', 12, inc_hidden=true);
      local h = std.get(p, 'gridH', 8, inc_hidden=true);
      local wrap = acc.x + w > 24;
      local x = if wrap then 0 else acc.x;
      local y = if wrap then acc.y + acc.h else acc.y;
      local rowH = if wrap then h else std.max(acc.h, h);
      { x: x + w, y: y, h: rowH, out: acc.out + [{ x: x, y: y, w: w, h: h }] },
    panels, { x: 0, y: 0, h: 0, out: [] }).out,

  dashboard(uid, title, description, variables, panels, links=[]):: {
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
    links: [{ type: 'dashboards', tags: ['vigil'], asDropdown: true, title: 'Vigil dashboards' }] + links,
    local grid = layout(panels),
    panels: [
      panels[i] {
        id: i + 1,
        gridPos: grid[i],
        targets: [panels[i].targets[j] { refId: std.char(65 + j) } for j in std.range(0, std.length(panels[i].targets) - 1)],
      }
      for i in std.range(0, std.length(panels) - 1)
    ],
  },
}
