// The real driver functions kvremap itself calls (device of the current context, free memory).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

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

// The driver's own cuGetProcAddress_v2 (libcuda's export), or nullptr before libcuda is loaded.
using ProcAddressFn = int (*)(const char*, void**, int, unsigned long long, int*);
ProcAddressFn real_proc_address();

}  // namespace kvremap::interpose
