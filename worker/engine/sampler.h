// Turns logits into the next token: penalties, top-k, top-p, min-p, temperature, seeded draw.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace vigil {

struct SamplingParams {
  float temperature = 0.0f;         // 0: greedy (argmax after penalties)
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off; llama.cpp's: divides positive logits, multiplies negative
  float presence_penalty = 0.0f;    // OpenAI's: subtracted once per token seen
  float frequency_penalty = 0.0f;   // OpenAI's: subtracted per occurrence
  int penalty_last_n = 64;          // how many recent tokens the penalties look at
  uint64_t seed = 0;

  // Empty when valid, else "field: what is wrong".
  std::string validate() const;
};

class Sampler {
 public:
  // Buffers for n_vocab candidates are allocated once here.
  Sampler(const SamplingParams& params, int n_vocab);

  // history: the tokens so far (prompt and generated), for the penalties.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<const int32_t> history);
  double next_uniform();  // [0, 1), from a seeded splitmix64 stream

  SamplingParams params_;
  uint64_t rng_state_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit, id)
  std::vector<int32_t> window_;                        // recent tokens, sorted, for penalties
};

}  // namespace vigil
