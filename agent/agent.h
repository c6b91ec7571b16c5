// The running agent: loads the enabled probe sets, serves metrics, re-scans processes until stopped.
#pragma once

#include <atomic>

#include "config/config.h"

namespace vigil::agent {

// Runs until `stop` becomes true; returns the process exit code.
int run_agent(const Config& cfg, const std::atomic<bool>& stop);

}  // namespace vigil::agent
