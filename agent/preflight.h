// Start-up checks that turn a host the agent cannot run on into one clear line, not a libbpf dump.
#pragma once

#include <string>

namespace vigil::agent {

// Empty when the agent can load BPF here; otherwise the reason, one line.
std::string check_kernel_btf(const std::string& btf_path);
// `uprobes`: a probe set that attaches uprobes (CUDA, NCCL, USDT) is enabled.
std::string check_privileges(bool uprobes);

}  // namespace vigil::agent
