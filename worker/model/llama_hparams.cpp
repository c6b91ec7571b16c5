// Hyperparameters of a llama-architecture model, read from GGUF metadata and checked for sanity.
#include "model/llama_hparams.h"

#include <string>

namespace vigil {
namespace {

// Bounds far above any llama model, low enough that buffer sizes cannot overflow.
int bounded(const GgufFile& f, const std::string& key, uint64_t v, uint64_t max) {
  if (v == 0 || v > max)
    f.fail("metadata '" + key + "' = " + std::to_string(v) + " is out of range (1.." +
           std::to_string(max) + ")");
  return static_cast<int>(v);
}

}  // namespace

LlamaHparams LlamaHparams::from_gguf(const GgufFile& f) {
  std::string arch(f.get_string("general.architecture"));
  if (arch != "llama") f.fail("architecture '" + arch + "' is not supported (only 'llama')");
  auto key = [&](const char* k) { return arch + "." + k; };

  LlamaHparams hp;
  hp.n_layer = bounded(f, key("block_count"), f.get_uint(key("block_count")), 1024);
  hp.n_embd = bounded(f, key("embedding_length"), f.get_uint(key("embedding_length")), 1 << 16);
  hp.n_ff = bounded(f, key("feed_forward_length"), f.get_uint(key("feed_forward_length")), 1 << 18);
  hp.n_head = bounded(f, key("attention.head_count"), f.get_uint(key("attention.head_count")), 1024);
  hp.n_head_kv = bounded(f, key("attention.head_count_kv"),
                         f.get_uint_or(key("attention.head_count_kv"), static_cast<uint64_t>(hp.n_head)), 1024);
  hp.n_ctx_train = bounded(f, key("context_length"), f.get_uint(key("context_length")), 1 << 24);
  hp.rope_theta = static_cast<float>(f.get_float_or(key("rope.freq_base"), 10000.0));
  hp.rms_eps = static_cast<float>(f.get_float(key("attention.layer_norm_rms_epsilon")));

  if (hp.n_embd % hp.n_head != 0)
    f.fail("embedding_length " + std::to_string(hp.n_embd) + " is not a multiple of head_count " +
           std::to_string(hp.n_head));
  hp.head_dim = hp.n_embd / hp.n_head;
  if (hp.head_dim % 16 != 0 || hp.head_dim > 256)
    f.fail("head dimension " + std::to_string(hp.head_dim) + " is not supported (a multiple of 16, at most 256)");
  if (hp.n_head % hp.n_head_kv != 0)
    f.fail("head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
           std::to_string(hp.n_head_kv));
  uint64_t rope_dims = f.get_uint_or(key("rope.dimension_count"), static_cast<uint64_t>(hp.head_dim));
  if (rope_dims != static_cast<uint64_t>(hp.head_dim))
    f.fail("partial RoPE (rope.dimension_count " + std::to_string(rope_dims) + " of head dim " +
           std::to_string(hp.head_dim) + ") is not supported");
  if (!(hp.rms_eps > 0.0f && hp.rms_eps < 1.0f)) f.fail("layer_norm_rms_epsilon out of range");
  if (!(hp.rope_theta > 0.0f)) f.fail("rope.freq_base must be positive");

  const GgufTensor* embd = f.find_tensor("token_embd.weight");
  if (!embd) f.fail("tensor 'token_embd.weight' not found in the model");
  hp.n_vocab = bounded(f, "token_embd.weight rows", embd->ne[1], 1 << 22);
  return hp;
}

}  // namespace vigil
