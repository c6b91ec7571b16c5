// `vigil-worker bench`: prompt-processing, decode and batched-decode throughput, as JSON.
//
// Mirrors llama-bench's pp/tg tests so scripts/bench_engine.py can put both side by side: pp runs
// one prompt of P tokens (in chunks of the batch size), tg decodes N tokens one at a time after a
// short prompt, and tgB decodes N tokens for B sequences together, one token each per step.
#include "commands/bench.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/kv_blocks.h"
#include "backend/select/backend_select.h"
#include "model/mapped_file.h"

namespace vigil {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  int threads = 2, prompt = 512, gen = 128, seqs = 8, batch = 512, reps = 3;
  bool profile = false;  // one more tg run with every op timed (op_profile.h)
  BackendConfig backend;
};

// Sums n bytes (n a multiple of 256) as 64-bit lanes: 64-byte vectors, four independent sums, so
// the loop issues loads faster than memory answers and measures the memory, not itself. On x86-64
// an AVX-512 clone (the widest loads the matmul kernels make) and the baseline's (SSE2), picked
// for the CPU at load time.
#if defined(__x86_64__)
[[gnu::target_clones("avx512f", "default")]]
#endif
uint64_t sum_lanes(const uint8_t* p, size_t n) {
  using Lane = uint64_t __attribute__((vector_size(64)));
  Lane a{}, b{}, c{}, d{}, v[4];
  for (size_t i = 0; i < n; i += sizeof v) {
    std::memcpy(v, p + i, sizeof v);  // unaligned loads: a share starts anywhere
    a += v[0];
    b += v[1];
    c += v[2];
    d += v[3];
  }
  const Lane s = a + b + c + d;
  uint64_t total = 0;
  for (size_t k = 0; k < sizeof s / sizeof s[0]; ++k) total += s[k];
  return total;
}

// Read bandwidth of `bytes` with as many threads as the kernels use, each summing its share the
// way a decode step streams its weights: the best of five passes, in GB/s.
double read_bandwidth_gbs(std::span<const uint8_t> bytes, int threads) {
  constexpr size_t kStride = 256;
  const size_t share = bytes.size() / static_cast<size_t>(threads) / kStride * kStride;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { sums[static_cast<size_t>(t)] = sum_lanes(bytes.data() + static_cast<size_t>(t) * share, share); });
    for (auto& w : workers) w.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(share * static_cast<size_t>(threads)) / s / 1e9);
  }
  volatile uint64_t keep = 0;  // the sums are the loop's only output: keep them
  for (uint64_t v : sums) keep = keep + v;
  return best;
}

// The ideal buffer for the same bytes: an anonymous, 2 MiB-aligned copy the kernel backs with
// transparent huge pages where it can (the bound a decode step could reach on this machine).
double ideal_read_bandwidth_gbs(std::span<const uint8_t> bytes, int threads, uint64_t& pmd_mapped) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t size = (bytes.size() + kHuge - 1) / kHuge * kHuge;
  void* raw = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return 0;
  auto* buf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  ::madvise(buf, size, MADV_HUGEPAGE);
  std::memcpy(buf, bytes.data(), bytes.size());
  pmd_mapped = smaps_pmd_mapped_bytes(buf, bytes.size());
  const double gbs = read_bandwidth_gbs({buf, bytes.size()}, threads);
  ::munmap(raw, size + kHuge);
  return gbs;
}

