// cudaGetDriverEntryPoint*: hands callers (PyTorch, Triton) driver pointers from the same resolver.
//
// Forwarding to the resolver the runtime itself got from cuGetProcAddress, with the caller's
// symbol, version and flags unchanged, is what lets an interposer that replaced that resolver
// also see (and wrap) every pointer handed out here.
#include "context.h"
#include "export.h"
#include "ptsz_api.h"

using namespace simcudart;

namespace {

static_assert(static_cast<int>(cudaEnableDefault) == CU_GET_PROC_ADDRESS_DEFAULT &&
              static_cast<int>(cudaEnableLegacyStream) == CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
              static_cast<int>(cudaEnablePerThreadDefaultStream) == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

constexpr unsigned long long kStreamFlags = cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream;

cudaDriverEntryPointQueryResult to_runtime_status(CUdriverProcAddressQueryResult status) noexcept {
  switch (status) {
    case CU_GET_PROC_ADDRESS_SUCCESS:
      return cudaDriverEntryPointSuccess;
    case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT:
      return cudaDriverEntryPointVersionNotSufficent;
    case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND:
      break;
  }
  return cudaDriverEntryPointSymbolNotFound;
}

cudaError_t entry_point(StreamApi api, const char* symbol, void** funcPtr, unsigned int cudaVersion,
                        unsigned long long flags, cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr) return cudaErrorInvalidValue;
  *funcPtr = nullptr;
  if (driverStatus != nullptr) *driverStatus = cudaDriverEntryPointSymbolNotFound;
  // A per-thread translation unit's "default" means per-thread; an explicit stream flag wins.
  if (api == StreamApi::per_thread && (flags & kStreamFlags) == 0) flags |= cudaEnablePerThreadDefaultStream;
  if (cudaError_t e = ensure_initialised(); e != cudaSuccess) return e;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const cudaError_t e = call_driver(driver().cuGetProcAddress, symbol, funcPtr, static_cast<int>(cudaVersion),
                                    static_cast<cuuint64_t>(flags), &status);
  if (e == cudaSuccess && driverStatus != nullptr) *driverStatus = to_runtime_status(status);
  return e;
}

}  // namespace

// Deprecated in CUDA 13 but still exported; it asks at the runtime's own version.
SIMCUDART_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult* driverStatus) {
  return guarded([&] { return entry_point(StreamApi::legacy, symbol, funcPtr, CUDART_VERSION, flags, driverStatus); });
}
SIMCUDART_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult* driverStatus) {
  return guarded(
      [&] { return entry_point(StreamApi::per_thread, symbol, funcPtr, CUDART_VERSION, flags, driverStatus); });
}

SIMCUDART_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                           unsigned long long flags,
                                                           enum cudaDriverEntryPointQueryResult* driverStatus) {
  return guarded([&] { return entry_point(StreamApi::legacy, symbol, funcPtr, cudaVersion, flags, driverStatus); });
}
SIMCUDART_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr,
                                                                unsigned int cudaVersion, unsigned long long flags,
                                                                enum cudaDriverEntryPointQueryResult* driverStatus) {
  return guarded([&] { return entry_point(StreamApi::per_thread, symbol, funcPtr, cudaVersion, flags, driverStatus); });
}
