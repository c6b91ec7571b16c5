// The CPU forward backend: LlamaContext over a host KV cache from a caching allocator.
#pragma once

#include "engine/caching_allocator.h"
#include "engine/forward_backend.h"
#include "kernels/cpu/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_context.h"

namespace vigil {

class CpuBackend final : public ForwardBackend {
 public:
  CpuBackend(const LlamaModel& model, const BackendShape& shape);

  void forward(std::span<const BatchToken> batch) override { ctx_.forward(batch); }
  std::span<const float> logits(int i) const override { return ctx_.logits(i); }
  bool supports_lora() const override { return true; }
  std::string describe() const override;
  AllocatorStats allocator_stats() const override { return alloc_.stats(); }

  // Splits every matrix product over the tensor-parallel group (the CPU backend only).
  void set_tensor_parallel(TensorParallel* tp) { ctx_.set_tensor_parallel(tp); }

 private:
  CachingAllocator alloc_;  // before cache_: the cache's storage comes from it
  KvCache cache_;
  ThreadPool pool_;
  LlamaContext ctx_;
};

}  // namespace vigil
