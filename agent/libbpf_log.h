// Routes libbpf's own log through the agent's: warnings always, debug output only when verbose.
#pragma once

namespace vigil::agent {

void install_libbpf_logger(bool verbose);

}  // namespace vigil::agent
