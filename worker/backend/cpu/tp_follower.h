// A follower rank of tensor-parallel serving: it runs the leader's batches, as the leader's plans
// describe them (backend/batch_plan.h), on its own backend split over the same group.
#pragma once

#include "backend/forward_backend.h"
#include "comm/tensor_parallel.h"

namespace vigil {

// Runs until the leader says shutdown. A failed or timed-out collective throws CollectiveError:
// what the process does then is the caller's policy (`serve --tp` exits 3).
void follow_leader(ForwardBackend& backend, TensorParallel& tp);

}  // namespace vigil
