// Resolves the CUDA driver entry points of driver_api.h from libcuda.so.1.
#include "backend/cuda/driver_api.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace vigil::cuda {

const DriverApi& DriverApi::get() {
  static const DriverApi api = [] {
    // The runtime has normally loaded the driver already; RTLD_NOLOAD finds that copy.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) throw std::runtime_error("CUDA driver: libcuda.so.1 not found");
    DriverApi d;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) throw std::runtime_error(std::string("CUDA driver: libcuda.so.1 lacks ") + name);
    };
    // Versioned names: cuda.h maps the unversioned API names onto these exports.
    sym(d.mem_granularity, "cuMemGetAllocationGranularity");
    sym(d.mem_reserve, "cuMemAddressReserve");
    sym(d.mem_address_free, "cuMemAddressFree");
    sym(d.mem_create, "cuMemCreate");
    sym(d.mem_release, "cuMemRelease");
    sym(d.mem_map, "cuMemMap");
    sym(d.mem_unmap, "cuMemUnmap");
    sym(d.mem_set_access, "cuMemSetAccess");
    sym(d.ctx_synchronize, "cuCtxSynchronize");
    sym(d.begin_capture, "cuStreamBeginCapture_v2");
    sym(d.end_capture, "cuStreamEndCapture");
    sym(d.graph_instantiate, "cuGraphInstantiateWithFlags");
    sym(d.graph_launch, "cuGraphLaunch");
    sym(d.graph_exec_destroy, "cuGraphExecDestroy");
    sym(d.graph_destroy, "cuGraphDestroy");
    return d;
  }();
  return api;
}

}  // namespace vigil::cuda
