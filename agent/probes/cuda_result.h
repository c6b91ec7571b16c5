// Names of CUDA driver API results (CUresult) and of the probed entry points, for the CUDA probe's
// log and the CUDA collectors' labels.
#pragma once

#include <string>

namespace vigil::agent {

// "CUDA_ERROR_OUT_OF_MEMORY" for 2; "CUDA_ERROR_<n>" for values this build does not know.
std::string cuda_result_name(int result);

// Canonical name of a probed driver entry point (enum cuda_fn in bpf/cuda_events.h).
const char* cuda_fn_name(unsigned fn);

}  // namespace vigil::agent
