// What the HTTP layer needs from the model and the engine, behind an interface so the server can
// be tested without loading a model (tests use a scripted one).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/openai_request.h"

namespace vigil {

class ModelService {
 public:
  virtual ~ModelService() = default;

  // A raw completions prompt as token ids. Special-token text is parsed, as llama-server and vLLM
  // do: a client that writes its own ChatML gets the model's turns. Chat message content never is
  // (tokenize_chat): there a user must not be able to forge a turn.
  virtual std::vector<int32_t> tokenize(std::string_view text) const = 0;
  // Chat messages through the model's chat template, ending with the assistant's turn.
  virtual std::vector<int32_t> tokenize_chat(const std::vector<ChatTurn>& messages) const = 0;
  virtual int vocab_size() const = 0;
  // LoRA adapters a request may name in `model` besides the base model.
  virtual std::vector<std::string> adapters() const = 0;
  // Loads or unloads a LoRA adapter while serving; services without adapters refuse.
  virtual AdapterResult load_adapter(const std::string& name, const std::string& /*path*/) {
    return {AdapterStatus::kDisabled, "this server cannot load adapter '" + name + "'"};
  }
  virtual AdapterResult unload_adapter(const std::string& name) {
    return {AdapterStatus::kNotFound, "adapter '" + name + "' is not loaded"};
  }

  // The engine's contract (engine/engine.h): events arrive on the engine thread.
  virtual SubmitResult submit(RequestParams params, EventSink sink) = 0;
  virtual void cancel(uint64_t id) = 0;
  virtual void drain() = 0;
  virtual EngineStats stats() const = 0;
  virtual const EngineConfig& config() const = 0;
};

}  // namespace vigil
