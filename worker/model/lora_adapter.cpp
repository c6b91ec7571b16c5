// Loads llama.cpp GGUF LoRA adapters (convert_lora_to_gguf.py's output) and checks every field and
// shape against the base model before anything reaches the forward pass: one bad adapter must
// never harm a running server, so every problem is an exception naming the file and the tensor.
#include "model/lora_adapter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <string_view>


namespace vigil {
namespace {

constexpr std::array<std::string_view, kLayerMatrices> kTargetNames = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

struct Slot {
  int layer;
  LayerMatrix target;
};

// "blk.<i>.<matrix>.weight" -> (i, matrix); false for anything else.
bool parse_target(std::string_view base, int n_layer, Slot& out) {
  constexpr std::string_view kPrefix = "blk.", kSuffix = ".weight";
  if (!base.starts_with(kPrefix) || !base.ends_with(kSuffix)) return false;
  base.remove_prefix(kPrefix.size());
  base.remove_suffix(kSuffix.size());
  const size_t dot = base.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 4) return false;
  int layer = 0;
  for (char c : base.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
    layer = layer * 10 + (c - '0');
  }
  if (layer >= n_layer) return false;
  const std::string_view matrix = base.substr(dot + 1);
  for (int t = 0; t < kLayerMatrices; ++t) {
    if (kTargetNames[static_cast<size_t>(t)] == matrix) {
      out = {layer, static_cast<LayerMatrix>(t)};
      return true;
    }
  }
  return false;
}

// A non-finite weight would turn every adapted token's output into NaN; refuse it at load. The
// test is on the exponent bits (all ones: inf or NaN), which the compiler vectorizes: a rank-64
// adapter holds tens of millions of values.
template <typename Bits>
uint64_t first_non_finite(const uint8_t* data, uint64_t n, Bits exponent) {
  const auto non_finite = [&](uint64_t i) {
    Bits v;
    std::memcpy(&v, data + i * sizeof(Bits), sizeof(Bits));
    return (v & exponent) == exponent;
  };
  uint64_t count = 0;  // a branch-free pass first; the position only when there is one
  for (uint64_t i = 0; i < n; ++i) count += non_finite(i) ? 1 : 0;
  if (count == 0) return n;
  uint64_t i = 0;
  while (!non_finite(i)) ++i;
  return i;
}

void check_finite(const GgufFile& f, const GgufTensor& t) {
  const uint64_t n = t.n_elements();
  const uint64_t bad = t.type == GgmlType::F32   ? first_non_finite<uint32_t>(t.data, n, 0x7f800000u)
                       : t.type == GgmlType::F16 ? first_non_finite<uint16_t>(t.data, n, 0x7c00)
                                                 : first_non_finite<uint16_t>(t.data, n, 0x7f80);
  if (bad < n) f.fail("tensor '" + t.name + "' holds a non-finite value at element " + std::to_string(bad));
}

// The adapter's metadata: a LoRA adapter for the model's architecture. Returns adapter.lora.alpha.
float check_header(const GgufFile& f, const LlamaModel& model) {
  const std::string_view type = f.get_string("general.type");
  if (type != "adapter") f.fail("general.type is '" + std::string(type) + "', expected 'adapter'");
  const std::string_view arch = f.get_string("general.architecture");
  const std::string_view model_arch = model.file().get_string("general.architecture");
  if (arch != model_arch)
    f.fail("adapter is for architecture '" + std::string(arch) + "', the model is '" + std::string(model_arch) + "'");
  const std::string_view kind = f.get_string("adapter.type");
  if (kind != "lora") f.fail("adapter.type is '" + std::string(kind) + "', expected 'lora'");
  const GgufValue* alpha_value = f.find("adapter.lora.alpha");
  if (!alpha_value) f.fail("adapter.lora.alpha is missing");
  if (alpha_value->type != GgufValueType::FLOAT32)
    f.fail("adapter.lora.alpha has type " + std::string(gguf_value_type_name(alpha_value->type)) + ", expected FLOAT32");
  const float alpha = static_cast<float>(alpha_value->f);
  if (!std::isfinite(alpha)) f.fail("adapter.lora.alpha is not a finite number");
  return alpha;
}

// The lora_a and lora_b tensors of one adapted matrix.
struct Found {
  Slot slot{};
  const GgufTensor* a = nullptr;
  const GgufTensor* b = nullptr;
};
// By base tensor name ("blk.<i>.<matrix>.weight"); ordered, so pairs are checked and copied in
// name order.
using FoundPairs = std::map<std::string, Found, std::less<>>;

// Pairs every lora_a with its lora_b by base tensor name; every tensor must be one of the two, of
// an adaptable matrix, 2-D and F32, F16 or BF16.
FoundPairs find_pairs(const GgufFile& f, int n_layer) {
  FoundPairs found;
  for (const GgufTensor& t : f.tensors()) {
    const std::string_view name = t.name;
    const bool is_a = name.ends_with(".lora_a");
    if (!is_a && !name.ends_with(".lora_b"))
      f.fail("tensor '" + t.name + "' is neither a .lora_a nor a .lora_b tensor");
    const std::string_view base = name.substr(0, name.size() - 7);
    Slot slot{};
    if (!parse_target(base, n_layer, slot))
      f.fail("tensor '" + t.name + "' targets '" + std::string(base) +
             "', which is not an adaptable matrix of this model (blk.<0.." + std::to_string(n_layer - 1) +
             ">.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight)");
    if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
      f.fail("tensor '" + t.name + "' has type " + std::string(ggml_type_name(t.type)) + ", expected F32, F16 or BF16");
    if (t.n_dims != 2) f.fail("tensor '" + t.name + "' has shape " + t.shape_string() + ", expected 2 dimensions");
    Found& entry = found[std::string(base)];
    entry.slot = slot;
    (is_a ? entry.a : entry.b) = &t;
  }
  if (found.empty()) f.fail("adapter holds no LoRA tensors");
  return found;
}

// Bytes a tensor takes in the adapter's copy: each starts 32-byte aligned.
size_t padded_bytes(const GgufTensor& t) { return (t.n_bytes + 31) / 32 * 32; }

// One pair against the matrix it adapts: both present, shapes [n_in, rank] and [rank, n_out] with
// one rank in 1..kMaxLoraRank, finite values. Returns the bytes the pair takes in the copy.
size_t check_pair(const GgufFile& f, const LlamaModel& model, const std::string& base, const Found& e) {
  if (!e.a || !e.b) f.fail("tensor '" + base + (e.a ? ".lora_b" : ".lora_a") + "' is missing (LoRA tensors come in pairs)");
  const WeightView& w = model.layers()[static_cast<size_t>(e.slot.layer)].matrix(e.slot.target);
  const uint64_t n_in = static_cast<uint64_t>(w.cols), n_out = static_cast<uint64_t>(w.rows);
  const uint64_t rank = e.a->ne[1];
  if (e.a->ne[0] != n_in)
    f.fail("tensor '" + e.a->name + "' has shape " + e.a->shape_string() + ", expected [" + std::to_string(n_in) +
           ", rank] for '" + base + "'");
  if (e.b->ne[1] != n_out)
    f.fail("tensor '" + e.b->name + "' has shape " + e.b->shape_string() + ", expected [rank, " +
           std::to_string(n_out) + "] for '" + base + "'");
  if (e.b->ne[0] != rank)
    f.fail("tensors of '" + base + "' disagree on the rank: lora_a " + e.a->shape_string() + " has " +
           std::to_string(rank) + ", lora_b " + e.b->shape_string() + " has " + std::to_string(e.b->ne[0]));
  if (rank < 1 || rank > static_cast<uint64_t>(kMaxLoraRank))
    f.fail("tensors of '" + base + "' have rank " + std::to_string(rank) + ", expected 1.." +
           std::to_string(kMaxLoraRank));
  check_finite(f, *e.a);
  check_finite(f, *e.b);
  return padded_bytes(*e.a) + padded_bytes(*e.b);
}

}  // namespace

