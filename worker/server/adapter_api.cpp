// The adapter endpoints: request parsing and the mapping of registry outcomes to HTTP statuses.
#include "server/adapter_api.h"

#include <nlohmann/json.hpp>

namespace vigil {
namespace {

using json = nlohmann::json;

HttpReply error(int status, std::string type, std::string message, std::string param, std::string code) {
  return error_reply({status, std::move(type), std::move(message), std::move(param), std::move(code)});
}

HttpReply bad_request(std::string message, std::string param) {
  return error_reply(ApiError::bad_request(std::move(message), std::move(param)));
}

// The string field `key`, or an error naming it.
const std::string* string_field(const json& root, const char* key, HttpReply& err) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    err = bad_request(std::string(key) + ": required", key);
    return nullptr;
  }
  if (!it->is_string()) {
    err = bad_request(std::string(key) + ": expected a string", key);
    return nullptr;
  }
  return it->get_ptr<const std::string*>();
}

}  // namespace

HttpReply adapter_endpoint(bool load, std::string_view body, ModelService& service, WorkerMetrics& metrics,
                           const std::string& model_name) {
  json root;
  try {
    root = json::parse(body);
  } catch (const json::parse_error& e) {
    return bad_request(std::string("malformed JSON body: ") + e.what(), "body");
  }
  if (!root.is_object()) return bad_request("the body must be a JSON object", "body");
  HttpReply err;
  const std::string* name = string_field(root, "lora_name", err);
  if (!name) return err;
  if (*name == model_name) return bad_request("lora_name: '" + *name + "' is the base model's name", "lora_name");

  AdapterResult r;
  if (load) {
    const std::string* path = string_field(root, "lora_path", err);
    if (!path) return err;
    r = service.load_adapter(*name, *path);
  } else {
    r = service.unload_adapter(*name);
  }
  metrics.lora_adapters_loaded(service.adapters().size());
  switch (r.status) {
    case AdapterStatus::kOk:
      return {200, "text/plain; charset=utf-8",
              "Success: LoRA adapter '" + *name + (load ? "' added successfully." : "' removed successfully."),
              {}, false};
    case AdapterStatus::kBadRequest:
      return bad_request(r.message, r.message.starts_with("lora_name") ? "lora_name" : "lora_path");
    case AdapterStatus::kDisabled:
      return error(400, "invalid_request_error", r.message, "", "adapter_loading_disabled");
    case AdapterStatus::kNotFound:
      return error(404, "not_found_error", r.message, "lora_name", "adapter_not_found");
    case AdapterStatus::kConflict:
      return error(409, "invalid_request_error", r.message, "lora_name", "adapter_already_loaded");
    case AdapterStatus::kInvalidFile:
      return error(400, "invalid_request_error", r.message, "lora_path", "invalid_adapter");
    case AdapterStatus::kFull:
      return error(400, "invalid_request_error", r.message, "lora_name", "too_many_adapters");
  }
  return error(500, "server_error", "unexpected adapter status", "", "");
}

}  // namespace vigil
