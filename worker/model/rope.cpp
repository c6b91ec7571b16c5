#include "model/rope.h"

#include <cmath>

namespace vigil {

RopeTable make_rope_table(const LlamaHparams& hp, int max_positions) {
  RopeTable t;
  t.half = hp.head_dim / 2;
  t.cos.resize(static_cast<size_t>(max_positions) * static_cast<size_t>(t.half));
  t.sin.resize(t.cos.size());
  const float theta_scale = std::pow(hp.rope_theta, -2.0f / static_cast<float>(hp.head_dim));
  for (int p = 0; p < max_positions; ++p) {
    float theta = static_cast<float>(p);
    for (int i = 0; i < t.half; ++i) {
      t.cos[static_cast<size_t>(p) * static_cast<size_t>(t.half) + static_cast<size_t>(i)] = std::cos(theta);
      t.sin[static_cast<size_t>(p) * static_cast<size_t>(t.half) + static_cast<size_t>(i)] = std::sin(theta);
      theta *= theta_scale;
    }
  }
  return t;
}

}  // namespace vigil
