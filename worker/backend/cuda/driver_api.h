// The CUDA driver entry points the backend calls directly (VMM and graphs), resolved from
// libcuda.so.1 with dlsym: calls then go through the exported symbols the agent's uprobes attach
// to, results are real CUresults for the probes, and the worker still starts without a driver.
#pragma once

#include <cuda.h>

namespace vigil::cuda {

struct DriverApi {
  decltype(&::cuMemGetAllocationGranularity) mem_granularity = nullptr;
  decltype(&::cuMemAddressReserve) mem_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuStreamBeginCapture) begin_capture = nullptr;
  decltype(&::cuStreamEndCapture) end_capture = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) graph_instantiate = nullptr;
  decltype(&::cuGraphLaunch) graph_launch = nullptr;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) graph_destroy = nullptr;

  // Loaded once; throws std::runtime_error naming the library or symbol that is missing. Tests
  // build their own DriverApi of fakes instead.
  static const DriverApi& get();
};

}  // namespace vigil::cuda