std::shared_ptr<const LoraAdapter> LoraAdapter::load(const std::string& path, const LlamaModel& model,
                                                     const AdapterMemory& memory) {
  return from_gguf(GgufFile::open(path), model, memory);
}

std::shared_ptr<const LoraAdapter> LoraAdapter::from_gguf(const GgufFile& f, const LlamaModel& model,
                                                          const AdapterMemory& memory) {
  const float alpha = check_header(f, model);
  const int n_layer = model.hparams().n_layer;
  const FoundPairs found = find_pairs(f, n_layer);

  static std::atomic<uint64_t> next_id{1};  // 0 stands for the base model
  std::shared_ptr<LoraAdapter> adapter(new LoraAdapter());
  adapter->id_ = next_id.fetch_add(1);
  adapter->pairs_.resize(static_cast<size_t>(n_layer) * kLayerMatrices);
  size_t total = 0;
  for (const auto& [base, e] : found) total += check_pair(f, model, base, e);

  // Copy out of the mapping so later changes to the file cannot reach the running model.
  adapter->data_ = memory ? memory(total) : std::shared_ptr<uint8_t[]>(new uint8_t[total]);
  adapter->bytes_ = total;
  size_t at = 0;
  auto copy = [&](const GgufTensor& t, int64_t rows, int64_t cols) {
    std::memcpy(adapter->data_.get() + at, t.data, t.n_bytes);
    WeightView v{t.type, adapter->data_.get() + at, rows, cols};
    at += padded_bytes(t);
    return v;
  };
  for (const auto& [base, e] : found) {
    const int64_t rank = static_cast<int64_t>(e.a->ne[1]);
    auto pair = std::make_unique<LoraPair>();
    pair->a = copy(*e.a, rank, static_cast<int64_t>(e.a->ne[0]));
    pair->b = copy(*e.b, static_cast<int64_t>(e.b->ne[1]), rank);
    pair->scale = alpha != 0.0f ? alpha / static_cast<float>(rank) : 1.0f;
    adapter->max_rank_ = std::max(adapter->max_rank_, static_cast<int>(rank));
    ++adapter->n_pairs_;
    adapter->pairs_[static_cast<size_t>(e.slot.layer) * kLayerMatrices + static_cast<size_t>(e.slot.target)] =
        std::move(pair);
  }
  return adapter;
}

}  // namespace vigil
