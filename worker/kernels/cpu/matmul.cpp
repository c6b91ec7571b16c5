// Matmul driver: kernel-path selection, activation quantization and the split into tiles.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/quants.h"

namespace vigil {
namespace {

using kernels::Activations;
using kernels::KernelSet;
using kernels::TileJob;

bool cpu_has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}
bool cpu_has_avx512_vnni() {
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

const KernelSet& kernel_set_for(std::string_view path) {
  if (path.empty() || path == "auto") {
    if (cpu_has_avx512_vnni()) return kernels::kernels_avx512_vnni();
    if (cpu_has_avx2()) return kernels::kernels_avx2();
    return kernels::kernels_scalar();
  }
  if (path == "scalar") return kernels::kernels_scalar();
  if (path == "avx2") {
    if (!cpu_has_avx2()) throw std::runtime_error("kernel path 'avx2' requested but this CPU lacks AVX2/FMA/F16C");
    return kernels::kernels_avx2();
  }
  if (path == "avx512-vnni") {
    if (!cpu_has_avx512_vnni()) {
      throw std::runtime_error("kernel path 'avx512-vnni' requested but this CPU lacks AVX-512 VNNI");
    }
    return kernels::kernels_avx512_vnni();
  }
  throw std::runtime_error("unknown kernel path '" + std::string(path) +
                           "' (expected avx512-vnni, avx2 or scalar)");
}

std::atomic<const KernelSet*> g_active{nullptr};

const KernelSet& active_kernels() {
  const KernelSet* set = g_active.load(std::memory_order_acquire);
  if (set == nullptr) {
    const char* env = std::getenv("VIGIL_KERNEL_PATH");
    set = &kernel_set_for(env ? env : "");
    g_active.store(set, std::memory_order_release);
  }
  return *set;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

enum class ActKind { F32, Rounded16, Q8_0, Q8_1, Q8_K };

// What matmul needs to know of a weight type. The library carries its own table of the types it
// supports so that it does not depend on the model library (which links it).
struct TypeLayout {
  std::string_view name;
  int64_t block;  // elements per block
  size_t bytes;   // bytes per block
  ActKind activations;
};

TypeLayout layout_of(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return {"F32", 1, 4, ActKind::F32};
    case GgmlType::F16: return {"F16", 1, 2, ActKind::Rounded16};
    case GgmlType::BF16: return {"BF16", 1, 2, ActKind::Rounded16};
    case GgmlType::Q4_0: return {"Q4_0", kQK, sizeof(BlockQ4_0), ActKind::Q8_0};
    case GgmlType::Q4_1: return {"Q4_1", kQK, sizeof(BlockQ4_1), ActKind::Q8_1};
    case GgmlType::Q8_0: return {"Q8_0", kQK, sizeof(BlockQ8_0), ActKind::Q8_0};
    case GgmlType::Q6_K: return {"Q6_K", kQKK, sizeof(BlockQ6K), ActKind::Q8_K};
    default:
      throw std::invalid_argument("matmul: unsupported weight type (ggml type id " +
                                  std::to_string(static_cast<uint32_t>(type)) + ")");
  }
}

kernels::TileFn tile_for(const KernelSet& k, GgmlType type) {
  switch (type) {
    case GgmlType::F32: return k.f32;
    case GgmlType::F16: return k.f16;
    case GgmlType::BF16: return k.bf16;
    case GgmlType::Q4_0: return k.q4_0;
    case GgmlType::Q4_1: return k.q4_1;
    case GgmlType::Q8_0: return k.q8_0;
    default: return k.q6_k;
  }
}

// Work per task: about a million multiply-adds (tens of microseconds), so claiming a task costs
// little next to it, but at least kTasksPerThread tasks per thread so threads finish together
// even when one of them is preempted (two cores shared with the server).
constexpr int64_t kTaskMacs = int64_t{1} << 20;
constexpr int64_t kTasksPerThread = 4;
// Below this many elements the activations are quantized by the caller alone: waking the pool
// would cost more than the work.
constexpr int64_t kParallelQuantizeElements = int64_t{1} << 15;

// Where the prepared activations live inside the scratch buffer: 64-byte aligned regions, only
// those the activations of this weight type need.
struct ScratchLayout {
  size_t qs = 0, d = 0, s = 0, bsums = 0, f = 0, total = 0;
};

ScratchLayout scratch_layout(ActKind kind, int64_t n_tokens, int64_t cols, int64_t n_blocks, size_t q_stride) {
  ScratchLayout layout;
  const auto tokens = static_cast<size_t>(n_tokens);
  size_t offset = 0;
  auto carve = [&](size_t bytes) {
    const size_t at = offset;
    offset = align64(offset + bytes);
    return at;
  };
  if (kind == ActKind::Rounded16) layout.f = carve(tokens * static_cast<size_t>(cols) * sizeof(float));
  if (kind == ActKind::Q8_0 || kind == ActKind::Q8_1 || kind == ActKind::Q8_K) {
    layout.qs = carve(tokens * q_stride);
    layout.d = carve(tokens * static_cast<size_t>(n_blocks) * sizeof(float));
  }
  // s is block-major and padded: the kernels load the s of 8 consecutive tokens at once.
  if (kind == ActKind::Q8_1) layout.s = carve((tokens * static_cast<size_t>(n_blocks) + 8) * sizeof(float));
  if (kind == ActKind::Q8_K) layout.bsums = carve(tokens * static_cast<size_t>(n_blocks) * 16 * sizeof(int16_t));
  layout.total = offset;
  return layout;
}

// The activations of one matmul, written into the scratch buffer token by token. ggml converts the
// activations to the weight's type before the dot product (vec_dot_type); doing the same keeps
// results identical to llama.cpp's.
class ActivationPrep {
 public:
  ActivationPrep(const KernelSet& k, GgmlType type, ActKind kind, const float* x, int64_t n_tokens, int64_t cols,
                 int64_t n_blocks, size_t q_stride, uint8_t* base, const ScratchLayout& layout)
      : k_(k), type_(type), kind_(kind), x_(x), n_tokens_(n_tokens), cols_(cols), n_blocks_(n_blocks),
        q_stride_(static_cast<int64_t>(q_stride)),
        qs_(reinterpret_cast<int8_t*>(base + layout.qs)),
        d_(reinterpret_cast<float*>(base + layout.d)),
        s_(reinterpret_cast<float*>(base + layout.s)),
        bsums_(reinterpret_cast<int16_t*>(base + layout.bsums)),
        f_(reinterpret_cast<float*>(base + layout.f)) {}

  ActKind kind() const { return kind_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t cols() const { return cols_; }

  // What the tile kernels read: x itself for F32, the prepared buffers otherwise.
  Activations view() const {
    Activations act;
    act.n_blocks = n_blocks_;
    act.q_stride = q_stride_;
    if (kind_ == ActKind::F32) {
      act.f = x_;
      act.f_stride = cols_;
    } else if (kind_ == ActKind::Rounded16) {
      act.f = f_;
      act.f_stride = cols_;
    } else {
      act.qs = qs_;
      act.d = d_;
      act.s = kind_ == ActKind::Q8_1 ? s_ : nullptr;
      act.s_stride = n_tokens_;
      act.bsums = kind_ == ActKind::Q8_K ? bsums_ : nullptr;
    }
    return act;
  }

  // Converts token t's row of x.
  void token(int64_t t) const {
    const float* xt = x_ + t * cols_;
    const auto bt = static_cast<size_t>(t * n_blocks_);
    switch (kind_) {
      case ActKind::F32: break;
      case ActKind::Rounded16:
        for (int64_t c = 0; c < cols_; ++c) {
          f_[t * cols_ + c] = type_ == GgmlType::F16 ? fp16_to_fp32(fp32_to_fp16(xt[c]))
                                                     : bf16_to_fp32(fp32_to_bf16(xt[c]));
        }
        break;
      case ActKind::Q8_0: k_.quantize_q8_0(xt, cols_, qs_ + t * q_stride_, d_ + bt); break;
      case ActKind::Q8_1: k_.quantize_q8_1(xt, cols_, qs_ + t * q_stride_, d_ + bt, s_ + t, n_tokens_); break;
      case ActKind::Q8_K: quantize_row_q8_K_ref(xt, cols_, qs_ + t * q_stride_, d_ + bt, bsums_ + bt * 16); break;
    }
  }

 private:
  const KernelSet& k_;
  GgmlType type_;
  ActKind kind_;
  const float* x_;
  int64_t n_tokens_, cols_, n_blocks_, q_stride_;
  int8_t* qs_;
  float* d_;
  float* s_;
  int16_t* bsums_;
  float* f_;
};

// Every token's activations, split over the pool in runs of whole tokens (each token is converted
// alone, so the split cannot change a bit).
void prepare_activations(const ActivationPrep& prep, ThreadPool& pool) {
  if (prep.kind() == ActKind::F32) return;  // the kernels read x as it is
  const int64_t n_tokens = prep.n_tokens();
  if (pool.size() == 1 || n_tokens * prep.cols() < kParallelQuantizeElements) {
    for (int64_t t = 0; t < n_tokens; ++t) prep.token(t);
    return;
  }
  const int64_t per_task = std::max<int64_t>(1, n_tokens / (pool.size() * kTasksPerThread));
  pool.parallel_for(static_cast<int>(ceil_div(n_tokens, per_task)), [&](int task, int) {
    const int64_t end = std::min(n_tokens, (task + 1) * per_task);
    for (int64_t t = task * per_task; t < end; ++t) prep.token(t);
  });
}

// Tiles: token chunks of up to kMaxTileTokens, row chunks sized to kTaskMacs (multiples of 4 so
// the micro-tiles rarely repeat rows), capped so there are enough tasks to balance threads. Each
// y[t][r] is computed by exactly one tile, so the split does not change the results.
void run_tiles(kernels::TileFn tile, const TileJob& job, ThreadPool& pool) {
  const int64_t n_tokens = job.n_tokens;
  const int64_t rows = job.w->rows;
  const int64_t cols = job.w->cols;
  const int64_t token_chunk = std::min(n_tokens, kernels::kMaxTileTokens);
  const int64_t token_chunks = ceil_div(n_tokens, token_chunk);
  const int64_t rows_for_macs = ceil_div(kTaskMacs, token_chunk * cols);
  const int64_t rows_for_balance =
      ceil_div(rows, std::max<int64_t>(1, pool.size() * kTasksPerThread / token_chunks));
  const int64_t row_chunk = ceil_div(std::max<int64_t>(1, std::min(rows_for_macs, rows_for_balance)), 4) * 4;
  const int64_t row_chunks = ceil_div(rows, row_chunk);
  pool.parallel_for(static_cast<int>(row_chunks * token_chunks), [&](int task, int) {
    const int64_t r0 = (task / token_chunks) * row_chunk;
    const int64_t t0 = (task % token_chunks) * token_chunk;
    tile(job, r0, std::min(rows, r0 + row_chunk), t0, std::min(n_tokens, t0 + token_chunk));
  });
}

}  // namespace

uint8_t* MatmulScratch::reserve(size_t bytes) {
  if (buf_.size() < bytes) buf_.resize(bytes);
  return buf_.data();
}

std::string_view cpu_kernel_path() { return active_kernels().name; }

void select_cpu_kernel_path(std::string_view path) {
  g_active.store(&kernel_set_for(path), std::memory_order_release);
}

std::vector<std::string_view> available_cpu_kernel_paths() {
  std::vector<std::string_view> paths;
  if (cpu_has_avx512_vnni()) paths.push_back("avx512-vnni");
  if (cpu_has_avx2()) paths.push_back("avx2");
  paths.push_back("scalar");
  return paths;
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const TypeLayout type = layout_of(w.type);
  if (w.rows < 0 || w.cols < 0 || w.cols % type.block != 0) {
    throw std::invalid_argument("matmul: " + std::string(type.name) + " matrix with " +
                                std::to_string(w.cols) + " columns (must be a multiple of " +
                                std::to_string(type.block) + ")");
  }
  if (n_tokens <= 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  const KernelSet& k = active_kernels();
  const int64_t n_blocks = w.cols / type.block;
  const size_t q_stride = align64(static_cast<size_t>(w.cols));
  const ScratchLayout layout = scratch_layout(type.activations, n_tokens, w.cols, n_blocks, q_stride);
  const ActivationPrep prep(k, w.type, type.activations, x, n_tokens, w.cols, n_blocks, q_stride,
                            scratch.reserve(layout.total), layout);
  prepare_activations(prep, pool);

  const Activations act = prep.view();
  TileJob job;
  job.w = &w;
  job.n_tokens = n_tokens;
  job.row_bytes = static_cast<size_t>(n_blocks) * type.bytes;
  job.act = &act;
  job.y = y;
  run_tiles(tile_for(k, w.type), job, pool);
}

}  // namespace vigil
