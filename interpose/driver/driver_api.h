// The one port to the real driver for kvremap's own calls: each function resolved once through libcuda's
// cuGetProcAddress.
#pragma once

#include <cudaTypedefs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvremap::interpose {

// Device ordinal of the calling thread's current context, or -1 (no context, no driver).
int current_device();
namespace driver_api_detail {
inline constinit std::atomic<int> g_devices{0};  // the driver's device count, once known
bool count_devices();                            // asks the driver; stores it when known
}  // namespace driver_api_detail
// True when the driver has exactly one device (known once it is initialised): every context is then
// on device 0, and a hook need not ask which (a query per allocation otherwise). Most engine
// processes see one GPU. Inline: every allocation asks.
[[gnu::always_inline]] inline bool only_one_device() {
  const int devices = driver_api_detail::g_devices.load(std::memory_order_relaxed);
  return devices != 0 ? devices == 1 : driver_api_detail::count_devices();
}
// Real cuMemGetInfo_v2: false when it fails (no context), leaving the outputs untouched.
bool real_memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
// Real cuDeviceTotalMem_v2, or 0.
std::uint64_t real_device_total(int device);
// Real cuDeviceGetName, or empty.
std::string real_device_name(int device);
// Real cuDriverGetVersion (e.g. 13000), or 0.
int real_driver_version();
// Real cuCtxSynchronize: true when it succeeded.
bool real_synchronize();
// cuDeviceGetAttribute's value of `attribute` on `device`, or -1 when the driver cannot say.
int real_device_attribute(CUdevice_attribute attribute, int device);
// CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED of `device`: host-located VMM handles work.
bool real_host_vmm_supported(int device);
// The minimum VMM granularity of pinned device memory on `device`, or 0 when the driver cannot say.
std::uint64_t real_vmm_granularity(int device);
// One kernel parameter's place in the device-side parameter layout (cuFuncGetParamInfo).
struct ParamPlace {
  std::size_t offset = 0;
  std::size_t size = 0;
};
// Every parameter of `function` (a CUfunction, or a CUkernel passed as one), or nullopt when the driver
// cannot say (older than 12.4, or an unknown handle).
std::optional<std::vector<ParamPlace>> real_parameter_layout(CUfunction function);
// cuFuncGetName's (or cuKernelGetName's) name of `function`, mangled as compiled; empty when unknown.
std::string real_function_name(CUfunction function);
// cuGetErrorName's name for `error`, or "unknown error".
std::string real_error_name(CUresult error);

// The driver's VMM functions the KV arena drives (one table, so tests can give it the simulator's).
struct VmmFunctions {
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemsetD8_v3020 memset_d8 = nullptr;
  // Every function present.
  bool complete() const {
    return address_reserve && address_free && create && release && map && unmap && set_access && memset_d8;
  }
};
// The real driver's table; incomplete (some null) until libcuda is loaded.
VmmFunctions real_vmm_functions();

// The driver's own cuGetProcAddress_v2 (libcuda's export), or nullptr before libcuda is loaded.
using ProcAddressFn = PFN_cuGetProcAddress_v12000;
ProcAddressFn real_proc_address();

}  // namespace kvremap::interpose
