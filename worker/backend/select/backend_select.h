// Turns the config's backend section into the engine's BackendFactory.
#pragma once

#include "backend/backend_config.h"
#include "backend/forward_backend.h"

namespace vigil {

// True when this binary was built with the CUDA backend.
bool cuda_backend_built();

// The factory of the configured backend. For CUDA, its backend throws std::runtime_error naming
// the problem: a build without CUDA, no device, no driver.
BackendFactory make_backend_factory(const BackendConfig& config);

}  // namespace vigil
