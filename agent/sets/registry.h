// The registry of probe sets: what the agent loads, in which order, and when each applies.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"
#include "sets/probe_set.h"

namespace vigil::agent {

struct ProbeSetEntry {
  // The `set` label of the agent's own series (vigil_agent_*) and its name in the log.
  const char* name;
  // Its switch in the config's `probes:`; off, it is reported as disabled_by_config. nullptr for
  // what other sets need (process events, correlation): no switch, and not reported.
  bool ProbeSets::*enabled;
  // Loads the set: throws when it cannot (reported as tracepoint_missing or load_failed), returns
  // nullptr when it handled the failure itself.
  std::unique_ptr<ProbeSet> (*load)(SetContext& ctx);
  // Whether it applies, given the sets loaded before it; nullptr: always. One that does not
  // apply is neither loaded nor reported, whatever the config says.
  bool (*applies)(const LoadedSets& loaded) = nullptr;
  // The probes `probes.disable` may name in this set ("SET:PROBE"); nullptr: none.
  std::vector<std::string> (*probe_names)() = nullptr;
};

// Every probe set, in load order.
std::span<const ProbeSetEntry> probe_set_registry();

// Throws ConfigError (key probes.disable) for a name that is no probe of its set.
void check_disabled_probes(const ProbeSets& probes);

}  // namespace vigil::agent
