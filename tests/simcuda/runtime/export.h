// Export and exception-barrier helpers shared by every file that defines cuda* entry points.
#pragma once

#include <cuda_runtime_api.h>

#include <cstring>
#include <new>

#include "errors.h"

// The library is built with -fvisibility=hidden: only what is marked here is part of the ABI.
#define SIMCUDART_API extern "C" __attribute__((visibility("default")))

namespace simcudart {

// Which default stream a stream-ordered export means by stream 0: the plain names use the legacy
// NULL stream, the _ptsz/_ptds names the per-thread default stream (as nvcc --default-stream
// per-thread selects them).
enum class StreamApi { legacy, per_thread };

// The value of an enum parameter as its integer. C callers may pass any int, and loading an
// out-of-range value through the enum type is undefined behaviour in C++; copying the bytes is not.
template <class Enum>
int enum_value(const Enum& e) noexcept {
  static_assert(sizeof(Enum) == sizeof(int));
  int value;
  std::memcpy(&value, &e, sizeof value);
  return value;
}

// Runs one API body with no exception escaping into the host program, and records a failure as
// the thread's last error, as every real runtime call does.
template <class Body>
cudaError_t guarded(Body&& body) noexcept {
  cudaError_t result;
  try {
    result = body();
  } catch (const std::bad_alloc&) {
    result = cudaErrorMemoryAllocation;
  } catch (...) {
    result = cudaErrorUnknown;
  }
  return record_error(result);
}

}  // namespace simcudart
