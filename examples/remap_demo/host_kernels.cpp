// Host twins of demo_kernels.cu: the simulated driver runs PTX `.entry NAME` by calling simcuda_kernel_NAME.
//
// The simulator finds these with dlsym(RTLD_DEFAULT), hence default visibility and the executable's
// ENABLE_EXPORTS. On a real GPU nothing calls them. Each processes the whole range at once, which is
// what the device grid (ceil(n / block) blocks of one thread per element) computes in total.
#include <cstdint>

#include "demo_pattern.h"

#define REMAP_DEMO_EXPORT extern "C" __attribute__((visibility("default")))

// params = cuLaunchKernel's kernelParams: params[i] points to the i-th argument's value.
REMAP_DEMO_EXPORT void simcuda_kernel_fill_pattern(void** params);
REMAP_DEMO_EXPORT void simcuda_kernel_add_u32(void** params);

namespace {

template <typename T>
T kernel_arg(void** params, int index) {
  return *static_cast<T*>(params[index]);
}

}  // namespace

REMAP_DEMO_EXPORT void simcuda_kernel_fill_pattern(void** params) {
  auto* const dst = kernel_arg<std::uint32_t*>(params, 0);
  const auto n = kernel_arg<std::uint32_t>(params, 1);
  const auto seed = kernel_arg<std::uint32_t>(params, 2);
  for (std::uint32_t i = 0; i < n; ++i) dst[i] = remap_demo::pattern_value(i, seed);
}

REMAP_DEMO_EXPORT void simcuda_kernel_add_u32(void** params) {
  auto* const dst = kernel_arg<std::uint32_t*>(params, 0);
  const auto n = kernel_arg<std::uint32_t>(params, 1);
  const auto addend = kernel_arg<std::uint32_t>(params, 2);
  for (std::uint32_t i = 0; i < n; ++i) dst[i] = remap_demo::added_value(dst[i], addend);
}
