// GPU generation check and benchmark for tests/gpu/device_check.sh: greedy generation on the CPU
// backend and on the CUDA backend (graphs on and off), prefill/decode tokens/s, 16-stream decode
// throughput, and the worker's own allocator and graph counters as JSON for the agent comparison.
//   cuda_generate MODEL check [--vmm]              greedy tokens CPU vs CUDA; exit 1 on mismatch
//   cuda_generate MODEL bench [--graphs on|off] [--matmul auto|cublas|gemv] [--vmm] [--streams N]
//                             [--handshake]
// --handshake (for agent_compare.py): loads the driver, prints "ready", waits for a line on stdin
// before allocating anything, and after the JSON waits for another line before exiting, so a
// tracer can attach first and read its numbers while the process still lives.
#include <cuda_runtime.h>

#include <chrono>
#include <iostream>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "backend/cpu/cpu_forward.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/kv_blocks.h"
#include "kernels/cpu/thread_pool.h"
#include "model/llama_model.h"
#include "model/vocab.h"

namespace vigil {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBlock = 16;
constexpr const char* kPrompt = "The capital of France is Paris. Write one sentence about the history of the city:";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Args {
  std::string model, mode;
  cuda::CudaOptions opt;
  int streams = 16;
  bool handshake = false;
};

// Greedy continuation on the GPU: prefill the prompt in chunks of max_batch, then decode.
std::vector<int32_t> gpu_greedy(cuda::CudaBackend& backend, KvSequence& seq, const std::vector<int32_t>& prompt, int n,
                                int max_batch) {
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.push_back({.token = prompt[i], .pos = static_cast<int32_t>(i), .seq = &seq, .want_logits = i + 1 == prompt.size()});
    if (static_cast<int>(batch.size()) == max_batch || i + 1 == prompt.size()) {
      backend.forward(batch, false);
      batch.clear();
    }
  }
  std::vector<int32_t> out;
  for (int step = 0; step < n; ++step) {
    out.push_back(backend.argmax(0));
    BatchToken next{.token = out.back(), .pos = static_cast<int32_t>(prompt.size()) + step, .seq = &seq, .want_logits = true};
    backend.forward({&next, 1}, false);
  }
  return out;
}

std::vector<int32_t> cpu_greedy(const LlamaModel& model, const std::vector<int32_t>& prompt, int n) {
  const int n_ctx = static_cast<int>(prompt.size()) + n;
  KvCache cache(model.hparams(), (n_ctx + kBlock - 1) / kBlock, kBlock);
  KvBlockAllocator blocks(cache.n_blocks());
  ThreadPool pool(4);
  CpuForward backend(model, cache, pool, static_cast<int>(prompt.size()), n_ctx);
  KvSequence seq;
  blocks.reserve(seq, n_ctx, kBlock);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({.token = prompt[i], .pos = static_cast<int32_t>(i), .seq = &seq, .want_logits = i + 1 == prompt.size()});
  backend.forward(batch);
  std::vector<int32_t> out;
  for (int step = 0; step < n; ++step) {
    auto l = backend.logits(0);
    out.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
    BatchToken next{.token = out.back(), .pos = static_cast<int32_t>(prompt.size()) + step, .seq = &seq, .want_logits = true};
    backend.forward({&next, 1});
  }
  return out;
}

std::string ids(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t t : v) s += (s.empty() ? "" : ",") + std::to_string(t);
  return "[" + s + "]";
}

void print_counters(const cuda::CudaBackend& backend) {
  const AllocatorStats a = backend.allocator_stats();
  const GraphStats g = *backend.graph_stats();
  std::printf("\"allocator\": {\"segment_allocs\": %llu, \"segment_frees\": %llu, \"reserved_bytes\": %zu, "
              "\"segments\": %zu},\n\"graphs\": {\"captures\": %llu, \"capture_failures\": %llu, \"launches\": %llu, "
              "\"launch_failures\": %llu, \"eager_steps\": %llu}",
              static_cast<unsigned long long>(a.segment_allocs), static_cast<unsigned long long>(a.segment_frees),
              a.reserved_bytes, a.segments, static_cast<unsigned long long>(g.captures),
              static_cast<unsigned long long>(g.capture_failures), static_cast<unsigned long long>(g.launches),
              static_cast<unsigned long long>(g.launch_failures), static_cast<unsigned long long>(g.eager_steps));
}

int check(const LlamaModel& model, const std::vector<int32_t>& prompt, Args a) {
  const int n = 32;
  a.opt.max_batch = 16;
  a.opt.max_positions = 256;
  a.opt.n_blocks = a.opt.max_positions / kBlock;
  const std::vector<int32_t> cpu = cpu_greedy(model, prompt, n);
  std::vector<int32_t> gpu[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    a.opt.graphs = graphs == 1;
    cuda::CudaBackend backend(model, a.opt);
    KvBlockAllocator blocks(a.opt.n_blocks);
    KvSequence seq;
    blocks.reserve(seq, static_cast<int32_t>(prompt.size()) + n, kBlock);
    gpu[graphs] = gpu_greedy(backend, seq, prompt, n, a.opt.max_batch);
    std::fprintf(stderr, "%s\n", backend.describe().c_str());
  }
  int agree = 0;
  while (agree < n && cpu[static_cast<size_t>(agree)] == gpu[1][static_cast<size_t>(agree)]) ++agree;
  std::printf("{\"cpu\": %s,\n\"cuda_graphs_off\": %s,\n\"cuda_graphs_on\": %s,\n\"cpu_cuda_agree_prefix\": %d}\n",
              ids(cpu).c_str(), ids(gpu[0]).c_str(), ids(gpu[1]).c_str(), agree);
  // Graphs replay the same kernels on the same rows: any difference is a bug. CPU and GPU sum
  // in different orders (and the CPU quantizes activations to q8), so only a prefix is reported.
  return gpu[0] == gpu[1] ? 0 : 1;
}

