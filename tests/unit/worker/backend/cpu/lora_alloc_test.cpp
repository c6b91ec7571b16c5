// Steady-state decoding with LoRA adapters allocates nothing on the heap: batches mixing the base
// model and two adapters run on buffers sized when the forward pass was built (counting operator new).
#include <gtest/gtest.h>


#include "backend/cpu/cpu_forward.h"
#include "worker/heap_counter.h"
#include "worker/lora_builder.h"


namespace vigil {
namespace {

TEST(LoraDecodeAllocations, NoneInSteadyState) {
  auto model = LlamaModel::load(VIGIL_MODEL_PATH);
  test::LoraSpec sx, sy;
  sx.pairs = test::lora_all_matrices(*model, 8, 0, false);
  sy.pairs = test::lora_all_matrices(*model, 64, 1, false);
  const auto bx = test::build_lora(sx, *model), by = test::build_lora(sy, *model);
  auto x = LoraAdapter::from_gguf(GgufFile::parse(bx, "x.gguf"), *model);
  auto y = LoraAdapter::from_gguf(GgufFile::parse(by, "y.gguf"), *model);
  const LoraAdapter* adapters[] = {nullptr, x.get(), y.get(), x.get()};

  constexpr int kSeqs = 4, kCtx = 96;
  KvCache cache(model->hparams(), kSeqs * kCtx / 16, 16);
  KvBlockAllocator blocks(cache.n_blocks());
  ThreadPool pool(2);
  CpuForward cpu(*model, cache, pool, 16, kCtx);
  std::vector<KvSequence> seqs(kSeqs);
  for (auto& s : seqs) ASSERT_TRUE(blocks.reserve(s, kCtx, 16));
  std::vector<BatchToken> batch;
  batch.reserve(kSeqs);
  auto step = [&](int pos) {
    batch.clear();
    for (int i = 0; i < kSeqs; ++i) batch.push_back({.token = 1 + i, .pos = pos, .seq = &seqs[static_cast<size_t>(i)], .want_logits = true, .adapter = adapters[i]});
    cpu.forward(batch);
  };
  for (int pos = 0; pos < 4; ++pos) step(pos);  // warm-up: the matmul scratch reaches its size
  const long before = test::heap_allocations();
  for (int pos = 4; pos < 20; ++pos) step(pos);
  EXPECT_EQ(test::heap_allocations() - before, 0) << "heap allocations during 16 decode steps with adapters";
}

}  // namespace
}  // namespace vigil
