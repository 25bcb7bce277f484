// Device kernels of remap_demo: compiled to PTX at build time, embedded, loaded with cudaLibraryLoadData.
#include <cstdint>

#include "demo_pattern.h"

// extern "C" keeps the PTX .entry names unmangled: cudaLibraryGetKernel looks them up by these
// names, and the simulator maps `.entry NAME` to the host function simcuda_kernel_NAME.
// One thread per element; the host launches ceil(n / block) blocks.

extern "C" __global__ void fill_pattern(std::uint32_t* dst, std::uint32_t n, std::uint32_t seed) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = remap_demo::pattern_value(i, seed);
}

extern "C" __global__ void add_u32(std::uint32_t* dst, std::uint32_t n, std::uint32_t addend) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = remap_demo::added_value(dst[i], addend);
}
