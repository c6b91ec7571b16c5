// libFuzzer target: the serve YAML parser on arbitrary text either returns a config that is in
// range and passes its own cross-field check, or throws ServeConfigError with a message; any
// other exception escapes, terminates and is reported as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/serve_config.h"

namespace {

void check_in_range(const vigil::ServeConfig& c) {
  const vigil::ServerConfig& s = c.server;
  if (s.host.empty() || s.port < 0 || s.port > 65535 || s.io_threads < 1 || s.max_connections < 1) std::abort();
  if (s.max_header_bytes < 1024 || s.max_body_bytes < 1 || s.stream_queue_chunks < 1) std::abort();
  if (s.read_timeout.count() <= 0 || s.idle_timeout.count() <= 0 || s.write_timeout.count() <= 0 ||
      s.drain_grace.count() <= 0)
    std::abort();
  const vigil::EngineConfig& e = c.engine;
  if (e.threads < 1 || e.kv_blocks < 1 || e.kv_block_size < 1 || e.max_context < 2 || e.max_running < 1 ||
      e.max_batched_tokens < 1 || e.max_waiting < 0 || !(e.batch_window_ms >= 0.0) || e.max_prefill_chunk < 0)
    std::abort();
  // A step latency target is off, a positive duration, or a multiple of the decode step in (1, 100].
  const vigil::StepLatencyTarget& t = e.step_latency_target;
  if (t.fixed.count() < 0 || (t.fixed.count() > 0 && t.decode_multiple != 0) ||
      (t.decode_multiple != 0 && !(t.decode_multiple > 1.0 && t.decode_multiple <= 100.0)))
    std::abort();
  vigil::check_serve_config(c);  // a parsed config has passed it already: throwing here is a bug
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_in_range(vigil::parse_serve_config(text));
  } catch (const vigil::ServeConfigError& e) {
    if (std::string(e.what()).empty() || e.line() < 0) std::abort();
  }
  return 0;
}
