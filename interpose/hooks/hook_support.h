// Helpers shared by the runtime and driver hooks: capture-stream keys and measured driver charges.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose {

// Identifies a capturing stream across begin/end. A NULL stream in a _ptsz call, and the
// per-thread pseudo-handle, are the calling thread's own per-thread stream. (cudaStream_t and
// CUstream are the same type, and cudaStreamPerThread is CU_STREAM_PER_THREAD.)
inline std::uint64_t capture_stream_key(CUstream stream, bool per_thread_api) {
  if ((stream == nullptr && per_thread_api) || stream == CU_STREAM_PER_THREAD)
    return 0x2 | (static_cast<std::uint64_t>(current_tid()) << 8);
  return reinterpret_cast<std::uint64_t>(stream);
}

// Runs `call` and sets `consumed` to the drop in free device memory across it: the driver memory an
// instantiation or a module load keeps. 0 when the call failed or free memory could not be read.
template <typename Result, typename Call>
Result measure_consumed(std::uint64_t* consumed, Result success, Call&& call) {
  std::uint64_t before = 0, after = 0;
  const bool have_before = free_device_bytes(&before);
  Result r = call();
  *consumed = (have_before && r == success && free_device_bytes(&after) && before > after) ? before - after : 0;
  return r;
}

}  // namespace kvremap::interpose
