// Who may call what: the API key every /v1/* route needs, and the switches that open the routes
// and request fields a client should not get by default (runtime adapters, scheduling priority).
#pragma once

#include <string>
#include <string_view>

namespace vigil {

struct ApiAccess {
  std::string api_key;                  // empty: /v1/* is open (the demo's default)
  bool metrics_need_key = false;        // /metrics needs the key too
  bool allow_runtime_adapters = false;  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter
  bool allow_client_priority = false;   // the request field `priority` reaches the scheduler
};

// Whether an Authorization header value is "Bearer <key>". The key's bytes are compared in time
// that depends only on the key's length, so a client cannot learn it a byte at a time.
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace vigil
