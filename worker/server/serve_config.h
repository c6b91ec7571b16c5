// `vigil-worker serve` configuration: every server and engine knob, its default, the YAML parser.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "backend/backend_config.h"
#include "server/api_access.h"
#include "common/config_key_error.h"
#include "engine/engine.h"

namespace vigil {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;          // empty: the model file's base name
  std::string adapter_dir;         // LoRA adapters load from inside it only; empty: loading disabled
  int io_threads = 1;              // Asio threads; the engine decodes on its own thread
  int parse_threads = 2;           // completion bodies are parsed and tokenized here, off the I/O threads
  int max_queued_parses = 64;      // completions waiting for a parse thread; beyond it, 429
  int max_connections = 512;       // at this, the longest-idle connection makes room for a new one
  int probe_connections = 8;       // beyond max_connections, kept for /health and /ready only
  // One client address's share of max_connections (0: no limit). Past it, the address's own
  // longest-idle connection makes room, or its newcomer gets 429 (probes are still answered).
  // Clients behind one proxy or ingress share its address: raise it (or 0) for such a front.
  int max_connections_per_client = 128;
  // One client address's share of the engine's places (running and waiting requests; 0: no
  // limit): past it the address's next completion gets 429, so one address cannot fill the queue
  // that every client waits in. Behind a proxy, raise it as max_connections_per_client.
  int max_requests_per_client = 64;
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1024 * 1024;
  std::chrono::milliseconds read_timeout{30000};   // whole request (head and body)
  std::chrono::milliseconds idle_timeout{60000};   // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30000};  // one write to a client that stopped reading
  size_t stream_queue_chunks = 1024;  // SSE chunks a slow client may fall behind before it is cut
  std::chrono::milliseconds drain_grace{30000};    // SIGTERM: how long in-flight requests may run
  int retry_after_seconds = 1;                     // Retry-After sent with 429
  ApiAccess access;
};

// What `serve` runs when the config is silent: a bare engine's settings, except that streams are
// kept smooth (engine.step_latency_target auto) and the shortest remaining work goes first, aged
// (engine.policy token_budget); docs/decisions.md says why these are the defaults.
inline EngineConfig serving_engine_defaults() {
  EngineConfig e;
  e.step_latency_target = StepLatencyTarget::automatic();
  e.policy = PolicyKind::kTokenBudget;
  return e;
}

struct ServeConfig {
  ServerConfig server;
  EngineConfig engine = serving_engine_defaults();
  BackendConfig backend;
};

// A bad key or value: names the key (dotted path) and its line (0 when it came from a flag).
using ServeConfigError = ConfigKeyError;

// Parses YAML text on top of the defaults; throws ServeConfigError. An empty document is all defaults.
ServeConfig parse_serve_config(const std::string& yaml_text);
// Reads and parses FILE; throws ServeConfigError (key "file" when it cannot be read).
ServeConfig load_serve_config(const std::string& path);
// Checks cross-field rules (e.g. block size vs context) once flags are applied; throws ServeConfigError.
void check_serve_config(const ServeConfig& config);
// "250ms", "5s", "2m" or a bare number of seconds; throws std::invalid_argument.
std::chrono::milliseconds parse_duration(const std::string& text);

}  // namespace vigil
