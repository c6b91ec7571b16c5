#include "kernels/cpu/cpu_info.h"

#include <cpuid.h>

#include <cstring>

namespace vigil {

std::string cpu_model_name() {
  unsigned max_leaf = __get_cpuid_max(0x80000000u, nullptr);
  if (max_leaf < 0x80000004u) return "unknown CPU";
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    unsigned regs[4];
    __cpuid(0x80000002u + i, regs[0], regs[1], regs[2], regs[3]);
    std::memcpy(brand + 16 * i, regs, sizeof regs);
  }
  std::string name(brand);
  const size_t first = name.find_first_not_of(' ');
  if (first == std::string::npos) return "unknown CPU";
  return name.substr(first, name.find_last_not_of(' ') - first + 1);
}

}  // namespace vigil
