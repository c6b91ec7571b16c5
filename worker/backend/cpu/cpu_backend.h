// The CPU backend: CpuForward over a host KV cache from a caching allocator and a thread pool of
// its own, optionally split over a tensor-parallel group.
#pragma once

#include "backend/caching_allocator.h"
#include "backend/cpu/cpu_forward.h"
#include "backend/cpu/kv_cache.h"
#include "backend/forward_backend.h"
#include "comm/tensor_parallel.h"
#include "kernels/cpu/thread_pool.h"

namespace vigil {

class CpuBackend final : public ForwardBackend {
 public:
  // `tp`: the tensor-parallel group every matrix product is split over (it must outlive the
  // backend); nullptr: one rank.
  CpuBackend(const LlamaModel& model, const BackendShape& shape, TensorParallel* tp = nullptr);

  void forward(std::span<const BatchToken> batch) override { forward_.forward(batch); }
  std::span<const float> logits(int i) const override { return forward_.logits(i); }
  bool supports_lora() const override { return !forward_.tensor_parallel(); }
  std::string describe() const override;
  BackendDevice device() const override;
  AllocatorStats allocator_stats() const override { return alloc_->stats(); }
  // The KV cache's allocator: adapters held there show in its stats and its probes, as a GPU
  // worker's would in device memory. Each buffer keeps the allocator alive.
  AdapterMemory adapter_memory() const override;
  bool profile_ops(OpProfile* profile) override {
    forward_.set_profile(profile);
    return true;
  }

 private:
  std::shared_ptr<CachingAllocator> alloc_;  // before cache_: the cache's storage comes from it
  KvCache cache_;
  ThreadPool pool_;
  CpuForward forward_;
};

}  // namespace vigil
