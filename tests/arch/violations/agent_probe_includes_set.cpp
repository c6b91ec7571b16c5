// Deliberately wrong, for check_layers.py (the agent is one library: its build cannot refuse
// this): a probe loader (probes/) reaching up into a probe set, and into the HTTP endpoint by a
// relative path. Checked as agent/probes/; the tagged lines, and only they, must be flagged.
#include "probes/bpf_util.h"
#include "stats/series_account.h"
#include "sets/cuda_set.h"  // layer violation
#include "../export/http_server.h"  // layer violation
