// Where a forward pass spends its time, op by op (`vigil-worker bench --profile`): a wrapper
// around a backend's ops that times every call llama_forward makes (model/llama_graph.h), so the
// breakdown covers exactly the ops of the architecture, in the backend's own code.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "model/llama_graph.h"

namespace vigil {

// Time and weight bytes per kind of op, summed over the forward passes run while profiling.
struct OpProfile {
  enum Op {
    kEmbed, kRmsNorm, kMatQ, kMatK, kMatV, kMatO, kMatGate, kMatUp, kMatDown, kRope, kStoreKv, kAttention, kAdd,
    kSwiglu, kOutputHead, kOps
  };
  static std::string_view name(int op) {
    static constexpr std::array<std::string_view, kOps> kNames{
        "embed", "rms_norm", "matmul_q", "matmul_k", "matmul_v", "matmul_o", "matmul_gate", "matmul_up",
        "matmul_down", "rope", "store_kv", "attention", "add", "swiglu", "output_head"};
    return kNames[static_cast<size_t>(op)];
  }
  std::array<double, kOps> seconds{};
  std::array<uint64_t, kOps> calls{};
  std::array<uint64_t, kOps> weight_bytes{};  // weights the op read (the matrix products)
  uint64_t forwards = 0;
  double forward_seconds = 0;  // the whole passes: the ops plus what lies between them
};

// Ops over `inner` (a backend's ops object), each call timed into `profile`.
template <typename Inner>
class ProfiledOps {
 public:
  ProfiledOps(Inner& inner, OpProfile& profile) : inner_(inner), profile_(profile) {}

  void embed(Act out) { timed(OpProfile::kEmbed, 0, [&] { inner_.embed(out); }); }
  void rms_norm(int layer, SublayerNorm norm, Act in, Act out) {
    timed(OpProfile::kRmsNorm, 0, [&] { inner_.rms_norm(layer, norm, in, out); });
  }
  void project(int layer, LayerMatrix m, Act in, Act out) {
    const WeightView& w = inner_.model().layers()[static_cast<size_t>(layer)].matrix(m);
    timed(OpProfile::kMatQ + static_cast<int>(m), w.bytes(), [&] { inner_.project(layer, m, in, out); });
  }
  void rope(Act q, Act k) { timed(OpProfile::kRope, 0, [&] { inner_.rope(q, k); }); }
  void store_kv(int layer, Act k, Act v) { timed(OpProfile::kStoreKv, 0, [&] { inner_.store_kv(layer, k, v); }); }
  void attention(int layer, Act q, Act out) { timed(OpProfile::kAttention, 0, [&] { inner_.attention(layer, q, out); }); }
  void add(Act acc, Act x) { timed(OpProfile::kAdd, 0, [&] { inner_.add(acc, x); }); }
  void swiglu(Act gate, Act up) { timed(OpProfile::kSwiglu, 0, [&] { inner_.swiglu(gate, up); }); }
  void output_head(Act x) {
    timed(OpProfile::kOutputHead, inner_.model().output().bytes(), [&] { inner_.output_head(x); });
  }

 private:
  template <typename F>
  void timed(int op, uint64_t bytes, F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    profile_.seconds[static_cast<size_t>(op)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++profile_.calls[static_cast<size_t>(op)];
    profile_.weight_bytes[static_cast<size_t>(op)] += bytes;
  }

  Inner& inner_;
  OpProfile& profile_;
};

}  // namespace vigil
