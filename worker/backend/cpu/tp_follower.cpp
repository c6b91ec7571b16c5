// A follower rank of tensor-parallel serving (see tp_follower.h).
#include "backend/cpu/tp_follower.h"

#include <vector>

#include "backend/batch_plan.h"

namespace vigil {

void follow_leader(ForwardBackend& backend, TensorParallel& tp) {
  std::vector<int32_t> plan;
  std::vector<BatchToken> batch;
  std::vector<KvSequence> seqs;
  for (;;) {
    const TensorParallel::Message m = tp.receive(plan);
    if (m == TensorParallel::Message::kShutdown) return;
    if (m != TensorParallel::Message::kBatch) continue;  // a heartbeat
    decode_batch_plan(plan, batch, seqs);
    backend.forward(batch);
  }
}

}  // namespace vigil
