// Parses the serve YAML strictly: unknown keys and bad values name the dotted key and its line.
#include "server/serve_config.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "common/yaml_fields.h"

namespace vigil {
namespace {

using yaml_fields::boolean;
using yaml_fields::duration;
using yaml_fields::fail;
using yaml_fields::int_in;
using yaml_fields::integer;
using yaml_fields::number;
using yaml_fields::scalar;
using yaml_fields::walk;

constexpr long long kMaxBytes = 1LL << 30;

// engine.step_latency_target: "auto" (the default), "off", a multiple of the decode step ("2x",
// "1.5x"), or a duration.
StepLatencyTarget step_latency_target(const std::string& k, const YAML::Node& v) {
  const std::string text = scalar(k, v);
  if (text == "auto") return StepLatencyTarget::automatic();
  if (text == "off") return StepLatencyTarget{};
  if (!text.empty() && text.back() == 'x') {
    // Plain decimals only: stod alone would also take "1e1", "0x10" and "inf".
    const std::string number = text.substr(0, text.size() - 1);
    const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    const bool plain = !number.empty() && digit(number.front()) && digit(number.back()) &&
                       std::count(number.begin(), number.end(), '.') <= 1 &&
                       std::all_of(number.begin(), number.end(), [&](char c) { return digit(c) || c == '.'; }) &&
                       number.size() <= 12;
    if (!plain) fail(k, v, "expected a multiple of the decode step like 2x or 1.5x, got '" + text + "'");
    const double m = std::stod(number);
    // At 1x a step with any prompt is over the target; beyond 100x the target is no limit.
    if (!(m > 1.0 && m <= 100.0))
      fail(k, v, "a multiple of the decode step must be above 1x and at most 100x, got '" + text + "'");
    return StepLatencyTarget::multiple(m);
  }
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    fail(k, v, "expected auto, off, a multiple of the decode step (2x) or a duration (50ms), got '" + text + "'");
  return StepLatencyTarget::duration(duration(k, v));
}

void parse_server(const std::string& prefix, const YAML::Node& node, ServerConfig& s) {
  using K = const std::string&;
  using V = const YAML::Node&;
  walk(prefix, node, {
      {"host", [&](K k, V v) { s.host = scalar(k, v); if (s.host.empty()) fail(k, v, "must not be empty"); }},
      {"port", [&](K k, V v) { s.port = int_in(k, v, 0, 65535); }},
      {"model_name", [&](K k, V v) { s.model_name = scalar(k, v); }},
      {"adapter_dir", [&](K k, V v) { s.adapter_dir = scalar(k, v); }},
      {"io_threads", [&](K k, V v) { s.io_threads = int_in(k, v, 1, 64); }},
      {"parse_threads", [&](K k, V v) { s.parse_threads = int_in(k, v, 1, 64); }},
      {"max_queued_parses", [&](K k, V v) { s.max_queued_parses = int_in(k, v, 1, 100000); }},
      {"max_connections", [&](K k, V v) { s.max_connections = int_in(k, v, 1, 1000000); }},
      {"max_header_bytes", [&](K k, V v) { s.max_header_bytes = static_cast<size_t>(integer(k, v, 1024, kMaxBytes)); }},
      {"max_body_bytes", [&](K k, V v) { s.max_body_bytes = static_cast<size_t>(integer(k, v, 1, kMaxBytes)); }},
      {"read_timeout", [&](K k, V v) { s.read_timeout = duration(k, v); }},
      {"idle_timeout", [&](K k, V v) { s.idle_timeout = duration(k, v); }},
      {"write_timeout", [&](K k, V v) { s.write_timeout = duration(k, v); }},
      {"stream_queue_chunks", [&](K k, V v) { s.stream_queue_chunks = static_cast<size_t>(integer(k, v, 1, 1000000)); }},
      {"drain_grace", [&](K k, V v) { s.drain_grace = duration(k, v); }},
      {"retry_after_seconds", [&](K k, V v) { s.retry_after_seconds = int_in(k, v, 0, 3600); }},
      {"probe_connections", [&](K k, V v) { s.probe_connections = int_in(k, v, 0, 1024); }},
      {"max_connections_per_client", [&](K k, V v) { s.max_connections_per_client = int_in(k, v, 0, 1000000); }},
      {"max_requests_per_client", [&](K k, V v) { s.max_requests_per_client = int_in(k, v, 0, 1000000); }},
      {"api_key", [&](K k, V v) {
         s.access.api_key = scalar(k, v);
         if (s.access.api_key.empty()) fail(k, v, "must not be empty");
       }},
      {"metrics_need_key", [&](K k, V v) { s.access.metrics_need_key = boolean(k, v); }},
      {"allow_runtime_adapters", [&](K k, V v) { s.access.allow_runtime_adapters = boolean(k, v); }},
      {"allow_client_priority", [&](K k, V v) { s.access.allow_client_priority = boolean(k, v); }},
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
      {"token_budget_aging", [&](K k, V v) { e.token_budget_aging = number(k, v, 0.0, 1e6); }},
      {"step_latency_target", [&](K k, V v) { e.step_latency_target = step_latency_target(k, v); }},
      {"max_prefill_chunk", [&](K k, V v) { e.max_prefill_chunk = int_in(k, v, 0, 1 << 20); }},
      {"policy", [&](K k, V v) {
         std::string name = scalar(k, v);
         auto kind = parse_policy(name);
         if (!kind) fail(k, v, "expected fcfs, priority or token_budget, got '" + name + "'");
         e.policy = *kind;
       }},
  });
}

void parse_cuda(const std::string& prefix, const YAML::Node& node, CudaBackendConfig& c) {
  using K = const std::string&;
  using V = const YAML::Node&;
  walk(prefix, node, {
      {"device", [&](K k, V v) { c.device = int_in(k, v, 0, 1023); }},
      {"graphs", [&](K k, V v) { c.graphs = boolean(k, v); }},
      {"graph_buckets", [&](K k, V v) {
         if (!v.IsSequence() || v.size() == 0) fail(k, v, "expected a non-empty list of batch sizes");
         c.graph_buckets.clear();
         for (size_t i = 0; i < v.size(); ++i)
           c.graph_buckets.push_back(int_in(k + "[" + std::to_string(i) + "]", v[i], 1, 4096));
       }},
      {"memory", [&](K k, V v) {
         const std::string m = scalar(k, v);
         if (m != "cudamalloc" && m != "vmm") fail(k, v, "expected cudamalloc or vmm, got '" + m + "'");
         c.vmm = m == "vmm";
       }},
      {"matmul", [&](K k, V v) {
         const std::string m = scalar(k, v);
         if (m == "auto") c.matmul = CudaMatmul::kAuto;
         else if (m == "cublas") c.matmul = CudaMatmul::kCublas;
         else if (m == "gemv") c.matmul = CudaMatmul::kGemv;
         else fail(k, v, "expected auto, cublas or gemv, got '" + m + "'");
       }},
  });
}

void parse_backend(const std::string& prefix, const YAML::Node& node, BackendConfig& b) {
  using K = const std::string&;
  using V = const YAML::Node&;
  walk(prefix, node, {
      {"kind", [&](K k, V v) {
         const std::string kind = scalar(k, v);
         if (kind == "cpu") b.kind = BackendKind::kCpu;
         else if (kind == "cuda") b.kind = BackendKind::kCuda;
         else fail(k, v, "expected cpu or cuda, got '" + kind + "'");
       }},
      {"cuda", [&](K k, V v) { parse_cuda(k, v, b.cuda); }},
      {"weights", [&](K k, V v) {
         const std::string w = scalar(k, v);
         const auto placement = parse_weights_placement(w);
         if (!placement) fail(k, v, "expected huge_pages or page_cache, got '" + w + "'");
         b.weights = *placement;
       }},
  });
}

}  // namespace

std::chrono::milliseconds parse_duration(const std::string& text) {
  return yaml_fields::parse_duration(text, yaml_fields::DurationUnits::kUpToMinutes);
}

ServeConfig parse_serve_config(const std::string& yaml_text) {
  ServeConfig cfg;
  YAML::Node root = yaml_fields::load_document(yaml_text);
  if (root.IsNull()) return cfg;
  walk("", root, {
      {"server", [&](const std::string& k, const YAML::Node& v) { parse_server(k, v, cfg.server); }},
      {"engine", [&](const std::string& k, const YAML::Node& v) { parse_engine(k, v, cfg.engine); }},
      {"backend", [&](const std::string& k, const YAML::Node& v) { parse_backend(k, v, cfg.backend); }},
  });
  check_serve_config(cfg);
  return cfg;
}

ServeConfig load_serve_config(const std::string& path) {
  return parse_serve_config(yaml_fields::read_config_file(path));
}

void check_serve_config(const ServeConfig& config) {
  // Header values are trimmed, so such a key could never match (a Secret made with --from-file
  // keeps the file's trailing newline).
  for (unsigned char c : config.server.access.api_key)
    if (c <= ' ' || c == 0x7f)
      throw ServeConfigError("server.api_key", 0,
                             "the key holds whitespace or a control byte and could never match a request's "
                             "Authorization header (a trailing newline from a file?)");
  if (config.server.access.metrics_need_key && config.server.access.api_key.empty())
    throw ServeConfigError("server.metrics_need_key", 0, "needs server.api_key (or --api-key, VIGIL_API_KEY)");
  const EngineConfig& e = config.engine;
  // A sequence at full context must fit in the cache, or it could never finish.
  const long long blocks_per_seq = (e.max_context + e.kv_block_size - 1) / e.kv_block_size;
  if (blocks_per_seq > e.kv_blocks)
    throw ServeConfigError("engine.max_context", 0,
                           "needs " + std::to_string(blocks_per_seq) + " KV blocks of " +
                               std::to_string(e.kv_block_size) + " positions, engine.kv_blocks is " +
                               std::to_string(e.kv_blocks));
  for (int bucket : config.backend.cuda.graph_buckets)
    if (bucket > e.max_running)
      throw ServeConfigError("backend.cuda.graph_buckets", 0,
                             "bucket " + std::to_string(bucket) + " exceeds engine.max_running (" +
                                 std::to_string(e.max_running) + "): decode steps never have more rows");
}

}  // namespace vigil
