// The probe sets the agent runs, listed once. The agent walks this list to load them, serve their
// collectors, hand them the libraries discovery finds and expire exited processes; it names none
// of them. Adding a set: its file pair here in sets/ (with its probe and its collector), its
// #include and one line in the list.
//
// A list in one function, not node_exporter's self-registration (each collector file registers
// itself from its init()): in C++ that is a static initializer in each set's file, and
// vigil_agent_core is a static library, from which the linker takes only the object files that
// something references, so a set nothing names would silently not be there. The list also states
// the order, which matters: a set may build on one above it (usdt reads cuda's map, correlation
// tcp's, nccl's and collective's), and collectors are served and
// housekeeping runs in this order.
#include "sets/registry.h"

#include <algorithm>

#include "sets/collective_set.h"
#include "sets/correlation_set.h"
#include "sets/cuda_set.h"
#include "sets/nccl_set.h"
#include "sets/proc_set.h"
#include "sets/tcp_set.h"
#include "sets/usdt_set.h"
#include "sets/xid_set.h"

namespace vigil::agent {
namespace {

template <typename Set>
std::unique_ptr<ProbeSet> load(SetContext& ctx) {
  return std::make_unique<Set>(ctx);
}

template <typename Set>
bool after(const LoadedSets& loaded) {
  return loaded.find<Set>() != nullptr;
}

bool libraries_watched(const LoadedSets& loaded) { return loaded.any_watches_libraries(); }

}  // namespace

std::span<const ProbeSetEntry> probe_set_registry() {
  static const ProbeSetEntry kSets[] = {
      {"tcp", &ProbeSets::tcp, load<TcpSet>, nullptr, TcpProbe::names},
      {"cuda", &ProbeSets::cuda, load<CudaSet>, nullptr, CudaProbe::names},
      {"nccl", &ProbeSets::nccl, load<NcclSet>, nullptr, NcclProbe::names},
      {"usdt", &ProbeSets::usdt, load<UsdtSet>, nullptr, UsdtProbe::names},
      {"collective", &ProbeSets::usdt, load<CollectiveSet>},
      {"correlation", nullptr, load<CorrelationSet>, after<TcpSet>},
      {"xid", &ProbeSets::xid, load<XidSet>},
      {"proc", nullptr, ProcSet::load, libraries_watched},
  };
  return kSets;
}

void check_disabled_probes(const ProbeSets& probes) {
  for (const std::string& name : probes.disable) {
    const std::string set = name.substr(0, name.find(':'));
    const std::string probe = name.substr(set.size() + 1);
    std::vector<std::string> known;
    for (const ProbeSetEntry& entry : probe_set_registry())
      if (entry.name == set && entry.probe_names) known = entry.probe_names();
    if (known.empty())
      throw ConfigError("probes.disable", 0, "'" + name + "': set '" + set +
                                                 "' has no single probes to disable (tcp, cuda, nccl, usdt do)");
    if (std::find(known.begin(), known.end(), probe) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw ConfigError("probes.disable", 0, "'" + name + "' is no probe of set " + set + "; its probes: " + list);
  }
}

}  // namespace vigil::agent
