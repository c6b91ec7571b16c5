// Routes libbpf's own log through the agent's: warnings always, debug output only when verbose.
#include "libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>

namespace vigil::agent {
namespace {

bool g_verbose = false;

int print_libbpf(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG && !g_verbose) return 0;
  // libbpf's own messages already start with "libbpf: ".
  return std::vfprintf(stderr, format, args);
}

}  // namespace

void install_libbpf_logger(bool verbose) {
  g_verbose = verbose;
  libbpf_set_print(print_libbpf);
}

}  // namespace vigil::agent
