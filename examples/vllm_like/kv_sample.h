// The bounded sample of a buffer that vllm_like's kernels write and verify, shared by device and host code.
//
// An 80 GiB scenario runs on a 24 GiB machine, where "device" memory is host memory: touching every
// byte is impossible. The sample is every word of the first and last 4 KiB of a buffer, plus one
// 32-bit word per stride (1 MiB) in between: it still catches a tensor mapped at the wrong offset,
// a torn tail or a page of another buffer, while touching one 4 KiB page per MiB.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define VLLM_LIKE_HOST_DEVICE __host__ __device__
#else
#define VLLM_LIKE_HOST_DEVICE
#endif

namespace vllm_like {

inline constexpr std::uint64_t kSampleStride = 1u << 20;
inline constexpr std::uint64_t kSampleEdgeBytes = 4096;

// Edge words per side: a buffer smaller than two edges is sampled from both ends, overlapping.
VLLM_LIKE_HOST_DEVICE inline std::uint64_t sample_edge_words(std::uint64_t bytes) {
  const std::uint64_t edge = bytes / 2 < kSampleEdgeBytes ? bytes / 2 : kSampleEdgeBytes;
  return edge / 4;
}

VLLM_LIKE_HOST_DEVICE inline std::uint64_t sample_count(std::uint64_t bytes, std::uint64_t stride) {
  return 2 * sample_edge_words(bytes) + bytes / stride;
}

// Byte offset of sample i: head words, then tail words, then one word per stride.
VLLM_LIKE_HOST_DEVICE inline std::uint64_t sample_offset(std::uint64_t i, std::uint64_t bytes, std::uint64_t stride) {
  const std::uint64_t edge = sample_edge_words(bytes);
  if (i < edge) return i * 4;
  if (i < 2 * edge) return (bytes / 4 - 2 * edge + i) * 4;  // the last `edge` words
  return (i - 2 * edge) * stride;
}

// Depends on the offset only, so overlapping samples agree; seed 0 means "all zeros" (torch.zeros).
VLLM_LIKE_HOST_DEVICE inline std::uint32_t sample_value(std::uint64_t offset, std::uint32_t seed) {
  if (seed == 0) return 0;
  return static_cast<std::uint32_t>(offset >> 2) * 2654435761u ^ seed;
}

}  // namespace vllm_like
