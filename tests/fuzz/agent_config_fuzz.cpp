// libFuzzer target: the agent's YAML parser on arbitrary text either returns a config whose every
// value is in range, or throws ConfigError with a message; any other exception escapes,
// terminates and is reported as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/config.h"

namespace {

void check_paths(const std::vector<std::string>& paths) {
  for (const auto& p : paths)
    if (p.empty() || p[0] != '/') std::abort();
}

void check_in_range(const vigil::agent::Config& c) {
  if (c.listen_host.empty() || c.listen_port < 1 || c.listen_port > 65535) std::abort();
  if (c.poll_interval.count() <= 0 || c.discovery_interval.count() <= 0 || c.grace_period.count() <= 0 ||
      c.fragmentation_window.count() <= 0 || c.collective_timeout.count() <= 0)
    std::abort();
  if (c.tcp_top_peers < 0 || c.tcp_top_peers > 1000) std::abort();
  check_paths(c.libraries.cuda);
  check_paths(c.libraries.nccl);
  check_paths(c.libraries.usdt);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_in_range(vigil::agent::parse_config(text));
  } catch (const vigil::agent::ConfigError& e) {
    if (std::string(e.what()).empty() || e.line() < 0) std::abort();
  }
  return 0;
}
