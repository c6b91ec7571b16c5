// The llama forward pass on one GPU (see cuda_context.h). Reads top to bottom as the
// architecture, like model/llama_context.cpp, with kernels from ops.h and gemm.h.
#include "cuda_context.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda_check.h"
#include "cuda_memory.h"
#include "driver_api.h"
#include "model/ggml_types.h"

namespace vigil::cuda {
namespace {

constexpr size_t kCublasWorkspace = 32u << 20;

DeviceType device_type(GgmlType t, const char* what) {
  switch (t) {
    case GgmlType::F32: return DeviceType::kF32;
    case GgmlType::F16: return DeviceType::kF16;
    case GgmlType::Q4_1: return DeviceType::kQ4_1;
    case GgmlType::Q8_0: return DeviceType::kQ8_0;
    default:
      throw std::runtime_error(std::string("CUDA backend: tensor '") + what + "' has type " +
                               std::string(ggml_type_name(t)) +
                               ", which has no CUDA kernel (F32, F16, Q4_1, Q8_0)");
  }
}

size_t weight_bytes(const WeightView& w) {
  return static_cast<size_t>(w.rows) *
         ggml_row_bytes(*ggml_type_traits(static_cast<uint32_t>(w.type)), static_cast<uint64_t>(w.cols));
}

}  // namespace

template <typename T>
T* CudaContext::device_array(size_t n) {
  void* p = alloc_->allocate(std::max<size_t>(n, 1) * sizeof(T));
  owned_.push_back(p);
  return static_cast<T*>(p);
}

const float* CudaContext::upload_f32(const float* host, size_t n) {
  float* d = device_array<float>(n);
  VIGIL_CUDA_CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

DeviceWeight CudaContext::upload_weight(const WeightView& w, const char* what) {
  DeviceWeight d;
  d.type = device_type(w.type, what);
  d.rows = static_cast<int>(w.rows);
  d.cols = static_cast<int>(w.cols);
  const size_t bytes = weight_bytes(w);
  uint8_t* quant = device_array<uint8_t>(bytes);
  VIGIL_CUDA_CHECK(cudaMemcpy(quant, w.data, bytes, cudaMemcpyHostToDevice));
  __half* f16 = device_array<__half>(static_cast<size_t>(w.rows) * static_cast<size_t>(w.cols));
  d.quant = quant;
  dequantize_weight(d, f16, stream_);
  d.f16 = f16;
  return d;
}

CudaContext::CudaContext(const LlamaModel& model, const CudaOptions& options)
    : model_(model),
      hp_(model.hparams()),
      opt_(options),
      geo_{options.block_size, (options.max_positions + options.block_size - 1) / std::max(options.block_size, 1),
           options.n_blocks},
      staged_(options.max_batch, geo_),
      graphs_(options.graph_buckets.empty() ? GraphBuckets::powers_of_two(std::max(options.max_batch, 1))
                                            : GraphBuckets(options.graph_buckets),
              options.graphs) {
  if (opt_.max_batch <= 0 || opt_.max_positions <= 0 || opt_.n_blocks <= 0 || opt_.block_size <= 0)
    throw std::invalid_argument("CUDA context needs max_batch, max_positions, n_blocks and block_size > 0");
  if (graphs_.buckets().sizes().back() > opt_.max_batch)
    throw std::invalid_argument("CUDA context: a graph bucket exceeds max_batch");
  // What the kernels assume (ops.cu attention: head_dim divides 128; gemm.cu: rows of 32-blocks).
  if (hp_.head_dim > 128 || 128 % hp_.head_dim != 0 || hp_.n_head % hp_.n_head_kv != 0 || hp_.n_embd % 32 != 0 ||
      hp_.n_ff % 32 != 0)
    throw std::runtime_error("CUDA backend: model shape not supported (head_dim " + std::to_string(hp_.head_dim) +
                             ", n_embd " + std::to_string(hp_.n_embd) + ", n_ff " + std::to_string(hp_.n_ff) + ")");
  try {
    init();
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void CudaContext::init() {
  int devices = 0;
  VIGIL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (opt_.device < 0 || opt_.device >= devices)
    throw std::runtime_error("CUDA device " + std::to_string(opt_.device) + " not present (" +
                             std::to_string(devices) + " devices)");
  VIGIL_CUDA_CHECK(cudaSetDevice(opt_.device));
  std::unique_ptr<MemoryBackend> backend;
  if (opt_.vmm) backend = std::make_unique<VmmMemoryBackend>(opt_.device, opt_.vmm_reserve_bytes);
  else backend = std::make_unique<CudaMemoryBackend>(opt_.device);
  alloc_ = std::make_unique<CachingAllocator>(std::move(backend));
  VIGIL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  VIGIL_CUDA_CHECK(cublasCreate(&cublas_));
  VIGIL_CUDA_CHECK(cublasSetStream(cublas_, stream_));
  // cuBLAS would otherwise allocate its workspace on first use, possibly inside a capture.
  VIGIL_CUDA_CHECK(cublasSetWorkspace(cublas_, device_array<uint8_t>(kCublasWorkspace), kCublasWorkspace));

  // Weights: quantized rows as in the file, plus f16 copies for cuBLAS.
  embd_type_ = device_type(model_.token_embd().type, "token_embd.weight");
  output_ = upload_weight(model_.output(), "output.weight");
  if (model_.output().data == model_.token_embd().data) embd_ = output_.quant;
  else embd_ = upload_weight(model_.token_embd(), "token_embd.weight").quant;
  const size_t d = static_cast<size_t>(hp_.n_embd);
  output_norm_ = upload_f32(model_.output_norm(), d);
  for (const LlamaLayer& l : model_.layers()) {
    layers_.push_back({upload_f32(l.attn_norm, d), upload_f32(l.ffn_norm, d), upload_weight(l.wq, "attn_q"),
                       upload_weight(l.wk, "attn_k"), upload_weight(l.wv, "attn_v"),
                       upload_weight(l.wo, "attn_output"), upload_weight(l.ffn_gate, "ffn_gate"),
                       upload_weight(l.ffn_up, "ffn_up"), upload_weight(l.ffn_down, "ffn_down")});
  }

  // The RoPE angle table, computed exactly as the CPU context computes its own.
  const int half = hp_.head_dim / 2;
  std::vector<float> cos_t(static_cast<size_t>(opt_.max_positions) * half), sin_t(cos_t.size());
  const float theta_scale = std::pow(hp_.rope_theta, -2.0f / static_cast<float>(hp_.head_dim));
  for (int p = 0; p < opt_.max_positions; ++p) {
    float theta = static_cast<float>(p);
    for (int i = 0; i < half; ++i) {
      cos_t[static_cast<size_t>(p) * half + i] = std::cos(theta);
      sin_t[static_cast<size_t>(p) * half + i] = std::sin(theta);
      theta *= theta_scale;
    }
  }
  rope_cos_ = upload_f32(cos_t.data(), cos_t.size());
  rope_sin_ = upload_f32(sin_t.data(), sin_t.size());

  // KV cache with one extra block for the padding rows of graph buckets.
  const size_t kv_layer = static_cast<size_t>(opt_.n_blocks + 1) * 2 * opt_.block_size * hp_.kv_dim();
  for (int l = 0; l < hp_.n_layer; ++l) kv_.push_back(device_array<__half>(kv_layer));

  // Activations, sized once for max_batch rows: nothing is allocated per step.
  const size_t b = static_cast<size_t>(opt_.max_batch), ff = static_cast<size_t>(hp_.n_ff);
  const size_t kv = static_cast<size_t>(hp_.kv_dim()), vocab = static_cast<size_t>(hp_.n_vocab);
  x_ = device_array<float>(b * d);
  xb_ = device_array<float>(b * d);
  q_ = device_array<float>(b * d);
  k_ = device_array<float>(b * kv);
  v_ = device_array<float>(b * kv);
  att_ = device_array<float>(b * d);
  proj_ = device_array<float>(b * d);
  gate_ = device_array<float>(b * ff);
  up_ = device_array<float>(b * ff);
  out_in_ = device_array<float>(b * d);
  logits_ = device_array<float>(b * vocab);
  x16_ = device_array<__half>(b * std::max(d, ff));
  argmax_ = device_array<int32_t>(b);
  index_len_ = b * 4 + staged_.block_table.size();
  index_ = device_array<int32_t>(index_len_);
  VIGIL_CUDA_CHECK(cudaMallocHost(&host_index_, index_len_ * sizeof(int32_t)));
  VIGIL_CUDA_CHECK(cudaMallocHost(&host_logits_, b * vocab * sizeof(float)));
  VIGIL_CUDA_CHECK(cudaMallocHost(&host_argmax_, b * sizeof(int32_t)));
  prepare_attention(opt_.max_positions);
  VIGIL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

CudaContext::~CudaContext() { release(); }

void CudaContext::release() noexcept {
  // Teardown must not throw: results are ignored, the process is usually exiting.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (!execs_.empty()) {
    const DriverApi& drv = DriverApi::get();
    for (CUgraphExec e : execs_) (void)drv.graph_exec_destroy(e);
  }
  for (void* p : owned_) alloc_->free(p);
  owned_.clear();
  if (host_index_) (void)cudaFreeHost(host_index_);
  if (host_logits_) (void)cudaFreeHost(host_logits_);
  if (host_argmax_) (void)cudaFreeHost(host_argmax_);
  if (cublas_) (void)cublasDestroy(cublas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

std::string CudaContext::describe() const {
  cudaDeviceProp prop{};
  std::string name = cudaGetDeviceProperties(&prop, opt_.device) == cudaSuccess ? prop.name : "unknown device";
  std::string buckets;
  for (int s : graphs_.buckets().sizes()) buckets += (buckets.empty() ? "" : ",") + std::to_string(s);
  const char* mm = opt_.matmul == CudaOptions::Matmul::kCublas ? "cublas-f16"
                   : opt_.matmul == CudaOptions::Matmul::kGemv ? "quant-gemv"
                                                               : "quant-gemv<=8,cublas-f16";
  return "cuda device " + std::to_string(opt_.device) + " (" + name + "), memory " +
         (opt_.vmm ? "vmm" : "cudaMalloc") + ", matmul " + mm + ", graphs " +
         (graphs_.enabled() ? "on, buckets " + buckets : std::string("off"));
}

void CudaContext::project(const DeviceWeight& w, const float* x, int n, float* y) {
  const bool gemv = opt_.matmul == CudaOptions::Matmul::kGemv ||
                    (opt_.matmul == CudaOptions::Matmul::kAuto && n <= kMaxGemvRows);
  if (gemv && n <= kMaxGemvRows) {
    gemv_quant(w, x, n, y, stream_);
    return;
  }
  to_half(x, x16_, static_cast<int64_t>(n) * w.cols, stream_);
  gemm_cublas(cublas_, w, x16_, n, y);
}

void CudaContext::enqueue(int rows, int n_out) {
  const int d = hp_.n_embd, kv = hp_.kv_dim(), bs = opt_.block_size;
  const int64_t rd = static_cast<int64_t>(rows) * d;
  const size_t b = static_cast<size_t>(opt_.max_batch);
  const int32_t* tokens = index_;
  const int32_t* pos = index_ + b;
  const int32_t* kv_slot = index_ + 2 * b;
  const int32_t* logit_rows = index_ + 3 * b;
  const int32_t* table = index_ + 4 * b;

  embed_rows(embd_, embd_type_, tokens, rows, d, x_, stream_);
  for (int l = 0; l < hp_.n_layer; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];

    // Attention block: norm, Q/K/V projections, RoPE, cache write, attention, output projection.
    rms_norm(x_, nullptr, w.attn_norm, rows, d, hp_.rms_eps, xb_, stream_);
    project(w.wq, xb_, rows, q_);
    project(w.wk, xb_, rows, k_);
    project(w.wv, xb_, rows, v_);
    rope(q_, k_, pos, rope_cos_, rope_sin_, rows, hp_.n_head, hp_.n_head_kv, hp_.head_dim, stream_);
    kv_store(k_, v_, kv_slot, rows, kv, bs, kv_[static_cast<size_t>(l)], stream_);
    paged_attention(q_, kv_[static_cast<size_t>(l)], pos, table, geo_.max_blocks_per_seq, rows, hp_.n_head,
                    hp_.n_head_kv, hp_.head_dim, bs, opt_.max_positions, att_, stream_);
    project(w.wo, att_, rows, proj_);
    add_into(x_, proj_, rd, stream_);

    // Feed-forward block: norm, SwiGLU, down projection.
    rms_norm(x_, nullptr, w.ffn_norm, rows, d, hp_.rms_eps, xb_, stream_);
    project(w.gate, xb_, rows, gate_);
    project(w.up, xb_, rows, up_);
    swiglu(gate_, up_, static_cast<int64_t>(rows) * hp_.n_ff, stream_);
    project(w.down, gate_, rows, proj_);
    add_into(x_, proj_, rd, stream_);
  }
  if (n_out == 0) return;
  // Output head for the rows that want logits (gathered by logit_rows), and their greedy tokens.
  rms_norm(x_, logit_rows, output_norm_, n_out, d, hp_.rms_eps, out_in_, stream_);
  project(output_, out_in_, n_out, logits_);
  argmax_rows(logits_, n_out, hp_.n_vocab, argmax_, stream_);
}

void CudaContext::stage_inputs(int rows) {
  stage_batch(batch_, rows, geo_, staged_);
  const size_t b = static_cast<size_t>(opt_.max_batch);
  std::copy(staged_.tokens.begin(), staged_.tokens.end(), host_index_);
  std::copy(staged_.pos.begin(), staged_.pos.end(), host_index_ + b);
  std::copy(staged_.kv_slot.begin(), staged_.kv_slot.end(), host_index_ + 2 * b);
  std::copy(staged_.logit_rows.begin(), staged_.logit_rows.end(), host_index_ + 3 * b);
  std::copy(staged_.block_table.begin(), staged_.block_table.end(), host_index_ + 4 * b);
  VIGIL_CUDA_CHECK(
      cudaMemcpyAsync(index_, host_index_, index_len_ * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
}

GraphRunner::Captured CudaContext::capture(int rows) {
  const DriverApi& drv = DriverApi::get();
  Captured c;
  // Thread-local mode makes any allocation or synchronous call on this thread fail the capture
  // instead of silently joining the graph.
  c.capture_result = drv.begin_capture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (c.capture_result != CUDA_SUCCESS) return c;
  CUgraph graph = nullptr;
  try {
    enqueue(rows, rows);
  } catch (const std::exception&) {
    // A launch rejected during capture: end it to leave the stream usable, report its result.
    const CUresult end = drv.end_capture(stream_, &graph);
    if (graph) (void)drv.graph_destroy(graph);
    (void)cudaGetLastError();
    c.capture_result = end != CUDA_SUCCESS ? end : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return c;
  }
  c.capture_result = drv.end_capture(stream_, &graph);
  if (c.capture_result != CUDA_SUCCESS) return c;
  CUgraphExec exec = nullptr;
  c.instantiate_result = drv.graph_instantiate(&exec, graph, 0);
  (void)drv.graph_destroy(graph);
  if (c.instantiate_result != CUDA_SUCCESS) return c;
  execs_.push_back(exec);
  c.handle = static_cast<int>(execs_.size()) - 1;
  return c;
}

int CudaContext::launch(int handle) {
  return DriverApi::get().graph_launch(execs_[static_cast<size_t>(handle)], stream_);
}

void CudaContext::run_eager(int rows) { enqueue(rows, staged_.n_logits); }

void CudaContext::forward(std::span<const BatchToken> batch, bool copy_logits) {
  const int n = static_cast<int>(batch.size());
  if (n == 0) return;
  if (n > opt_.max_batch)
    throw std::invalid_argument("batch of " + std::to_string(n) + " tokens exceeds max_batch " +
                                std::to_string(opt_.max_batch));
  bool decode = true;
  for (const BatchToken& t : batch) {
    if (t.token < 0 || t.token >= hp_.n_vocab)
      throw std::invalid_argument("token id " + std::to_string(t.token) + " outside the vocabulary");
    if (t.pos < 0 || t.pos >= opt_.max_positions)
      throw std::invalid_argument("position " + std::to_string(t.pos) + " outside the context of " +
                                  std::to_string(opt_.max_positions));
    if (t.adapter) throw std::invalid_argument("LoRA adapters are not supported by the CUDA backend");
    if (t.seq)
      for (int32_t blk : t.seq->blocks)
        if (blk < 0 || blk >= opt_.n_blocks)
          throw std::invalid_argument("KV block " + std::to_string(blk) + " outside the device cache");
    decode = decode && t.want_logits;
  }
  batch_ = batch;
  if (decode) {
    graphs_.step(n, *this);
  } else {
    stage_inputs(n);
    run_eager(n);
  }
  const size_t k = static_cast<size_t>(staged_.n_logits);
  if (k > 0) {
    VIGIL_CUDA_CHECK(cudaMemcpyAsync(host_argmax_, argmax_, k * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    if (copy_logits)
      VIGIL_CUDA_CHECK(cudaMemcpyAsync(host_logits_, logits_, k * static_cast<size_t>(hp_.n_vocab) * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
  }
  VIGIL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::span<const float> CudaContext::logits(int i) const {
  if (i < 0 || i >= staged_.n_logits) throw std::out_of_range("logits row " + std::to_string(i));
  return {host_logits_ + static_cast<size_t>(i) * static_cast<size_t>(hp_.n_vocab), static_cast<size_t>(hp_.n_vocab)};
}

int32_t CudaContext::argmax(int i) const {
  if (i < 0 || i >= staged_.n_logits) throw std::out_of_range("argmax row " + std::to_string(i));
  return host_argmax_[i];
}

}  // namespace vigil::cuda
