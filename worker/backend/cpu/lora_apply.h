// The LoRA delta of one matrix for a group of tokens, on the CPU kernels (the model layer only
// loads and validates adapters).
#pragma once

#include "kernels/cpu/matmul.h"
#include "model/lora_adapter.h"

namespace vigil {

// y[rows[k]] += scale · B (A x[rows[k]]) for k < n: the LoRA delta of one matrix for n tokens.
// x: [*, n_in] and y: [*, n_out] are the base matmul's input and output rows; gather [n, n_in],
// t [n, rank] and d [n, n_out] are the caller's scratch, so nothing is allocated here.
void lora_add(const LoraPair& p, const float* x, const int* rows, int n, float* y, float* gather, float* t,
              float* d, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace vigil
