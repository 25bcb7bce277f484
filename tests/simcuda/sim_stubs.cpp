// What the generated stubs share: the NOT_SUPPORTED answer, its one line per function, and the simulated-or-not query.
#include "sim_stubs.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sim_state.h"

namespace simcuda {

int unsimulated_call(std::size_t index) {
  if (index >= kStubEntryCount) return CUDA_ERROR_NOT_SUPPORTED;
  const char* name = kStubEntries[index].name;
  if (CUresult injected = enter(name); injected != CUDA_SUCCESS) return injected;
  // One flag per function, allocated once: a program polling an unsimulated call gets one line, not thousands.
  static std::atomic<bool>* reported = new std::atomic<bool>[kStubEntryCount]();
  if (!reported[index].exchange(true))
    std::fprintf(stderr, "simcuda: %s is not simulated (CUDA_ERROR_NOT_SUPPORTED)\n", name);
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace simcuda

using namespace simcuda;

SIM_EXPORT int simcuda_is_simulated(const char* name) {
  if (!name) return -1;
  for (std::size_t i = 0; i < kStubEntryCount; ++i)
    if (std::strcmp(kStubEntries[i].name, name) == 0) return kStubEntries[i].resolved != kStubEntries[i].stub;
  return -1;
}

SIM_EXPORT size_t simcuda_cuda_h_function_count(void) { return kStubEntryCount; }

SIM_EXPORT const char* simcuda_cuda_h_function(size_t index) {
  return index < kStubEntryCount ? kStubEntries[index].name : nullptr;
}
