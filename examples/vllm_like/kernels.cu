// Device kernels of vllm_like: compiled to PTX at build time, embedded, loaded with cudaLibraryLoadData.
#include <cstdint>

#include "kv_sample.h"
#include "torch_fill.h"

// extern "C" keeps the .entry names unmangled, for cudaLibraryGetKernel and for the simulator's
// simcuda_kernel_NAME lookup. One thread per sample word; the host launches ceil(count / block).

extern "C" __global__ void sample_fill(std::uint8_t* base, std::uint64_t bytes, std::uint64_t stride,
                                       std::uint32_t seed) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= vllm_like::sample_count(bytes, stride)) return;
  const std::uint64_t offset = vllm_like::sample_offset(i, bytes, stride);
  *reinterpret_cast<std::uint32_t*>(base + offset) = vllm_like::sample_value(offset, seed);
}

extern "C" __global__ void sample_check(const std::uint8_t* base, std::uint64_t bytes, std::uint64_t stride,
                                        std::uint32_t seed, std::uint32_t* mismatches) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= vllm_like::sample_count(bytes, stride)) return;
  const std::uint64_t offset = vllm_like::sample_offset(i, bytes, stride);
  if (*reinterpret_cast<const std::uint32_t*>(base + offset) != vllm_like::sample_value(offset, seed))
    atomicAdd(mismatches, 1u);
}

// torch.zeros of an int8 tensor (torch_fill.h); its mangled .entry name is vllm_like::kTorchFillKernel.
template __global__ void
at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<signed char>, at::native::Array<char*, 1>>(
    int, at::native::FillFunctor<signed char>, at::native::Array<char*, 1>);
