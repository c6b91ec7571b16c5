// The rules as a Prometheus rule file (alerts/generated/vigil.rules.yaml). `overrides` (a
// top-level argument, JSON) replaces fields of config.libsonnet, e.g. the e2e test's short windows.
function(overrides={})
  std.manifestYamlDoc((import 'alerts.libsonnet')(overrides), indent_array_in_object=true, quote_keys=false)
