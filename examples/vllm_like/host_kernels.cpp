// Host twins of kernels.cu: the simulated driver runs PTX `.entry NAME` by calling simcuda_kernel_NAME.
//
// Found by the simulator with dlsym(RTLD_DEFAULT), hence default visibility and ENABLE_EXPORTS; on
// a real GPU nothing calls them. Each does the whole grid's work in one call.
#include <cstdint>

#include "kv_sample.h"

#define VLLM_LIKE_EXPORT extern "C" __attribute__((visibility("default")))

VLLM_LIKE_EXPORT void simcuda_kernel_sample_fill(void** params);
VLLM_LIKE_EXPORT void simcuda_kernel_sample_check(void** params);

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
