// Decoding against llama.cpp's fixtures (scripts/gen_reference.py, scripts/gen_lora_reference.py):
// the greedy loop and the token-for-token, bit-for-bit comparison both reference tests make.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_forward.h"

namespace vigil::test {

// `name` under tests/fixtures/.
std::string fixture_path(const std::string& name);
nlohmann::json load_fixture(const std::string& name);

// Greedy continuation of `prompt` for n tokens with `adapter` (nullptr: the base model), and the
// logits of the first generated position.
std::vector<int32_t> greedy_decode(const LlamaModel& model, const std::vector<int32_t>& prompt, int n,
                                   const LoraAdapter* adapter, std::vector<float>* first_logits);

// Expects fixture case `c`'s continuation and first-step top logits from llama.cpp exactly;
// returns the largest |diff| among those logits, for the summary line.
float expect_as_llama_cpp(const nlohmann::json& c, const std::vector<int32_t>& got,
                          const std::vector<float>& first_logits);

}  // namespace vigil::test
