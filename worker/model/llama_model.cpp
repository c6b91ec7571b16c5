// A llama-architecture model: hyperparameters and weight views into the mapped GGUF file.
#include "model/llama_model.h"

#include <cstdint>

namespace vigil {
namespace {

bool matmul_type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

// Matrix `name` mapping `in` features to `out` features (GGUF shape [in, out]).
WeightView matrix(const GgufFile& f, const std::string& name, int in, int out) {
  const GgufTensor& t = f.require_tensor(name, {static_cast<uint64_t>(in), static_cast<uint64_t>(out)});
  if (!matmul_type_supported(t.type))
    f.fail("tensor '" + name + "' has type " + std::string(ggml_type_name(t.type)) +
           ", which the CPU kernels do not support");
  return WeightView{t.type, t.data, out, in};
}

const float* norm(const GgufFile& f, const std::string& name, int n) {
  const GgufTensor& t = f.require_tensor(name, {static_cast<uint64_t>(n)});
  if (t.type != GgmlType::F32)
    f.fail("tensor '" + name + "' has type " + std::string(ggml_type_name(t.type)) + ", expected F32");
  if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) != 0)
    f.fail("tensor '" + name + "' data is not 4-byte aligned");
  return reinterpret_cast<const float*>(t.data);
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, WeightsPlacement placement) {
  return from_gguf(GgufFile::open(path, placement));
}

std::unique_ptr<LlamaModel> LlamaModel::from_gguf(GgufFile file) {
  std::unique_ptr<LlamaModel> m(new LlamaModel(std::move(file)));
  const GgufFile& f = m->file_;
  const LlamaHparams hp = LlamaHparams::from_gguf(f);
  m->hp_ = hp;
  m->token_embd_ = matrix(f, "token_embd.weight", hp.n_embd, hp.n_vocab);
  m->output_ = f.find_tensor("output.weight") ? matrix(f, "output.weight", hp.n_embd, hp.n_vocab)
                                              : m->token_embd_;
  m->output_norm_ = norm(f, "output_norm.weight", hp.n_embd);
  m->weight_bytes_ = m->output_.bytes();
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LlamaLayer l;
    l.attn_norm = norm(f, p + "attn_norm.weight", hp.n_embd);
    l.wq = matrix(f, p + "attn_q.weight", hp.n_embd, hp.n_embd);
    l.wk = matrix(f, p + "attn_k.weight", hp.n_embd, hp.kv_dim());
    l.wv = matrix(f, p + "attn_v.weight", hp.n_embd, hp.kv_dim());
    l.wo = matrix(f, p + "attn_output.weight", hp.n_embd, hp.n_embd);
    l.ffn_norm = norm(f, p + "ffn_norm.weight", hp.n_embd);
    l.ffn_gate = matrix(f, p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
    l.ffn_up = matrix(f, p + "ffn_up.weight", hp.n_embd, hp.n_ff);
    l.ffn_down = matrix(f, p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      m->weight_bytes_ += w->bytes();
    m->layers_.push_back(l);
  }
  return m;
}

const WeightView& LlamaLayer::matrix(LayerMatrix m) const {
  switch (m) {
    case LayerMatrix::kQ: return wq;
    case LayerMatrix::kK: return wk;
    case LayerMatrix::kV: return wv;
    case LayerMatrix::kO: return wo;
    case LayerMatrix::kGate: return ffn_gate;
    case LayerMatrix::kUp: return ffn_up;
    case LayerMatrix::kDown: return ffn_down;
  }
  return wq;  // unreachable: every enumerator is handled above
}

}  // namespace vigil
