// The RoPE angle table of a llama model, computed once per backend for its context length.
#pragma once

#include <vector>

#include "model/llama_hparams.h"

namespace vigil {

// cos and sin of every angle, [max_positions, head_dim / 2], computed the way ggml's rope cache
// does (theta *= theta_scale per pair), so every backend rotates with llama.cpp's exact values.
struct RopeTable {
  int half = 0;  // head_dim / 2: pairs per head
  std::vector<float> cos, sin;

  const float* cos_at(int pos) const { return &cos[static_cast<size_t>(pos) * static_cast<size_t>(half)]; }
  const float* sin_at(int pos) const { return &sin[static_cast<size_t>(pos) * static_cast<size_t>(half)]; }
};

RopeTable make_rope_table(const LlamaHparams& hp, int max_positions);

}  // namespace vigil
