// Hyperparameters of a llama-architecture model, read from GGUF metadata and checked for sanity.
#pragma once

#include <cstdint>

#include "model/gguf.h"

namespace vigil {

struct LlamaHparams {
  int n_layer = 0;
  int n_embd = 0;     // hidden size
  int n_ff = 0;       // feed-forward (SwiGLU) width
  int n_head = 0;     // query heads
  int n_head_kv = 0;  // key/value heads (grouped-query attention)
  int head_dim = 0;   // n_embd / n_head
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;

  int kv_dim() const { return n_head_kv * head_dim; }

  // Throws GgufError naming the key for missing, wrong-typed or inconsistent values.
  static LlamaHparams from_gguf(const GgufFile& file);
};

}  // namespace vigil
