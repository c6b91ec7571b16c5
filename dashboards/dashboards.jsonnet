// The mixin's dashboards keyed by file name, for `jsonnet -m` (dashboards/generate.sh).
// `overrides` (a top-level argument, JSON) replaces fields of the mixin's _config
// (config.libsonnet), as for alerts/rules.jsonnet.
function(overrides={}) ((import '../mixin.libsonnet') + { _config+:: overrides }).grafanaDashboards
