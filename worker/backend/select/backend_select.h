// Builds the forward backend the config's backend section names, for every verb (serve, generate,
// bench) and the engine tests: the one place that knows the concrete backends.
#pragma once

#include <memory>

#include "backend/backend_config.h"
#include "backend/forward_backend.h"

namespace vigil {

class TensorParallel;

// True when this binary was built with the CUDA backend.
bool cuda_backend_built();

// The configured backend, built for `shape`. `tp` (CPU only): the tensor-parallel group its matrix
// products are split over; it must outlive the backend. Throws std::runtime_error naming what is
// missing when the backend cannot start: a build without CUDA, no device, no driver.
std::unique_ptr<ForwardBackend> make_backend(const BackendConfig& config, const LlamaModel& model,
                                             const BackendShape& shape, TensorParallel* tp = nullptr);

}  // namespace vigil
