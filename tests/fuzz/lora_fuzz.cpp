// libFuzzer target: the LoRA adapter loader on arbitrary bytes, validated against the real model,
// must throw GgufError or return an adapter whose every pair fits the model, never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "model/lora_adapter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto model = vigil::LlamaModel::load(VIGIL_MODEL_PATH);
  try {
    auto adapter = vigil::LoraAdapter::from_gguf(vigil::GgufFile::parse({data, size}, "fuzz.gguf"), *model);
    for (int l = 0; l < model->hparams().n_layer; ++l)
      for (int t = 0; t < vigil::kLayerMatrices; ++t)
        if (const vigil::LoraPair* p = adapter->pair(l, static_cast<vigil::LayerMatrix>(t)))
          if (p->a.rows != p->b.cols || p->a.rows < 1 || p->a.rows > vigil::kMaxLoraRank) std::abort();
  } catch (const vigil::GgufError&) {
  }
  return 0;
}
