// The mixin's rules as a Prometheus rule file (alerts/generated/vigil.rules.yaml, via to_yaml.py).
// `overrides` (a top-level argument, JSON) replaces fields of the mixin's _config
// (config.libsonnet), e.g. the e2e test's short windows.
function(overrides={}) { groups: ((import '../mixin.libsonnet') + { _config+:: overrides }).ruleGroups }