// The tg run's time per token, op by op: what each op costs, how often it runs, what its weights
// stream at. One JSON line after the results line.
void print_profile(const OpProfile& p) {
  const double tokens = static_cast<double>(p.forwards);
  std::printf("{\"profile\": \"tg per token\", \"forwards\": %llu, \"forward_ms\": %.4f, \"ops\": [",
              static_cast<unsigned long long>(p.forwards), p.forward_seconds * 1e3 / tokens);
  double ops_seconds = 0;
  for (int op = 0; op < OpProfile::kOps; ++op) {
    const auto i = static_cast<size_t>(op);
    ops_seconds += p.seconds[i];
    std::printf("%s{\"op\": \"%s\", \"ms\": %.4f, \"calls\": %.0f, \"us_per_call\": %.2f, \"weight_mb\": %.3f, \"gbs\": %.2f}",
                op ? ", " : "", std::string(OpProfile::name(op)).c_str(), p.seconds[i] * 1e3 / tokens,
                static_cast<double>(p.calls[i]) / tokens,
                p.calls[i] ? p.seconds[i] * 1e6 / static_cast<double>(p.calls[i]) : 0.0,
                static_cast<double>(p.weight_bytes[i]) / tokens / 1e6,
                p.seconds[i] > 0 ? static_cast<double>(p.weight_bytes[i]) / p.seconds[i] / 1e9 : 0.0);
  }
  std::printf("], \"between_ops_ms\": %.4f}\n", (p.forward_seconds - ops_seconds) * 1e3 / tokens);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Token ids spread over the vocabulary; their values do not change the cost.
int32_t token_at(int i, int n_vocab) { return static_cast<int32_t>((i * 7919 + 13) % n_vocab); }

}  // namespace

