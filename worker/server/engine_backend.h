// The real InferenceBackend: the model's tokenizer and chat template in front of the Engine.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "model/llama_model.h"
#include "model/vocab.h"
#include "server/inference_backend.h"

namespace vigil {

class EngineBackend final : public InferenceBackend {
 public:
  EngineBackend(const LlamaModel& model, const Vocab& vocab, const EngineConfig& config);

  std::vector<int32_t> tokenize(std::string_view text) const override;
  std::vector<int32_t> tokenize_chat(const std::vector<ChatTurn>& messages) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.size()); }
  std::vector<std::string> adapters() const override { return {}; }

  SubmitResult submit(RequestParams params, EventSink sink) override;
  void cancel(uint64_t id) override { engine_->cancel(id); }
  void drain() override { engine_->drain(); }
  EngineStats stats() const override { return engine_->stats(); }
  const EngineConfig& config() const override { return config_; }

  // Stops the engine thread. Call before the HTTP server goes away: the engine's event sinks
  // post to the server's I/O context.
  void shutdown() { engine_.reset(); }

 private:
  const Vocab& vocab_;
  EngineConfig config_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace vigil
