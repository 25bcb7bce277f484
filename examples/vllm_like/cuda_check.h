// Failure types of vllm_like (each maps to one exit status) and the CUDA call check that raises them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace vllm_like {

// Exit statuses, documented in README.md; tests key on them.
enum ExitStatus : int {
  kExitStarted = 0,
  kExitFailure = 1,      // an unexpected CUDA error or a KV verification mismatch
  kExitUsage = 2,        // bad command line or scenario
  kExitRefused = 3,      // free memory at start-up below the requested share
  kExitNoKvMemory = 4,   // nothing left for the KV cache
  kExitOutOfMemory = 5,  // out of device memory after sizing
};

// Ends the run with an exit status; `what()` is the line printed after the phase name.
struct EngineExit : std::runtime_error {
  EngineExit(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

// PyTorch's size formatting in its OOM message: bytes, KiB, MiB or GiB with two decimals.
std::string format_size(std::uint64_t bytes);
// "19.27" (GiB, two decimals), for the vLLM-style log lines.
std::string gib(double bytes);

// A failed CUDA call: out-of-memory errors exit 5 (vLLM would die with "CUDA error: out of
// memory"), anything else exits 1. Clears the runtime's last error first so nothing stays sticky.
[[noreturn]] void cuda_failed(cudaError_t error, const char* expression);

inline void check(cudaError_t error, const char* expression) {
  if (error != cudaSuccess) cuda_failed(error, expression);
}

#define VLLM_LIKE_CHECK(call) ::vllm_like::check((call), #call)

}  // namespace vllm_like