int bench_command(int argc, char** argv) {
  BenchOptions o;
  constexpr const char* kUsage =
      "usage: vigil-worker bench -m MODEL [-t threads] [-p prompt] [-n gen] [-s seqs] [-b batch] [-r reps] "
      "[--backend cpu|cuda] [--device N] [--weights huge_pages|page_cache] [--profile]\n";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--profile") {
      o.profile = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "vigil-worker bench: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--backend") {
      if (!parse_backend_kind(v, o.backend.kind)) {
        std::fprintf(stderr, "vigil-worker bench: --backend: '%s' is not cpu or cuda\n", v);
        return 2;
      }
      continue;
    }
    if (a == "--weights") {
      const auto placement = parse_weights_placement(v);
      if (!placement) {
        std::fprintf(stderr, "vigil-worker bench: --weights: '%s' is not huge_pages or page_cache\n", v);
        return 2;
      }
      o.backend.weights = *placement;
      continue;
    }
    int n = std::atoi(v);
    if (a == "-m") o.model = v;
    else if (a == "-t") o.threads = n;
    else if (a == "-p") o.prompt = n;
    else if (a == "-n") o.gen = n;
    else if (a == "-s") o.seqs = n;
    else if (a == "-b") o.batch = n;
    else if (a == "-r") o.reps = n;
    else if (a == "--device") o.backend.cuda.device = n;
    else {
      std::fputs(kUsage, stderr);
      return 2;
    }
    if (a != "-m" && a != "--device" && n <= 0) {
      std::fprintf(stderr, "vigil-worker bench: %s must be a positive integer\n", a.c_str());
      return 2;
    }
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "vigil-worker bench: -m MODEL is required\n");
    return 2;
  }

  auto model = LlamaModel::load(o.model, weights_placement(o.backend));
  const LlamaHparams& hp = model->hparams();
  const int block = 16;
  const int per_seq = std::max(o.prompt, 8 + o.gen);
  const int n_blocks = (per_seq + block - 1) / block * std::max(1, o.seqs) + 1;
  const int max_batch = std::max({o.batch, o.seqs, 1});
  std::unique_ptr<ForwardBackend> backend;
  try {
    backend = make_backend(o.backend, *model, BackendShape{max_batch, max_batch, per_seq, n_blocks, block, o.threads});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-worker bench: --backend %s: %s\n", backend_kind_name(o.backend.kind), e.what());
    return 1;
  }
  KvBlockAllocator blocks(n_blocks);
  std::vector<BatchToken> batch;

  // pp: the whole prompt, logits for its last token only.
  std::vector<double> pp;
  for (int r = 0; r < o.reps; ++r) {
    KvSequence seq;
    blocks.reserve(seq, o.prompt, block);
    auto t0 = Clock::now();
    for (int start = 0; start < o.prompt; start += o.batch) {
      batch.clear();
      for (int i = start; i < std::min(o.prompt, start + o.batch); ++i)
        batch.push_back({.token = token_at(i, hp.n_vocab), .pos = i, .seq = &seq, .want_logits = i + 1 == o.prompt});
      backend->forward(batch);
    }
    pp.push_back(o.prompt / std::chrono::duration<double>(Clock::now() - t0).count());
    blocks.release(seq);
  }

  // tgB: B sequences after an 8-token prompt each, one token per sequence per step (B = 1 is tg).
  // With `profile`, the decode steps (not the prompts) are timed op by op.
  auto decode = [&](int n_seqs, OpProfile* profile = nullptr) {
    std::vector<KvSequence> seqs(static_cast<size_t>(n_seqs));
    for (auto& s : seqs) blocks.reserve(s, 8 + o.gen, block);
    for (int s = 0; s < n_seqs; ++s) {
      batch.clear();
      for (int i = 0; i < 8; ++i)
        batch.push_back({.token = token_at(i + s, hp.n_vocab), .pos = i, .seq = &seqs[s], .want_logits = i == 7});
      backend->forward(batch);
    }
    if (profile) backend->profile_ops(profile);
    auto t0 = Clock::now();
    for (int step = 0; step < o.gen; ++step) {
      batch.clear();
      for (int s = 0; s < n_seqs; ++s)
        batch.push_back({.token = token_at(step * 31 + s, hp.n_vocab),
                         .pos = 8 + step,
                         .seq = &seqs[s],
                         .want_logits = true,
                         .generated = true});
      backend->forward(batch);
    }
    double tps = static_cast<double>(n_seqs) * o.gen / std::chrono::duration<double>(Clock::now() - t0).count();
    if (profile) backend->profile_ops(nullptr);
    for (auto& s : seqs) blocks.release(s);
    return tps;
  };
  std::vector<double> tg, tgb;
  for (int r = 0; r < o.reps; ++r) tg.push_back(decode(1));
  for (int r = 0; r < o.reps; ++r) tgb.push_back(decode(o.seqs));
  OpProfile profile;
  if (o.profile) {
    if (!backend->profile_ops(nullptr)) {
      std::fprintf(stderr, "vigil-worker bench: --profile: the %s backend cannot time its ops\n",
                   backend_kind_name(o.backend.kind));
      return 2;
    }
    decode(1, &profile);
  }

  // The bound of decode: every weight read once a token, at the bandwidth of the mapping the
  // weights are read through, and at that of an ideal (huge-page) buffer of the same bytes.
  const MappedFile& mapping = *model->file().mapping();
  const double mapping_gbs = read_bandwidth_gbs(mapping.bytes(), o.threads);
  uint64_t ideal_pmd = 0;
  const double ideal_gbs = ideal_read_bandwidth_gbs(mapping.bytes(), o.threads, ideal_pmd);
  const double weight_bytes = static_cast<double>(model->weight_bytes());
  const BackendDevice device = backend->device();
  std::printf(
      "{\"engine\": \"vigil\", \"backend\": \"%s\", \"cpu\": \"%s\", \"kernels\": \"%s\", \"threads\": %d, \"pp_tokens\": %d, \"pp_tps\": %.2f, "
      "\"tg_tokens\": %d, \"tg_tps\": %.2f, \"batch_seqs\": %d, \"batch_tg_tps\": %.2f, \"weight_bytes\": %llu, "
      "\"weights\": \"%s\", \"weights_pmd_mapped_bytes\": %llu, \"weights_read_gbs\": %.2f, \"weights_tg_bound_tps\": %.2f, "
      "\"read_gbs\": %.2f, \"read_pmd_mapped_bytes\": %llu, \"tg_bound_tps\": %.2f}\n",
      device.kind.c_str(), device.cpu_model.c_str(), device.kernel_path.c_str(), o.threads, o.prompt, median(pp), o.gen, median(tg), o.seqs,
      median(tgb), static_cast<unsigned long long>(model->weight_bytes()),
      std::string(weights_placement_name(mapping.placement())).c_str(),
      static_cast<unsigned long long>(mapping.pmd_mapped_bytes()), mapping_gbs, mapping_gbs * 1e9 / weight_bytes,
      ideal_gbs, static_cast<unsigned long long>(ideal_pmd), ideal_gbs * 1e9 / weight_bytes);
  if (o.profile) print_profile(profile);
  return 0;
}

}  // namespace vigil