int bench(const LlamaModel& model, const std::vector<int32_t>& prompt, Args a) {
  const int decode = 128, streams = a.streams;
  a.opt.max_batch = std::max(streams, 64);
  a.opt.max_positions = 512;
  a.opt.n_blocks = streams * a.opt.max_positions / kBlock;
  std::string line;
  if (a.handshake) {
    (void)cudaFree(nullptr);  // maps libcuda.so.1 so the tracer can attach before any allocation
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    std::getline(std::cin, line);
  }
  cuda::CudaBackend backend(model, a.opt);
  std::fprintf(stderr, "%s\n", backend.describe().c_str());
  KvBlockAllocator blocks(a.opt.n_blocks);
  std::vector<KvSequence> seqs(static_cast<size_t>(streams));
  for (KvSequence& s : seqs) blocks.reserve(s, a.opt.max_positions, kBlock);

  // Prefill: a 256-token prompt (the real one repeated) in batches of max_batch; warm once.
  std::vector<int32_t> long_prompt;
  while (long_prompt.size() < 256) long_prompt.insert(long_prompt.end(), prompt.begin(), prompt.end());
  long_prompt.resize(256);
  gpu_greedy(backend, seqs[0], long_prompt, 1, a.opt.max_batch);
  auto t0 = Clock::now();
  gpu_greedy(backend, seqs[0], long_prompt, 0, a.opt.max_batch);
  const double prefill_s = seconds_since(t0);

  // Single-stream decode after the prompt (the prefill is not timed).
  gpu_greedy(backend, seqs[0], prompt, 0, a.opt.max_batch);
  t0 = Clock::now();
  for (int step = 0; step < decode; ++step) {
    BatchToken next{.token = backend.argmax(0), .pos = static_cast<int32_t>(prompt.size()) + step, .seq = &seqs[0], .want_logits = true};
    backend.forward({&next, 1}, false);
  }
  const double decode_s = seconds_since(t0);

  // streams sequences decoding together: one batch row each per step.
  std::vector<BatchToken> batch(static_cast<size_t>(streams));
  for (int s = 0; s < streams; ++s) batch[static_cast<size_t>(s)] = {prompt[0], 0, &seqs[static_cast<size_t>(s)], true};
  backend.forward(batch, false);  // untimed: captures this bucket's graph
  t0 = Clock::now();
  for (int step = 0; step < decode; ++step) {
    for (int s = 0; s < streams; ++s)
      batch[static_cast<size_t>(s)] = {step == 0 ? prompt[0] : backend.argmax(s), step, &seqs[static_cast<size_t>(s)], true};
    backend.forward(batch, false);
  }
  const double multi_s = seconds_since(t0);
  std::printf("{\"describe\": \"%s\",\n\"prefill_tokens_per_s\": %.1f,\n\"decode_tokens_per_s\": %.1f,\n"
              "\"streams\": %d, \"multi_stream_tokens_per_s\": %.1f,\n",
              backend.describe().c_str(), 256.0 / prefill_s, decode / decode_s,
              streams, streams * decode / multi_s);
  print_counters(backend);
  std::printf(", \"pid\": %d}\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  if (a.handshake) std::getline(std::cin, line);
  return 0;
}

Args parse(int argc, char** argv) {
  if (argc < 3) throw std::invalid_argument("usage: cuda_generate MODEL check|bench [options]");
  Args a{argv[1], argv[2], {}, 16, false};
  for (int i = 3; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
      return argv[++i];
    };
    if (f == "--vmm") a.opt.vmm = true;
    else if (f == "--graphs") a.opt.graphs = value() == "on";
    else if (f == "--handshake") a.handshake = true;
    else if (f == "--streams") a.streams = std::stoi(value());
    else if (f == "--matmul") {
      const std::string m = value();
      a.opt.matmul = m == "cublas" ? cuda::CudaOptions::Matmul::kCublas
                     : m == "gemv" ? cuda::CudaOptions::Matmul::kGemv
                                   : cuda::CudaOptions::Matmul::kAuto;
    } else throw std::invalid_argument("unknown option " + f);
  }
  return a;
}

}  // namespace
}  // namespace vigil

int main(int argc, char** argv) {
  try {
    vigil::Args a = vigil::parse(argc, argv);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
      throw std::runtime_error(std::string("needs a CUDA GPU (") + cudaGetErrorName(e) + ")");
    auto model = vigil::LlamaModel::load(a.model);
    const vigil::Vocab vocab = vigil::Vocab::from_gguf(model->file());
    const std::vector<int32_t> prompt = vocab.encode(vigil::kPrompt, false);
    if (a.mode == "check") return vigil::check(*model, prompt, a);
    if (a.mode == "bench") return vigil::bench(*model, prompt, a);
    throw std::invalid_argument("mode must be check or bench");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_generate: %s\n", e.what());
    return 1;
  }
}
