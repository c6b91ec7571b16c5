// A batch as a plan of ints, for the tensor-parallel followers that run every forward pass of the
// leader (wire format: docs/tensor-parallel.md). The communication itself is comm/'s.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/forward_backend.h"

namespace vigil {

// The leader's encoder; reused from step to step, it allocates nothing once its buffers have grown.
class BatchPlanEncoder {
 public:
  // The plan of `batch`: sequences numbered by first appearance, each with its whole block table.
  // LoRA adapters are not carried (tensor parallelism refuses them). Valid until the next call.
  std::span<int32_t> encode(std::span<const BatchToken> batch);

 private:
  std::vector<int32_t> plan_;
  std::vector<const KvSequence*> seqs_;
};

// Rebuilds the batch into `batch`, its tokens pointing into `seqs`. Throws std::runtime_error
// naming the inconsistency for a plan that does not describe a batch.
void decode_batch_plan(std::span<const int32_t> plan, std::vector<BatchToken>& batch, std::vector<KvSequence>& seqs);

}  // namespace vigil
