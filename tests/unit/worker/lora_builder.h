// Builds LoRA adapters in llama.cpp's GGUF format for tests: random A/B of a chosen rank on chosen
// matrices of the real model, and broken variants (wrong shapes, metadata, values).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp16.h"
#include "model/llama_model.h"
#include "worker/gguf_builder.h"

namespace vigil::test {

struct LoraPairSpec {
  int layer = 0;
  std::string matrix = "attn_q";  // attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down
  int rank = 8;
  uint32_t type = 0;              // ggml type of A and B: 0 F32, 1 F16 (others for broken files)
  bool zero_b = false;            // B = 0: the adapter changes nothing
  int64_t a_in = 0, b_out = 0, b_rank = 0;  // shape overrides for broken files (0: correct)
  bool omit_b = false;
  bool nan_in_b = false;
};

struct LoraSpec {
  std::string arch = "llama";
  std::string general_type = "adapter";
  std::string adapter_type = "lora";
  std::optional<float> alpha = 16.0f;
  bool alpha_as_uint = false;
  std::vector<LoraPairSpec> pairs;
  uint32_t seed = 1;
  float b_range = 0.1f;  // B ~ U(±b_range)
  std::vector<std::string> extra_tensors;  // names of extra F32 [n_embd, 8] tensors
};

// (n_in, n_out) of a matrix of the model.
inline std::pair<int64_t, int64_t> lora_dims(const LlamaModel& m, const std::string& matrix) {
  const auto& hp = m.hparams();
  if (matrix == "attn_k" || matrix == "attn_v") return {hp.n_embd, hp.kv_dim()};
  if (matrix == "ffn_gate" || matrix == "ffn_up") return {hp.n_embd, hp.n_ff};
  if (matrix == "ffn_down") return {hp.n_ff, hp.n_embd};
  return {hp.n_embd, hp.n_embd};
}

inline std::vector<uint8_t> lora_tensor_bytes(const std::vector<float>& v, uint32_t type) {
  std::vector<uint8_t> out;
  if (type == 1) {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = fp32_to_fp16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  } else {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  }
  return out;
}

// A: U(±1/sqrt(n_in)) like PEFT's init scale; B: U(±b_range).
inline std::vector<uint8_t> build_lora(const LoraSpec& spec, const LlamaModel& model) {
  GgufBuilder b;
  b.kv_string("general.architecture", spec.arch);
  b.kv_string("general.type", spec.general_type);
  b.kv_string("adapter.type", spec.adapter_type);
  if (spec.alpha) {
    if (spec.alpha_as_uint) b.kv<uint32_t>("adapter.lora.alpha", 4, static_cast<uint32_t>(*spec.alpha));
    else b.kv<float>("adapter.lora.alpha", 6, *spec.alpha);
  }
  std::mt19937 rng(spec.seed);
  for (const LoraPairSpec& p : spec.pairs) {
    auto [n_in, n_out] = lora_dims(model, p.matrix);
    const int64_t a_in = p.a_in ? p.a_in : n_in, b_out = p.b_out ? p.b_out : n_out;
    const int64_t b_rank = p.b_rank ? p.b_rank : p.rank;
    const std::string base = "blk." + std::to_string(p.layer) + "." + p.matrix + ".weight";
    std::uniform_real_distribution<float> ua(-1.0f / std::sqrt(static_cast<float>(n_in)),
                                             1.0f / std::sqrt(static_cast<float>(n_in)));
    std::uniform_real_distribution<float> ub(-spec.b_range, spec.b_range);
    std::vector<float> a(static_cast<size_t>(a_in * p.rank)), bv(static_cast<size_t>(b_rank * b_out));
    for (float& x : a) x = ua(rng);
    for (float& x : bv) x = p.zero_b ? 0.0f : ub(rng);
    if (p.nan_in_b) bv[bv.size() / 2] = NAN;
    const uint32_t elem = p.type == 1 ? 2 : 4;
    auto bytes_of = [&](const std::vector<float>& v) {
      return p.type <= 1 ? lora_tensor_bytes(v, p.type) : std::vector<uint8_t>(v.size() * elem, 0);
    };
    b.tensor(base + ".lora_a", p.type, {static_cast<uint64_t>(a_in), static_cast<uint64_t>(p.rank)}, bytes_of(a));
    if (!p.omit_b)
      b.tensor(base + ".lora_b", p.type, {static_cast<uint64_t>(b_rank), static_cast<uint64_t>(b_out)}, bytes_of(bv));
  }
  for (const std::string& name : spec.extra_tensors)
    b.tensor(name, 0, {static_cast<uint64_t>(model.hparams().n_embd), 8},
             std::vector<uint8_t>(static_cast<size_t>(model.hparams().n_embd) * 8 * 4, 0));
  return b.build();
}

// Every attention and FFN matrix of every layer (the measurement's and the engine tests' adapter).
inline std::vector<LoraPairSpec> lora_all_matrices(const LlamaModel& m, int rank, uint32_t type, bool zero_b) {
  std::vector<LoraPairSpec> out;
  for (int l = 0; l < m.hparams().n_layer; ++l)
    for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      LoraPairSpec p;
      p.layer = l;
      p.matrix = name;
      p.rank = rank;
      p.type = type;
      p.zero_b = zero_b;
      out.push_back(p);
    }
  return out;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace vigil::test
