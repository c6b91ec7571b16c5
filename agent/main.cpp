// vigil-agent entry point: parses the command line and config, checks the host, runs the agent.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "agent.h"
#include "config/config.h"
#include "libbpf_log.h"
#include "preflight.h"
#include "probes/pinned_state.h"
#include "probes/smoke_probe.h"
#include "sets/registry.h"
#include "vigil/version.h"

namespace {

constexpr const char* kUsage =
    "usage: vigil-agent [options]\n"
    "\n"
    "eBPF agent for GPU inference nodes: probes the CUDA driver API, NCCL, USDT probes of\n"
    "inference workers and the kernel's TCP tracepoints, and exports Prometheus metrics.\n"
    "\n"
    "options:\n"
    "  --config FILE        YAML configuration (see docs/probes-agent.md); flags override it\n"
    "  --listen HOST:PORT   address for /metrics, /healthz, /readyz (default 0.0.0.0:9435)\n"
    "  --web.config.file=PATH  TLS and basic auth of that endpoint, in exporter-toolkit's web\n"
    "                       configuration format (as node_exporter); reread when it changes\n"
    "  --bpf-pin-root DIR   bpffs directory of the state kept across restarts\n"
    "                       (default /sys/fs/bpf/vigil; \"\" keeps none)\n"
    "  --cleanup     remove every pin under the pin root and exit (uninstall)\n"
    "  --self-test   load a small BPF program, attach it to a tracepoint, see one event,\n"
    "                detach; exit 0 when the eBPF toolchain works on this host\n"
    "  -v, --verbose include libbpf's debug log\n"
    "  --version     print the version and exit\n"
    "  -h, --help    print this help and exit\n";

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

void print_config_error(const vigil::agent::ConfigError& e) {
  if (e.line() > 0)
    std::fprintf(stderr, "vigil-agent: config: %s (line %d): %s\n", e.key().c_str(), e.line(), e.what());
  else
    std::fprintf(stderr, "vigil-agent: config: %s: %s\n", e.key().c_str(), e.what());
}

}  // namespace

int main(int argc, char** argv) {
  bool self_test = false;
  bool verbose = false;
  bool cleanup = false;
  std::string config_path;
  std::string pin_root;
  bool pin_root_set = false;
  std::string listen;
  std::string web_config_file;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (constexpr std::string_view kWebConfig = "--web.config.file"; arg.starts_with(kWebConfig)) {
      // kingpin's forms, as node_exporter takes them: --web.config.file=PATH or --web.config.file PATH.
      if (arg.size() > kWebConfig.size() && arg[kWebConfig.size()] == '=') {
        web_config_file = arg.substr(kWebConfig.size() + 1);
        continue;
      }
      if (arg == kWebConfig && i + 1 < argc) {
        web_config_file = argv[++i];
        continue;
      }
    }
    if ((arg == "--config" || arg == "--listen" || arg == "--bpf-pin-root" || arg == "--web.config.file") &&
        i + 1 >= argc) {
      std::fprintf(stderr, "vigil-agent: %s needs a value (see --help)\n", argv[i]);
      return 2;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("vigil-agent %s (%s)\n", VIGIL_VERSION, VIGIL_BUILD_TYPE);
      return 0;
    }
    if (arg == "--self-test") {
      self_test = true;
    } else if (arg == "--config") {
      config_path = argv[++i];
    } else if (arg == "--listen") {
      listen = argv[++i];
    } else if (arg == "--bpf-pin-root") {
      pin_root = argv[++i];
      pin_root_set = true;
    } else if (arg == "--cleanup") {
      cleanup = true;
    } else if (arg == "-v" || arg == "--verbose") {
      verbose = true;
    } else {
      std::fprintf(stderr, "vigil-agent: unknown option '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }

  vigil::agent::install_libbpf_logger(verbose);
  if (self_test) {
    auto result = vigil::agent::run_bpf_self_test();
    std::fprintf(result.ok ? stdout : stderr, "vigil-agent: self-test %s: %s\n",
                 result.ok ? "ok" : "failed", result.message.c_str());
    return result.ok ? 0 : 1;
  }

  vigil::agent::Config cfg;
  try {
    if (!config_path.empty()) cfg = vigil::agent::load_config_file(config_path);
    if (!listen.empty()) vigil::agent::apply_listen(cfg, listen, "--listen", 0);
    vigil::agent::check_disabled_probes(cfg.probes);
    if (pin_root_set) cfg.bpf_pin_root = pin_root;
    cfg.web_config_file = web_config_file;
  } catch (const vigil::agent::ConfigError& e) {
    print_config_error(e);
    return 2;
  }
  if (cleanup) {
    int removed = cfg.bpf_pin_root.empty() ? 0 : vigil::agent::remove_pins(cfg.bpf_pin_root);
    if (removed < 0) {
      std::fprintf(stderr, "vigil-agent: cleanup of %s: %s\n", cfg.bpf_pin_root.c_str(), std::strerror(-removed));
      return 1;
    }
    std::printf("vigil-agent: %d pins removed from %s\n", removed, cfg.bpf_pin_root.c_str());
    return 0;
  }
  for (const std::string& problem :
       {vigil::agent::check_kernel_btf(cfg.kernel_btf), vigil::agent::check_privileges(cfg.probes.cuda || cfg.probes.nccl || cfg.probes.usdt)}) {
    if (!problem.empty()) {
      std::fprintf(stderr, "vigil-agent: %s\n", problem.c_str());
      return 1;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return vigil::agent::run_agent(cfg, g_stop);
}
