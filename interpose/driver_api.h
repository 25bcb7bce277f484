// The real driver functions kvremap itself calls (device of the current context, free memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvremap::interpose {

// Device ordinal of the calling thread's current context, or -1 (no context, no driver).
int current_device();
// True when the driver has exactly one device (known once it is initialised): every context is then
// on device 0, and a hook need not ask which (a query per allocation otherwise). Most engine
// processes see one GPU.
bool only_one_device();
// Real cuMemGetInfo_v2: false when it fails (no context), leaving the outputs untouched.
bool real_memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
// Real cuDeviceTotalMem_v2, or 0.
std::uint64_t real_device_total(int device);

// The driver's own cuGetProcAddress_v2 (libcuda's export), or nullptr before libcuda is loaded.
using ProcAddressFn = int (*)(const char*, void**, int, unsigned long long, int*);
ProcAddressFn real_proc_address();

}  // namespace kvremap::interpose
