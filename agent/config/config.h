// The agent's configuration: every knob, its default, and the YAML/flag parser that fills it.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "common/config_key_error.h"

namespace vigil::agent {

// Default port of the agent's HTTP endpoint (/metrics, /healthz, /readyz); see docs/probes-agent.md.
inline constexpr int kDefaultPort = 9435;

struct ProbeSets {
  bool tcp = true;
  bool cuda = true;
  bool nccl = true;
  bool usdt = true;
  bool xid = true;  // nvidia:nvidia_dev_xid, when the NVIDIA module defines it
  // Single probes left out of a loaded set, as "SET:PROBE" (e.g. "tcp:tcp_sendmsg_locked",
  // "cuda:cuGraphLaunch", "usdt:pytorch:malloc"); the names are checked against the sets'.
  std::vector<std::string> disable;
  // The PROBE parts of `disable` for one set.
  std::set<std::string> disabled_in(const std::string& set) const;
};

struct LibrarySearch {
  bool discover = true;             // scan /proc/*/maps for the libraries below
  std::vector<std::string> cuda;    // extra libcuda.so.1 paths attached at start
  std::vector<std::string> nccl;    // extra libnccl.so.2 paths attached at start
  std::vector<std::string> usdt;    // extra binaries/libraries with pytorch:* or vigil:* USDT probes
};

struct Config {
  std::string listen_host = "0.0.0.0";
  int listen_port = kDefaultPort;
  std::string kernel_btf = "/sys/kernel/btf/vmlinux";
  ProbeSets probes;
  LibrarySearch libraries;
  std::chrono::milliseconds poll_interval{1000};       // scan exec'd processes, sample windows
  std::chrono::milliseconds discovery_interval{10000}; // full /proc scan (libraries dlopen'ed late)
  std::chrono::milliseconds grace_period{60000};       // keep series of exited processes this long
  // /healthz fails when no housekeeping tick completed for this long; unset: 3 x poll_interval + 30 s.
  std::chrono::milliseconds housekeeping_stall_limit{0};
  std::chrono::milliseconds fragmentation_window{300000};  // sliding window of the ratio
  int tcp_top_peers = 5;                                // peers per process before "other"
  std::chrono::milliseconds collective_timeout{600000}; // PyTorch's NCCL watchdog default
  std::string container_logs = "/var/log/containers";   // the kubelet's links: pod names ("" = off)
  std::string kernel_log = "/dev/kmsg";  // NVIDIA's XID lines (the xid set; "" = tracepoint only)
  bool bpf_stats = true;  // keep the kernel's BPF run-time statistics on (per-program cost)
  std::string bpf_pin_root = "/sys/fs/bpf/vigil";  // pinned state (--bpf-pin-root; "" = none)
  std::string web_config_file;  // --web.config.file: exporter-toolkit's TLS/basic auth ("" = plain HTTP)
};

// housekeeping_stall_limit, or its default when unset.
std::chrono::milliseconds stall_limit(const Config& cfg);

// A bad key or value: names the key and its line (0 when it came from a flag).
using ConfigError = ConfigKeyError;

// Parses YAML text on top of the defaults; throws ConfigError.
Config parse_config(const std::string& yaml_text);
// Reads and parses FILE; throws ConfigError (key "file" when it cannot be read).
Config load_config_file(const std::string& path);
// Parses "HOST:PORT" into cfg; throws ConfigError naming `key`.
void apply_listen(Config& cfg, const std::string& value, const std::string& key, int line);

}  // namespace vigil::agent
