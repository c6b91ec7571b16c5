// Adapts the engine to the HTTP layer. Prompts are tokenized here, on the parse thread that routed
// the request, so the engine thread only ever sees token ids.
#include "server/engine_service.h"

#include <stdexcept>

#include "model/chat_template.h"

namespace vigil {

EngineService::EngineService(const LlamaModel& model, const Vocab& vocab, const EngineConfig& config,
                             std::unique_ptr<ForwardBackend> backend, const std::string& adapter_dir)
    : vocab_(vocab),
      config_(config),
      adapters_(model, adapter_dir),
      engine_(std::make_unique<Engine>(model, vocab, config, std::move(backend), &adapters_)) {
  adapters_.hold_in(engine_->adapter_memory());
}

std::vector<int32_t> EngineService::tokenize(std::string_view text) const { return vocab_.encode(text, true); }

std::vector<int32_t> EngineService::tokenize_chat(const std::vector<ChatTurn>& messages) const {
  std::vector<ChatMessage> chat;
  chat.reserve(messages.size());
  for (const auto& m : messages) chat.push_back({m.role, m.content});
  return encode_chat(vocab_, chat, true);
}

AdapterResult EngineService::load_adapter(const std::string& name, const std::string& path) {
  if (engine_ && !engine_->supports_lora())
    return {AdapterStatus::kDisabled, "LoRA adapters are not supported by the " + engine_->backend_description()};
  return adapters_.load(name, path);
}

SubmitResult EngineService::submit(RequestParams params, EventSink sink) {
  if (!engine_) throw std::runtime_error("the engine has stopped");
  return engine_->submit(std::move(params), std::move(sink));
}

}  // namespace vigil
