// Host twins of kernels.cu: the simulated driver runs PTX `.entry NAME` by calling simcuda_kernel_NAME.
//
// Found by the simulator with dlsym(RTLD_DEFAULT), hence default visibility and ENABLE_EXPORTS; on
// a real GPU nothing calls them. Each does the whole grid's work in one call.
#include <dlfcn.h>

#include <cstdint>

#include "kv_sample.h"

#define VLLM_LIKE_EXPORT extern "C" __attribute__((visibility("default")))

VLLM_LIKE_EXPORT void simcuda_kernel_sample_fill(void** params);
VLLM_LIKE_EXPORT void simcuda_kernel_sample_check(void** params);
// torch_fill.h's kernel: the name is "simcuda_kernel_" + vllm_like::kTorchFillKernel.
VLLM_LIKE_EXPORT void
simcuda_kernel__ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEENS0_5ArrayIPcLi1EEEEEviT0_T1_(
    void** params);

namespace {

template <typename T>
T arg(void** params, int index) {
  return *static_cast<T*>(params[index]);
}

}  // namespace

VLLM_LIKE_EXPORT void simcuda_kernel_sample_fill(void** params) {
  auto* const base = arg<std::uint8_t*>(params, 0);
  const auto bytes = arg<std::uint64_t>(params, 1);
  const auto stride = arg<std::uint64_t>(params, 2);
  const auto seed = arg<std::uint32_t>(params, 3);
  const std::uint64_t n = vllm_like::sample_count(bytes, stride);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t offset = vllm_like::sample_offset(i, bytes, stride);
    *reinterpret_cast<std::uint32_t*>(base + offset) = vllm_like::sample_value(offset, seed);
  }
}

VLLM_LIKE_EXPORT void simcuda_kernel_sample_check(void** params) {
  const auto* const base = arg<const std::uint8_t*>(params, 0);
  const auto bytes = arg<std::uint64_t>(params, 1);
  const auto stride = arg<std::uint64_t>(params, 2);
  const auto seed = arg<std::uint32_t>(params, 3);
  auto* const mismatches = arg<std::uint32_t*>(params, 4);
  const std::uint64_t n = vllm_like::sample_count(bytes, stride);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t offset = vllm_like::sample_offset(i, bytes, stride);
    if (*reinterpret_cast<const std::uint32_t*>(base + offset) != vllm_like::sample_value(offset, seed)) ++*mismatches;
  }
}

VLLM_LIKE_EXPORT void
simcuda_kernel__ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIaEENS0_5ArrayIPcLi1EEEEEviT0_T1_(
    void** params) {
  const auto n = arg<int>(params, 0);
  const auto value = arg<signed char>(params, 1);
  auto* const data = arg<char*>(params, 2);
  // The simulator's own fill (a zero fill of gigabytes drops pages instead of writing them), from the
  // simulated driver already loaded (the runtime opens it without RTLD_GLOBAL).
  using Fill = int (*)(unsigned long long, unsigned char, unsigned long long);
  static const auto fill =
      reinterpret_cast<Fill>(dlsym(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "simcuda_fill_device"));
  if (n > 0)
    fill(reinterpret_cast<std::uintptr_t>(data), static_cast<unsigned char>(value), static_cast<unsigned long long>(n));
}
