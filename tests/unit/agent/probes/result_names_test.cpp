// Return codes become label values: known names, and one value for every code a workload invents.
#include <gtest/gtest.h>

#include "probes/cuda_result.h"
#include "probes/nccl_probe.h"

namespace vigil::agent {
namespace {

TEST(ResultNames, KnownCodesByName) {
  EXPECT_EQ(cuda_result_name(2), "CUDA_ERROR_OUT_OF_MEMORY");    // cuda.h: CUDA_ERROR_OUT_OF_MEMORY = 2
  EXPECT_EQ(cuda_result_name(901), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
  EXPECT_EQ(nccl_result_name(6), "ncclRemoteError");             // nccl.h: ncclRemoteError = 6
}

TEST(ResultNames, UnknownCodesShareOneValue) {
  for (int code : {-1, 12345, 0x7fffffff, -2147483647 - 1}) {
    EXPECT_EQ(cuda_result_name(code), "other") << code;
    EXPECT_EQ(nccl_result_name(code), "other") << code;
  }
}

}  // namespace
}  // namespace vigil::agent
