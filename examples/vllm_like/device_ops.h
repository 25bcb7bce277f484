// The device work vllm_like launches: sample fill/check kernels, torch.zeros' fill and run-time generated modules.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace vllm_like {

class Kernels {
 public:
  // Loads the embedded PTX (cudaLibraryLoadData) and allocates the mismatch counter.
  explicit Kernels(cudaStream_t stream);
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  // Later launches go to `stream` (the engine's current stream).
  void set_stream(cudaStream_t stream) { stream_ = stream; }

  // Enqueued on the stream, so they are recorded as graph nodes while it captures.
  void fill(void* base, std::uint64_t bytes, std::uint32_t seed) const;
  void check(const void* base, std::uint64_t bytes, std::uint32_t seed) const;
  // torch.zeros' fill of `bytes` int8 elements at `base`, as PyTorch launches it (torch_fill.h).
  void torch_zeros(void* base, std::uint64_t bytes) const;
  // Synchronises, reads the counter back and resets it; never call while capturing.
  std::uint32_t take_mismatches() const;

 private:
  cudaStream_t stream_;
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t fill_ = nullptr;
  cudaKernel_t check_ = nullptr;
  cudaKernel_t torch_fill_ = nullptr;
  std::uint32_t* mismatches_ = nullptr;  // device memory, outside the caching allocator (a tiny plain cudaMalloc)
};

// Loads a generated PTX module charging `bytes` of device memory on the simulator (its
// `// simcuda-module-bytes:` comment); on a GPU it is a tiny valid module, as a JIT-ed Triton
// kernel would be.
cudaLibrary_t load_generated_module(std::size_t index, std::uint64_t bytes);

}  // namespace vllm_like
