// The real ModelService: the model's tokenizer and chat template in front of the Engine.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "model/llama_model.h"
#include "model/vocab.h"
#include "server/model_service.h"

namespace vigil {

class EngineService final : public ModelService {
 public:
  // `backend`: built for backend_shape(config), handed to the engine. `adapter_dir` empty: no LoRA
  // adapters can be loaded.
  EngineService(const LlamaModel& model, const Vocab& vocab, const EngineConfig& config,
                std::unique_ptr<ForwardBackend> backend, const std::string& adapter_dir = "");

  std::vector<int32_t> tokenize(std::string_view text) const override;
  std::vector<int32_t> tokenize_chat(const std::vector<ChatTurn>& messages) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.size()); }
  std::vector<std::string> adapters() const override { return adapters_.names(); }
  AdapterResult load_adapter(const std::string& name, const std::string& path) override;
  AdapterResult unload_adapter(const std::string& name) override { return adapters_.unload(name); }

  SubmitResult submit(RequestParams params, EventSink sink) override;
  void cancel(uint64_t id) override { engine_->cancel(id); }
  void drain() override { engine_->drain(); }
  EngineStats stats() const override { return engine_->stats(); }
  const EngineConfig& config() const override { return config_; }

  const std::string& backend_description() const { return engine_->backend_description(); }

  // Stops the engine thread. Call before the HTTP server goes away: the engine's event sinks
  // post to the server's I/O context.
  void shutdown() { engine_.reset(); }

 private:
  const Vocab& vocab_;
  EngineConfig config_;
  AdapterRegistry adapters_;  // before engine_: running requests hold adapters until the engine stops
  std::unique_ptr<Engine> engine_;
};

}  // namespace vigil
