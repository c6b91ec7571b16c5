// What the CUDA backend was built against and what the host offers (no GPU needed to ask).
#pragma once

#include <string>

namespace vigil::cuda {

// e.g. "cuda runtime 13000, cublas 130000, nccl 22703, devices 0 (no CUDA device)".
std::string backend_info();

}  // namespace vigil::cuda
