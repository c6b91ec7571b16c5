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
// tcp's and nccl's, collective feeds correlation's correlator), and collectors are served and
// housekeeping runs in this order.
#include "sets/registry.h"

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
      {"tcp", &ProbeSets::tcp, load<TcpSet>},
      {"cuda", &ProbeSets::cuda, load<CudaSet>},
      {"nccl", &ProbeSets::nccl, load<NcclSet>},
      {"usdt", &ProbeSets::usdt, load<UsdtSet>},
      {"correlation", nullptr, load<CorrelationSet>, after<TcpSet>},
      {"collective", &ProbeSets::usdt, load<CollectiveSet>, after<CorrelationSet>},
      {"xid", &ProbeSets::xid, load<XidSet>},
      {"proc", nullptr, ProcSet::load, libraries_watched},
  };
  return kSets;
}

}  // namespace vigil::agent
