// The llama architecture, written once: the order of operations of a forward pass, which every
// backend executes with its own kernels on its own buffers.
//
// Why a template over an ops object, not a graph the backends interpret: the CPU backend must
// reproduce llama.cpp's numerics call for call and the CUDA backend records the same sequence
// into a CUDA Graph; both want plain calls the compiler inlines, with no per-op dispatch and no
// plan to allocate. A change to the architecture (a bias, a norm, another activation) is made
// here and reaches both backends, or fails to compile in the one that lacks the op.
#pragma once

#include "model/llama_model.h"

namespace vigil {

// The activations of the layer loop, [rows, width] each; a backend maps them to its buffers.
enum class Act {
  kX,     // residual stream [n_embd]
  kXb,    // normalized input of a sublayer [n_embd]
  kQ,     // [n_embd]
  kK,     // [kv_dim]
  kV,     // [kv_dim]
  kAtt,   // attention output before Wo [n_embd]
  kProj,  // output of Wo or ffn_down [n_embd]
  kGate,  // [n_ff]
  kUp,    // [n_ff]
};
inline constexpr int kActs = 9;

// Columns of an activation: the width of each of its rows.
inline int act_width(Act a, const LlamaHparams& hp) {
  switch (a) {
    case Act::kK:
    case Act::kV: return hp.kv_dim();
    case Act::kGate:
    case Act::kUp: return hp.n_ff;
    default: return hp.n_embd;
  }
}

enum class SublayerNorm { kAttn, kFfn };

// Ops provides, for the batch it was set up with:
//   embed(out)                        token embeddings of every row
//   rms_norm(layer, norm, in, out)    out = in / rms(in) * the layer's norm weight
//   project(layer, matrix, in, out)   out = in · Wᵀ (plus the LoRA delta where the backend has one)
//   rope(q, k)                        rotate q and k by each row's position
//   store_kv(layer, k, v)             write k and v into the KV cache at each row's position
//   attention(layer, q, out)          each row attends over its sequence's cached positions
//   add(acc, x)                       acc += x
//   swiglu(gate, up)                  gate = silu(gate) · up
//   output_head(x)                    final norm of the rows that want logits, then the output matrix
template <typename Ops>
void llama_forward(const LlamaHparams& hp, Ops& ops) {
  ops.embed(Act::kX);
  for (int l = 0; l < hp.n_layer; ++l) {
    // Attention block: norm, Q/K/V projections, RoPE, cache write, attention, output projection.
    ops.rms_norm(l, SublayerNorm::kAttn, Act::kX, Act::kXb);
    ops.project(l, LayerMatrix::kQ, Act::kXb, Act::kQ);
    ops.project(l, LayerMatrix::kK, Act::kXb, Act::kK);
    ops.project(l, LayerMatrix::kV, Act::kXb, Act::kV);
    ops.rope(Act::kQ, Act::kK);
    ops.store_kv(l, Act::kK, Act::kV);
    ops.attention(l, Act::kQ, Act::kAtt);
    ops.project(l, LayerMatrix::kO, Act::kAtt, Act::kProj);
    ops.add(Act::kX, Act::kProj);

    // Feed-forward block: norm, SwiGLU, down projection.
    ops.rms_norm(l, SublayerNorm::kFfn, Act::kX, Act::kXb);
    ops.project(l, LayerMatrix::kGate, Act::kXb, Act::kGate);
    ops.project(l, LayerMatrix::kUp, Act::kXb, Act::kUp);
    ops.swiglu(Act::kGate, Act::kUp);
    ops.project(l, LayerMatrix::kDown, Act::kGate, Act::kProj);
    ops.add(Act::kX, Act::kProj);
  }
  ops.output_head(Act::kX);
}

}  // namespace vigil
