// What the CUDA backend was built against and what the host offers (no GPU needed to ask).
#include "backend/cuda/backend_info.h"
#include "kernels/cuda/cuda_check.h"

#include <library_types.h>

namespace vigil::cuda {

std::string backend_info() {
  int runtime = 0;
  VIGIL_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  VIGIL_CUDA_CHECK(cublasGetProperty(MAJOR_VERSION, &cublas_major));
  VIGIL_CUDA_CHECK(cublasGetProperty(MINOR_VERSION, &cublas_minor));
  VIGIL_CUDA_CHECK(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
  int nccl = 0;
  VIGIL_CUDA_CHECK(ncclGetVersion(&nccl));

  std::string devices;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    devices = "0 (" + std::string(cudaGetErrorName(e)) + ")";
    cudaGetLastError();  // clear the sticky "no device" error
  } else {
    devices = std::to_string(count);
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      VIGIL_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
      devices += (d ? ", " : " [") + std::string(prop.name) + " sm_" + std::to_string(prop.major) +
                 std::to_string(prop.minor);
    }
    if (count) devices += "]";
  }
  return "cuda runtime " + std::to_string(runtime) + ", cublas " + std::to_string(cublas_major) +
         "." + std::to_string(cublas_minor) + "." + std::to_string(cublas_patch) + ", nccl " +
         std::to_string(nccl) + ", devices " + devices;
}

}  // namespace vigil::cuda
