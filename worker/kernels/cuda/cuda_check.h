// Checks every CUDA, cuBLAS and NCCL call; failures throw with the call site and the error name.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace vigil::cuda {

[[noreturn]] inline void throw_error(const char* call, const char* file, int line,
                                     const std::string& error) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + error);
}

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw_error(call, file, line, std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")");
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_error(call, file, line, cublasGetStatusName(s));
}
inline void check(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) throw_error(call, file, line, ncclGetErrorString(r));
}

}  // namespace vigil::cuda

#define VIGIL_CUDA_CHECK(call) ::vigil::cuda::check((call), #call, __FILE__, __LINE__)
