// Kernel exports: library loading (cudaLibrary*) and cudaLaunchKernel.
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

cudaError_t launch_kernel(StreamApi api, const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                          cudaStream_t stream) {
  if (func == nullptr) return cudaErrorInvalidDeviceFunction;
  // A launch configuration outside the device's limits (compute capability 9.0: grid 2^31-1 x
  // 65535 x 65535, block 1024 x 1024 x 64 and 1024 threads) is the runtime's configuration error;
  // the thread count is taken in 64 bits so that it cannot wrap.
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
      grid.x > 0x7fffffffU || grid.y > 65535 || grid.z > 65535 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      static_cast<unsigned long long>(block.x) * block.y * block.z > 1024) {
    return cudaErrorInvalidConfiguration;
  }
  if (shared_mem > 0xffffffffu) return cudaErrorInvalidValue;  // the driver takes 32 bits
  if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
  // This runtime keeps no registry of nvcc host stubs: `func` must be a cudaKernel_t (from
  // cudaLibraryGetKernel) or a cudaFunction_t, both of which the driver accepts as a CUfunction.
  // Anything else is an unknown handle to the driver, which the runtime reports the way it
  // reports an unregistered host stub.
  CUfunction function = reinterpret_cast<CUfunction>(const_cast<void*>(func));
  const cudaError_t e =
      call_driver(driver().cuLaunchKernel.pick(api), function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                  static_cast<unsigned int>(shared_mem), stream, args, static_cast<void**>(nullptr));
  return e == cudaErrorInvalidResourceHandle ? cudaErrorInvalidDeviceFunction : e;
}

}  // namespace

SIMCUDART_API cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, enum cudaJitOption* jitOptions,
                                              void** jitOptionsValues, unsigned int numJitOptions,
                                              enum cudaLibraryOption* libraryOptions, void** libraryOptionValues,
                                              unsigned int numLibraryOptions) {
  return guarded([&] {
    if (library == nullptr || code == nullptr) return cudaErrorInvalidValue;
    if ((numJitOptions != 0 && jitOptions == nullptr) || (numLibraryOptions != 0 && libraryOptions == nullptr)) {
      return cudaErrorInvalidValue;
    }
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    // The runtime's JIT and library option enums are the driver's, value for value.
    return call_driver(driver().cuLibraryLoadData, library, code, reinterpret_cast<CUjit_option*>(jitOptions),
                       jitOptionsValues, numJitOptions, reinterpret_cast<CUlibraryOption*>(libraryOptions),
                       libraryOptionValues, numLibraryOptions);
  });
}

SIMCUDART_API cudaError_t cudaLibraryGetKernel(cudaKernel_t* pKernel, cudaLibrary_t library, const char* name) {
  return guarded([&] {
    if (pKernel == nullptr || name == nullptr) return cudaErrorInvalidValue;
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuLibraryGetKernel, pKernel, library, name);
  });
}

SIMCUDART_API cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  return guarded([&] {
    if (cudaError_t e = ensure_context(); e != cudaSuccess) return e;
    return call_driver(driver().cuLibraryUnload, library);
  });
}

SIMCUDART_API cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                           cudaStream_t stream) {
  return guarded([&] { return launch_kernel(StreamApi::legacy, func, gridDim, blockDim, args, sharedMem, stream); });
}
SIMCUDART_API cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                                size_t sharedMem, cudaStream_t stream) {
  return guarded(
      [&] { return launch_kernel(StreamApi::per_thread, func, gridDim, blockDim, args, sharedMem, stream); });
}
