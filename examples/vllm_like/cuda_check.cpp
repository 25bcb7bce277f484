// Formatting of sizes and of failed CUDA calls for vllm_like's one-line error reports.
#include "cuda_check.h"

#include <cstdio>

namespace vllm_like {

std::string format_size(std::uint64_t bytes) {
  char text[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < (1ull << 20))
    std::snprintf(text, sizeof text, "%.2f KiB", b / 1024);
  else if (bytes < (1ull << 30))
    std::snprintf(text, sizeof text, "%.2f MiB", b / (1 << 20));
  else
    std::snprintf(text, sizeof text, "%.2f GiB", b / (1 << 30));
  return text;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / (1 << 30));
  return text;
}

void cuda_failed(cudaError_t error, const char* expression) {
  (void)cudaGetLastError();
  const std::string what = std::string(expression) + " failed: " + cudaGetErrorName(error);
  if (error == cudaErrorMemoryAllocation)
    throw EngineExit(kExitOutOfMemory, "RuntimeError: CUDA error: out of memory (" + what + ")");
  throw EngineExit(kExitFailure, what);
}

}  // namespace vllm_like
