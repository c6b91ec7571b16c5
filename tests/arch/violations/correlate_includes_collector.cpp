// Deliberately wrong, for check_layers.py: the correlator reaching into a concrete collector for
// a helper, where it should read the probes' snapshots. Checked as agent/correlate/; the tagged
// line, and only it, must be flagged (the metric helpers of collectors/ stay allowed).
#include "probes/tcp_maps.h"
#include "collectors/metric_builder.h"
#include "collectors/tcp_collector.h"  // layer violation
