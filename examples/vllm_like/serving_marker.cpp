// The serving-start marker of the simulated driver, resolved at run time.
#include "serving_marker.h"

#include <dlfcn.h>

#include <string>

#include "cuda_check.h"

namespace vllm_like {

bool mark_serving_start() {
  // RTLD_DEFAULT: the simulated runtime exports it (it forwards to the driver's oracle); a real libcudart does not.
  using MarkServing = int (*)();
  void* const symbol = dlsym(RTLD_DEFAULT, "simcudart_mark_serving");
  if (symbol == nullptr) return false;
  const int status = reinterpret_cast<MarkServing>(symbol)();
  if (status != 0) throw EngineExit(kExitFailure, "simcudart_mark_serving() returned " + std::to_string(status));
  return true;
}

}  // namespace vllm_like
