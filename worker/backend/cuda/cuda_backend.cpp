// The CUDA backend (see cuda_backend.h): model/llama_graph.h's ops as launches of the kernels in
// kernels/cuda/ (ops.h, gemm.h).
#include "backend/cuda/cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/driver_api.h"
#include "base/ggml_types.h"
#include "kernels/cuda/cuda_check.h"
#include "model/rope.h"

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

}  // namespace

template <typename T>
T* CudaBackend::device_array(size_t n) {
  void* p = alloc_->allocate(std::max<size_t>(n, 1) * sizeof(T));
  owned_.push_back(p);
  return static_cast<T*>(p);
}

const float* CudaBackend::upload_f32(const float* host, size_t n) {
  float* d = device_array<float>(n);
  VIGIL_CUDA_CHECK(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

DeviceWeight CudaBackend::upload_weight(const WeightView& w, const char* what) {
  DeviceWeight d;
  d.type = device_type(w.type, what);
  d.rows = static_cast<int>(w.rows);
  d.cols = static_cast<int>(w.cols);
  const size_t bytes = w.bytes();
  uint8_t* quant = device_array<uint8_t>(bytes);
  VIGIL_CUDA_CHECK(cudaMemcpy(quant, w.data, bytes, cudaMemcpyHostToDevice));
  __half* f16 = device_array<__half>(static_cast<size_t>(w.rows) * static_cast<size_t>(w.cols));
  d.quant = quant;
  dequantize_weight(d, f16, stream_);
  d.f16 = f16;
  return d;
}

CudaBackend::CudaBackend(const LlamaModel& model, const CudaOptions& options)
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
    throw std::invalid_argument("CUDA backend needs max_batch, max_positions, n_blocks and block_size > 0");
  if (graphs_.buckets().sizes().back() > opt_.max_batch)
    throw std::invalid_argument("CUDA backend: a graph bucket exceeds max_batch");
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

void CudaBackend::init() {
  int devices = 0;
  // The usual failures on a host without a usable GPU, said in one line naming what is missing:
  // the driver (the runtime then reports an "insufficient" one), a driver new enough for this
  // build's runtime (both CUDA versions named), or a device.
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    const bool driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) || dlopen("libcuda.so.1", RTLD_LAZY);
    int driver_cuda = 0, runtime_cuda = 0;
    cudaDriverGetVersion(&driver_cuda);  // 0 without a driver
    cudaRuntimeGetVersion(&runtime_cuda);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    std::string what = "no usable CUDA device";
    if (!driver) what = "no CUDA driver (libcuda.so.1 not found)";
    else if (e == cudaErrorInsufficientDriver && driver_cuda > 0 && driver_cuda < runtime_cuda)
      what = "the NVIDIA driver is older than this build's CUDA runtime (the driver supports CUDA " + version(driver_cuda) +
             ", the runtime is CUDA " + version(runtime_cuda) + "; update the driver)";
    throw std::runtime_error(what + ": cudaGetDeviceCount: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  if (opt_.device < 0 || opt_.device >= devices)
    throw std::runtime_error("CUDA device " + std::to_string(opt_.device) + " not present (" +
                             std::to_string(devices) + " devices)");
  VIGIL_CUDA_CHECK(cudaSetDevice(opt_.device));
  std::unique_ptr<SegmentSource> backend;
  if (opt_.vmm) backend = std::make_unique<VmmSegmentSource>(opt_.device, opt_.vmm_reserve_bytes);
  else backend = std::make_unique<CudaSegmentSource>(opt_.device);
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
    static constexpr const char* kNames[kLayerMatrices] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                           "ffn_gate", "ffn_up", "ffn_down"};
    LayerWeights w{upload_f32(l.attn_norm, d), upload_f32(l.ffn_norm, d), {}};
    for (int m = 0; m < kLayerMatrices; ++m)
      w.matrix[static_cast<size_t>(m)] = upload_weight(l.matrix(static_cast<LayerMatrix>(m)), kNames[m]);
    layers_.push_back(w);
  }

  // The RoPE angle table, the same one the CPU backend rotates with.
  const RopeTable rope = make_rope_table(hp_, opt_.max_positions);
  rope_cos_ = upload_f32(rope.cos.data(), rope.cos.size());
  rope_sin_ = upload_f32(rope.sin.data(), rope.sin.size());

  // KV cache with one extra block for the padding rows of graph buckets.
  const size_t kv_layer = static_cast<size_t>(opt_.n_blocks + 1) * 2 * opt_.block_size * hp_.kv_dim();
  for (int l = 0; l < hp_.n_layer; ++l) kv_.push_back(device_array<__half>(kv_layer));

  // Activations, sized once for max_batch rows: nothing is allocated per step.
  const size_t b = static_cast<size_t>(opt_.max_batch), ff = static_cast<size_t>(hp_.n_ff);
  const size_t vocab = static_cast<size_t>(hp_.n_vocab);
  for (int a = 0; a < kActs; ++a)
    acts_[static_cast<size_t>(a)] = device_array<float>(b * static_cast<size_t>(act_width(static_cast<Act>(a), hp_)));
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

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
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

const char* CudaBackend::matmul_path() const {
  return opt_.matmul == CudaOptions::Matmul::kCublas ? "cublas-f16"
         : opt_.matmul == CudaOptions::Matmul::kGemv ? "quant-gemv"
                                                     : "quant-gemv<=8,cublas-f16";
}

BackendDevice CudaBackend::device() const { return {"cuda", matmul_path(), ""}; }

std::string CudaBackend::describe() const {
  cudaDeviceProp prop{};
  std::string name = cudaGetDeviceProperties(&prop, opt_.device) == cudaSuccess ? prop.name : "unknown device";
  std::string buckets;
  for (int s : graphs_.buckets().sizes()) {
    // Appended piecewise: `"," + to_string()` trips GCC 12's false -Wrestrict at -O3 (bug 105329).
    if (!buckets.empty()) buckets += ',';
    buckets += std::to_string(s);
  }
  return "cuda device " + std::to_string(opt_.device) + " (" + name + "), memory " +
         (opt_.vmm ? "vmm" : "cudaMalloc") + ", matmul " + matmul_path() + ", graphs " +
         (graphs_.enabled() ? "on, buckets " + buckets : std::string("off"));
}

void CudaBackend::matmul(const DeviceWeight& w, const float* x, int n, float* y) {
  const bool gemv = opt_.matmul == CudaOptions::Matmul::kGemv ||
                    (opt_.matmul == CudaOptions::Matmul::kAuto && n <= kMaxGemvRows);
  if (gemv && n <= kMaxGemvRows) {
    gemv_quant(w, x, n, y, stream_);
    return;
  }
  to_half(x, x16_, static_cast<int64_t>(n) * w.cols, stream_);
  gemm_cublas(cublas_, w, x16_, n, y);
}

void CudaBackend::enqueue(int rows, int n_out) {
  rows_ = rows;
  n_out_ = n_out;
  ::vigil::llama_forward(hp_, *this);
}

// The staged index arrays, each max_batch long except the block table (stage_inputs).
enum StagedArray { kTokens = 0, kPos = 1, kKvSlot = 2, kLogitRows = 3, kBlockTable = 4 };

void CudaBackend::embed(Act out) {
  embed_rows(embd_, embd_type_, staged(kTokens), rows_, hp_.n_embd, act(out), stream_);
}

void CudaBackend::rms_norm(int layer, SublayerNorm norm, Act in, Act out) {
  const LayerWeights& w = layers_[static_cast<size_t>(layer)];
  cuda::rms_norm(act(in), nullptr, norm == SublayerNorm::kAttn ? w.attn_norm : w.ffn_norm, rows_, hp_.n_embd,
                 hp_.rms_eps, act(out), stream_);
}

void CudaBackend::project(int layer, LayerMatrix m, Act in, Act out) {
  matmul(layers_[static_cast<size_t>(layer)].matrix[static_cast<size_t>(m)], act(in), rows_, act(out));
}

void CudaBackend::rope(Act q, Act k) {
  cuda::rope(act(q), act(k), staged(kPos), rope_cos_, rope_sin_, rows_, hp_.n_head, hp_.n_head_kv, hp_.head_dim,
             stream_);
}

void CudaBackend::store_kv(int layer, Act k, Act v) {
  kv_store(act(k), act(v), staged(kKvSlot), rows_, hp_.kv_dim(), opt_.block_size, kv_[static_cast<size_t>(layer)],
           stream_);
}

void CudaBackend::attention(int layer, Act q, Act out) {
  paged_attention(act(q), kv_[static_cast<size_t>(layer)], staged(kPos), staged(kBlockTable), geo_.max_blocks_per_seq,
                  rows_, hp_.n_head, hp_.n_head_kv, hp_.head_dim, opt_.block_size, opt_.max_positions, act(out),
                  stream_);
}

void CudaBackend::add(Act acc, Act x) {
  add_into(act(acc), act(x), static_cast<int64_t>(rows_) * act_width(acc, hp_), stream_);
}

void CudaBackend::swiglu(Act gate, Act up) {
  cuda::swiglu(act(gate), act(up), static_cast<int64_t>(rows_) * hp_.n_ff, stream_);
}

// The rows that want logits (gathered by the staged logit rows), and their greedy tokens.
void CudaBackend::output_head(Act x) {
  if (n_out_ == 0) return;
  cuda::rms_norm(act(x), staged(kLogitRows), output_norm_, n_out_, hp_.n_embd, hp_.rms_eps, out_in_, stream_);
  matmul(output_, out_in_, n_out_, logits_);
  argmax_rows(logits_, n_out_, hp_.n_vocab, argmax_, stream_);
}

void CudaBackend::stage_inputs(int rows) {
  stage_batch(batch_, rows, geo_, staged_);
  const size_t b = static_cast<size_t>(opt_.max_batch);
  std::copy(staged_.tokens.begin(), staged_.tokens.end(), host_index_ + kTokens * b);
  std::copy(staged_.pos.begin(), staged_.pos.end(), host_index_ + kPos * b);
  std::copy(staged_.kv_slot.begin(), staged_.kv_slot.end(), host_index_ + kKvSlot * b);
  std::copy(staged_.logit_rows.begin(), staged_.logit_rows.end(), host_index_ + kLogitRows * b);
  std::copy(staged_.block_table.begin(), staged_.block_table.end(), host_index_ + kBlockTable * b);
  VIGIL_CUDA_CHECK(
      cudaMemcpyAsync(index_, host_index_, index_len_ * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
}

GraphRunner::Captured CudaBackend::capture(int rows) {
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

int CudaBackend::launch(int handle) {
  return DriverApi::get().graph_launch(execs_[static_cast<size_t>(handle)], stream_);
}

void CudaBackend::run_eager(int rows) { enqueue(rows, staged_.n_logits); }

void CudaBackend::forward(std::span<const BatchToken> batch, bool copy_logits) {
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

std::span<const float> CudaBackend::logits(int i) const {
  if (i < 0 || i >= staged_.n_logits) throw std::out_of_range("logits row " + std::to_string(i));
  return {host_logits_ + static_cast<size_t>(i) * static_cast<size_t>(hp_.n_vocab), static_cast<size_t>(hp_.n_vocab)};
}

int32_t CudaBackend::argmax(int i) const {
  if (i < 0 || i >= staged_.n_logits) throw std::out_of_range("argmax row " + std::to_string(i));
  return host_argmax_[i];
}

}  // namespace vigil::cuda
