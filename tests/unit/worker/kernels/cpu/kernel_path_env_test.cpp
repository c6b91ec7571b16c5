// VIGIL_KERNEL_PATH is read on first use: set before any kernel runs, it picks the path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "kernels/cpu/matmul.h"

namespace vigil {
namespace {

// Runs before main(), so before anything in this process asks for a kernel path.
const bool kEnvSet = setenv("VIGIL_KERNEL_PATH", "scalar", 1) == 0;

TEST(KernelPathEnv, ForcesThePathAtFirstUse) {
  ASSERT_TRUE(kEnvSet);
  EXPECT_EQ(cpu_kernel_path(), "scalar");
  // Switching later is explicit; a path the CPU lacks or an unknown name is refused by name.
  select_cpu_kernel_path("");
  EXPECT_EQ(cpu_kernel_path(), available_cpu_kernel_paths().front());
  try {
    select_cpu_kernel_path("sse9");
    FAIL() << "unknown path accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vigil
