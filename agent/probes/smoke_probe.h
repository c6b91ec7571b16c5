// Toolchain self-test: load the smoke skeleton, attach to a tracepoint, see one event, detach.
#pragma once

#include <string>

namespace vigil::agent {

struct SelfTestResult {
  bool ok = false;
  std::string message;  // what happened, one line
};

SelfTestResult run_bpf_self_test();

}  // namespace vigil::agent
