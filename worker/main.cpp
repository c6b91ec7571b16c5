// vigil-worker entry point: dispatches to the subcommands (inspect, generate, serve).
#include <cstdio>
#include <exception>
#include <string_view>

#include "commands/bench.h"
#include "commands/generate.h"
#include "commands/inspect.h"
#include "commands/serve.h"
#include "vigil/version.h"

#ifdef VIGIL_HAVE_CUDA
#include "backend/cuda/backend_info.h"
#endif

namespace {

constexpr const char* kUsage =
    "usage: vigil-worker <command> [options]\n"
    "\n"
    "LLM inference worker (llama-architecture GGUF models) with an OpenAI-compatible API.\n"
    "\n"
    "commands:\n"
    "  inspect MODEL        print a GGUF file's metadata and tensor inventory\n"
    "  generate -m MODEL -p PROMPT [options]\n"
    "                       generate text from a prompt, streamed to stdout (generate --help)\n"
    "  bench -m MODEL [...] prompt, decode and batched-decode tokens/s as JSON\n"
    "  serve -m MODEL [--host H] [--port P] [--config FILE]\n"
    "                       OpenAI-compatible HTTP server with /metrics (serve --help)\n"
    "\n"
    "options:\n"
    "  --version            print the version and exit\n"
    "  -h, --help           print this help and exit\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("vigil-worker %s (%s)\n", VIGIL_VERSION, VIGIL_BUILD_TYPE);
#ifdef VIGIL_HAVE_CUDA
    try {
      std::printf("cuda backend: %s\n", vigil::cuda::backend_info().c_str());
    } catch (const std::exception& e) {
      std::printf("cuda backend: built, unusable here: %s\n", e.what());
    }
#else
    std::printf("cuda backend: not built\n");
#endif
    return 0;
  }
  try {
    if (cmd == "inspect") {
      if (argc != 3) {
        std::fputs("usage: vigil-worker inspect MODEL\n", stderr);
        return 2;
      }
      vigil::inspect_model(argv[2], stdout);
      return 0;
    }
    if (cmd == "generate") return vigil::generate_command(argc - 1, argv + 1);
    if (cmd == "bench") return vigil::bench_command(argc - 1, argv + 1);
    if (cmd == "serve") return vigil::serve_command(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vigil-worker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "vigil-worker: unknown command '%s' (see --help)\n", argv[1]);
  return 2;
}
