// What CPU the kernels run on, for logs, benchmarks and metrics: a figure must say where it came
// from (the same binary decodes at different speeds on an AMD EPYC and an Intel Xeon).
#pragma once

#include <string>

namespace vigil {

// The processor brand string from CPUID (what lscpu prints as "Model name"), trimmed;
// "unknown CPU" where CPUID has none.
std::string cpu_model_name();

}  // namespace vigil
