// Element formulas shared by the PTX kernels, their simulator host twins and the demo's checks.
#pragma once

#include <cstdint>

// One definition for device and host code, so the simulator's host kernels cannot drift from the
// PTX the GPU runs: nvcc sees __host__ __device__, the host compiler sees a plain inline function.
#if defined(__CUDACC__)
#define REMAP_DEMO_HOST_DEVICE __host__ __device__
#else
#define REMAP_DEMO_HOST_DEVICE
#endif

namespace remap_demo {

// Multiplicative hash of the index: neighbouring elements differ in many bits, so a page mapped at
// the wrong offset, a stale page of another handle or a zero page cannot pass for the right data.
REMAP_DEMO_HOST_DEVICE inline std::uint32_t pattern_value(std::uint32_t index, std::uint32_t seed) {
  return (index * 2654435761u) ^ seed;
}

// Wraps modulo 2^32 on both sides (unsigned arithmetic), so host and device agree bit for bit.
REMAP_DEMO_HOST_DEVICE inline std::uint32_t added_value(std::uint32_t value, std::uint32_t addend) {
  return value + addend;
}

}  // namespace remap_demo
