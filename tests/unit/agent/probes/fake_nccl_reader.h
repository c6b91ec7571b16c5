// A hand-made snapshot of nccl.bpf.c's maps behind the NcclReader interface, returned as NcclMaps
// returns it: only the maps a read asks for, so a reader that asks for too few sees them empty.
#pragma once

#include "probes/nccl_maps.h"

namespace vigil::agent::test {

class FakeNccl : public NcclReader {
 public:
  NcclSnapshot read(unsigned maps) const override {
    NcclSnapshot s;
    if (maps & kNcclProcs) s.procs = snapshot.procs;
    if (maps & kNcclComms) s.comms = snapshot.comms;
    if (maps & kNcclCalls) s.calls = snapshot.calls;
    if (maps & kNcclAsync) s.async = snapshot.async;
    return s;
  }
  NcclSnapshot snapshot;
};

}  // namespace vigil::agent::test
