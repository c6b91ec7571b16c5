// vLLM's runtime LoRA endpoints: POST /v1/load_lora_adapter and POST /v1/unload_lora_adapter.
#pragma once

#include <string>
#include <string_view>

#include "server/api.h"
#include "server/model_service.h"
#include "server/worker_metrics.h"

namespace vigil {

// Parses {"lora_name", "lora_path"} (load) or {"lora_name"} (unload), asks the model service, and answers
// as vLLM does: 200 with a plain-text success line, or an OpenAI error (400 malformed request or
// invalid adapter file, 404 unknown adapter, 409 already loaded).
HttpReply adapter_endpoint(bool load, std::string_view body, ModelService& service, WorkerMetrics& metrics,
                           const std::string& model_name);

}  // namespace vigil
