// Steady-state decoding allocates nothing on the heap: a counting operator new proves it.
#include <gtest/gtest.h>


#include "backend/cpu/cpu_forward.h"
#include "engine/sampler.h"
#include "worker/heap_counter.h"


namespace vigil {
namespace {

TEST(DecodeAllocations, NoneInSteadyState) {
  auto model = LlamaModel::load(VIGIL_MODEL_PATH);
  const auto& hp = model->hparams();
  constexpr int kSeqs = 4, kCtx = 96;
  KvCache cache(hp, kSeqs * kCtx / 16, 16);
  KvBlockAllocator blocks(cache.n_blocks());
  ThreadPool pool(2);
  CpuForward cpu(*model, cache, pool, 16, kCtx);
  std::vector<KvSequence> seqs(kSeqs);
  for (auto& s : seqs) ASSERT_TRUE(blocks.reserve(s, kCtx, 16));
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 40;
  params.repetition_penalty = 1.1f;
  Sampler sampler(params, hp.n_vocab);
  std::vector<int32_t> history;
  history.reserve(kCtx);
  std::vector<BatchToken> batch;
  batch.reserve(kSeqs);

  int32_t token = 1;
  auto step = [&](int pos) {
    batch.clear();
    for (auto& s : seqs) batch.push_back({.token = token, .pos = pos, .seq = &s, .want_logits = true});
    cpu.forward(batch);
    token = sampler.sample(cpu.logits(0), history);
    history.push_back(token);
  };
  for (int pos = 0; pos < 8; ++pos) step(pos);  // warm-up: scratch buffers reach their size
  const long before = test::heap_allocations();
  for (int pos = 8; pos < 40; ++pos) step(pos);
  EXPECT_EQ(test::heap_allocations() - before, 0) << "heap allocations during 32 batched decode steps";
}

}  // namespace
}  // namespace vigil
