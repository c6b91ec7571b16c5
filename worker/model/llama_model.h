// A llama-architecture model: hyperparameters and weight views into the mapped GGUF file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/ggml_types.h"
#include "model/gguf.h"
#include "model/llama_hparams.h"

namespace vigil {

// The matrices of a layer, in LlamaLayer's order (LoRA adapters target them by these names too).
enum class LayerMatrix { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLayerMatrices = 7;

struct LlamaLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  WeightView wq;                     // [n_embd] -> [n_embd]
  WeightView wk;                     // [n_embd] -> [kv_dim]
  WeightView wv;                     // [n_embd] -> [kv_dim]
  WeightView wo;                     // [n_embd] -> [n_embd]
  const float* ffn_norm = nullptr;   // [n_embd]
  WeightView ffn_gate;               // [n_embd] -> [n_ff]
  WeightView ffn_up;                 // [n_embd] -> [n_ff]
  WeightView ffn_down;               // [n_ff] -> [n_embd]

  const WeightView& matrix(LayerMatrix m) const;
};

class LlamaModel {
 public:
  // Maps (or copies into huge pages: mapped_file.h) the file and validates every tensor's
  // presence, shape and type; throws GgufError.
  static std::unique_ptr<LlamaModel> load(const std::string& path,
                                          WeightsPlacement placement = WeightsPlacement::kPageCache);
  static std::unique_ptr<LlamaModel> from_gguf(GgufFile file);

  const GgufFile& file() const { return file_; }
  const LlamaHparams& hparams() const { return hp_; }
  const WeightView& token_embd() const { return token_embd_; }  // [n_vocab, n_embd]
  const WeightView& output() const { return output_; }          // tied to token_embd when absent
  const float* output_norm() const { return output_norm_; }
  const std::vector<LlamaLayer>& layers() const { return layers_; }
  uint64_t weight_bytes() const { return weight_bytes_; }  // bytes a decode step reads

 private:
  explicit LlamaModel(GgufFile file) : file_(std::move(file)) {}

  GgufFile file_;
  LlamaHparams hp_;
  WeightView token_embd_;
  WeightView output_;
  const float* output_norm_ = nullptr;
  std::vector<LlamaLayer> layers_;
  uint64_t weight_bytes_ = 0;
};

}  // namespace vigil
