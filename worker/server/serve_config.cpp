// Parses the serve YAML strictly: unknown keys and bad values name the dotted key and its line.
#include "server/serve_config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

namespace vigil {
namespace {

int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

[[noreturn]] void fail(const std::string& key, const YAML::Node& node, const std::string& what) {
  throw ServeConfigError(key, line_of(node), what);
}

std::string scalar(const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) fail(key, node, "expected a scalar value");
  return node.Scalar();
}

long long integer(const std::string& key, const YAML::Node& node, long long lo, long long hi) {
  std::string v = scalar(key, node);
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || n < lo || n > hi)
    fail(key, node, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got '" + v + "'");
  return n;
}

int int_in(const std::string& key, const YAML::Node& node, int lo, int hi) {
  return static_cast<int>(integer(key, node, lo, hi));
}

bool boolean(const std::string& key, const YAML::Node& node) {
  std::string v = scalar(key, node);
  if (v == "true") return true;
  if (v == "false") return false;
  fail(key, node, "expected true or false, got '" + v + "'");
}

double number(const std::string& key, const YAML::Node& node, double lo, double hi) {
  std::string v = scalar(key, node);
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || !(d >= lo && d <= hi))
    fail(key, node, "expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got '" + v + "'");
  return d;
}

std::chrono::milliseconds duration(const std::string& key, const YAML::Node& node) {
  std::string v = scalar(key, node);
  std::chrono::milliseconds d{0};
  try {
    d = parse_duration(v);
  } catch (const std::invalid_argument&) {
    fail(key, node, "expected a duration like 500ms, 5s, 2m, got '" + v + "'");
  }
  if (d.count() <= 0) fail(key, node, "must be positive, got '" + v + "'");
  return d;
}

using Handler = std::function<void(const std::string& key, const YAML::Node& value)>;

// Walks a mapping, dispatching each key to its handler; any other key is an error.
void walk(const std::string& prefix, const YAML::Node& node, const std::map<std::string, Handler>& handlers) {
  if (!node.IsMap()) fail(prefix.empty() ? "<document>" : prefix, node, "expected a mapping");
  for (const auto& kv : node) {
    std::string name = kv.first.Scalar();
    std::string key = prefix.empty() ? name : prefix + "." + name;
    auto it = handlers.find(name);
    if (it == handlers.end()) fail(key, kv.first, "unknown key");
    it->second(key, kv.second);
  }
}

constexpr long long kMaxBytes = 1LL << 30;

void parse_server(const std::string& prefix, const YAML::Node& node, ServerConfig& s) {
  using K = const std::string&;
  using V = const YAML::Node&;
  walk(prefix, node, {
      {"host", [&](K k, V v) { s.host = scalar(k, v); if (s.host.empty()) fail(k, v, "must not be empty"); }},
      {"port", [&](K k, V v) { s.port = int_in(k, v, 0, 65535); }},
      {"model_name", [&](K k, V v) { s.model_name = scalar(k, v); }},
      {"adapter_dir", [&](K k, V v) { s.adapter_dir = scalar(k, v); }},
      {"io_threads", [&](K k, V v) { s.io_threads = int_in(k, v, 1, 64); }},
      {"max_connections", [&](K k, V v) { s.max_connections = int_in(k, v, 1, 1000000); }},
      {"max_header_bytes", [&](K k, V v) { s.max_header_bytes = static_cast<size_t>(integer(k, v, 1024, kMaxBytes)); }},
      {"max_body_bytes", [&](K k, V v) { s.max_body_bytes = static_cast<size_t>(integer(k, v, 1, kMaxBytes)); }},
      {"read_timeout", [&](K k, V v) { s.read_timeout = duration(k, v); }},
      {"idle_timeout", [&](K k, V v) { s.idle_timeout = duration(k, v); }},
      {"write_timeout", [&](K k, V v) { s.write_timeout = duration(k, v); }},
      {"stream_queue_chunks", [&](K k, V v) { s.stream_queue_chunks = static_cast<size_t>(integer(k, v, 1, 1000000)); }},
      {"drain_grace", [&](K k, V v) { s.drain_grace = duration(k, v); }},
      {"retry_after_seconds", [&](K k, V v) { s.retry_after_seconds = int_in(k, v, 0, 3600); }},
  });
}

void parse_engine(const std::string& prefix, const YAML::Node& node, EngineConfig& e) {
  using K = const std::string&;
  using V = const YAML::Node&;
  walk(prefix, node, {
      {"threads", [&](K k, V v) { e.threads = int_in(k, v, 1, 256); }},
      {"kv_blocks", [&](K k, V v) { e.kv_blocks = int_in(k, v, 1, 1 << 24); }},
      {"kv_block_size", [&](K k, V v) { e.kv_block_size = int_in(k, v, 1, 1024); }},
      {"max_context", [&](K k, V v) { e.max_context = int_in(k, v, 2, 1 << 20); }},
      {"max_running", [&](K k, V v) { e.max_running = int_in(k, v, 1, 4096); }},
      {"max_batched_tokens", [&](K k, V v) { e.max_batched_tokens = int_in(k, v, 1, 1 << 20); }},
      {"max_waiting", [&](K k, V v) { e.max_waiting = int_in(k, v, 0, 1 << 20); }},
      {"batch_window_ms", [&](K k, V v) { e.batch_window_ms = number(k, v, 0.0, 10000.0); }},
      {"prefix_caching", [&](K k, V v) { e.prefix_caching = boolean(k, v); }},
      {"policy", [&](K k, V v) {
         std::string name = scalar(k, v);
         auto kind = parse_policy(name);
         if (!kind) fail(k, v, "expected fcfs, priority or token_budget, got '" + name + "'");
         e.policy = *kind;
       }},
  });
}

}  // namespace

ServeConfigError::ServeConfigError(std::string key, int line, const std::string& what)
    : std::runtime_error(what), key_(std::move(key)), line_(line) {}

std::chrono::milliseconds parse_duration(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 12) throw std::invalid_argument("duration");
  long long n = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::seconds(n);
  if (unit == "m") return std::chrono::minutes(n);
  throw std::invalid_argument("duration");
}

ServeConfig parse_serve_config(const std::string& yaml_text) {
  ServeConfig cfg;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ServeConfigError("<document>", e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) return cfg;
  walk("", root, {
      {"server", [&](const std::string& k, const YAML::Node& v) { parse_server(k, v, cfg.server); }},
      {"engine", [&](const std::string& k, const YAML::Node& v) { parse_engine(k, v, cfg.engine); }},
  });
  check_serve_config(cfg);
  return cfg;
}

ServeConfig load_serve_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ServeConfigError("file", 0, "cannot read config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_serve_config(text.str());
}

void check_serve_config(const ServeConfig& config) {
  const EngineConfig& e = config.engine;
  // A sequence at full context must fit in the cache, or it could never finish.
  const long long blocks_per_seq = (e.max_context + e.kv_block_size - 1) / e.kv_block_size;
  if (blocks_per_seq > e.kv_blocks)
    throw ServeConfigError("engine.max_context", 0,
                           "needs " + std::to_string(blocks_per_seq) + " KV blocks of " +
                               std::to_string(e.kv_block_size) + " positions, engine.kv_blocks is " +
                               std::to_string(e.kv_blocks));
}

}  // namespace vigil
