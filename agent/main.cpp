// vigil-agent entry point: parses the command line and runs the agent or its self-test.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "libbpf_log.h"
#include "probes/smoke_probe.h"
#include "vigil/version.h"

namespace {

constexpr const char* kUsage =
    "usage: vigil-agent [options]\n"
    "\n"
    "eBPF agent for GPU inference nodes: probes the CUDA driver API, NCCL, USDT probes of\n"
    "inference workers and the kernel's TCP tracepoints, and exports Prometheus metrics.\n"
    "\n"
    "options:\n"
    "  --self-test   load a small BPF program, attach it to a tracepoint, see one event,\n"
    "                detach; exit 0 when the eBPF toolchain works on this host\n"
    "  -v, --verbose include libbpf's debug log\n"
    "  --version     print the version and exit\n"
    "  -h, --help    print this help and exit\n";

}  // namespace

int main(int argc, char** argv) {
  bool self_test = false;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
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
  std::fputs("vigil-agent: the agent's probe sets are not built yet; only --self-test runs\n",
             stderr);
  return 1;
}
