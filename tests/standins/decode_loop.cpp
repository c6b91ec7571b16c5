// decode_loop MODEL COUNTER_FILE: the worker's own CPU decode, forever, with no system call per
// token. The agent-overhead benchmark (bench/agent_overhead_twin.py) runs it beside the served
// worker as the machine's yardstick: the host's contention slows both alike, while what the
// agent adds to a process that makes system calls (the syscall tracepoints' slow path, the TCP
// programs) and to the worker's probes does not reach it. It decodes sequences of one thread,
// an 8-token prompt then 248 tokens, and after each decoded token stores the total in the first
// 8 bytes of COUNTER_FILE (made by the caller, mapped shared), which the benchmark reads.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "backend/kv_blocks.h"
#include "backend/select/backend_select.h"

namespace {

constexpr int kPrompt = 8, kDecode = 248, kBlock = 16;

int32_t token_at(int i, int n_vocab) { return static_cast<int32_t>((i * 7919 + 13) % n_vocab); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fputs("usage: decode_loop MODEL COUNTER_FILE\n", stderr);
    return 2;
  }
  const int fd = open(argv[2], O_RDWR);
  if (fd < 0) {
    std::perror(argv[2]);
    return 1;
  }
  void* mapped = mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* counter = static_cast<std::atomic<uint64_t>*>(mapped);

  auto model = vigil::LlamaModel::load(argv[1]);
  const int n_vocab = model->hparams().n_vocab;
  const int positions = kPrompt + kDecode;
  const int n_blocks = (positions + kBlock - 1) / kBlock + 1;
  auto backend = vigil::make_backend(vigil::BackendConfig{}, *model,
                                     vigil::BackendShape{kPrompt, 1, positions, n_blocks, kBlock, 1});
  vigil::KvBlockAllocator blocks(n_blocks);
  std::vector<vigil::BatchToken> batch;
  uint64_t decoded = 0;
  for (int s = 0;; ++s) {
    vigil::KvSequence seq;
    blocks.reserve(seq, positions, kBlock);
    batch.clear();
    for (int i = 0; i < kPrompt; ++i)
      batch.push_back({.token = token_at(i + s, n_vocab), .pos = i, .seq = &seq, .want_logits = i + 1 == kPrompt});
    backend->forward(batch);
    for (int step = 0; step < kDecode; ++step) {
      batch.assign(1, {.token = token_at(step * 31 + s, n_vocab), .pos = kPrompt + step, .seq = &seq,
                       .want_logits = true, .generated = true});
      backend->forward(batch);
      counter->store(++decoded, std::memory_order_relaxed);
    }
    blocks.release(seq);
  }
}
