// Hook bodies written once for both APIs: the driver's and the runtime's hooks of one family call these.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "interpose/hooks/hook_support.h"
#include "interpose/kv/kv_manager.h"
#include "interpose/track/oom_snapshot.h"
#include "interpose/track/tracker.h"

namespace kvremap::interpose {

// The result codes a shared body tests, per API. (The APIs share their handle types: cudaStream_t
// is CUstream, cudaGraphExec_t is CUgraphExec, cudaGraph_t is CUgraph.)
template <typename Result>
struct ApiCodes;
template <>
struct ApiCodes<CUresult> {
  static constexpr CUresult ok = CUDA_SUCCESS;
  static constexpr CUresult capture_invalidated = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  static constexpr CUresult out_of_memory = CUDA_ERROR_OUT_OF_MEMORY;
};
template <>
struct ApiCodes<cudaError_t> {
  static constexpr cudaError_t ok = cudaSuccess;
  static constexpr cudaError_t capture_invalidated = cudaErrorStreamCaptureInvalidated;
  static constexpr cudaError_t out_of_memory = cudaErrorMemoryAllocation;
};

inline std::uint64_t address_of(CUdeviceptr p) { return p; }
inline std::uint64_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// After a stream-ordered allocation (from the current pool or a named one) returned `r`: tracked
// when it succeeded, snapshotted when the device was out of memory. `device` is the runtime's
// device, or -1.
template <typename Result, typename Ptr>
[[gnu::always_inline]] inline Result after_stream_ordered_alloc(Result r, Ptr* out, std::uint64_t bytes,
                                                                const char* api, void* caller, int device = -1) {
  if (KVREMAP_LIKELY(r == ApiCodes<Result>::ok && out))
    on_alloc(address_of(*out), bytes, AllocKind::kStreamOrdered, api, caller, device);
  else if (r == ApiCodes<Result>::out_of_memory)
    on_out_of_memory(bytes, api, caller, device);
  return r;
}

// A memory query: the commit trigger sees it first; the engine is told the free memory the KV
// deferral and a learned sizing answer, and the tracker records both figures.
template <typename Real>
auto memory_query(Real real, std::size_t* free_bytes, std::size_t* total_bytes, const char* api) {
  kv_before(KvPoint::kMemoryQuery);
  auto r = real(free_bytes, total_bytes);
  if (r == ApiCodes<decltype(r)>::ok && free_bytes && total_bytes) {
    const std::size_t driver_free = *free_bytes;
    *free_bytes = kv_sizing_free(kv_reported_free(driver_free), *total_bytes);
    on_memory_query(api, driver_free, *total_bytes, *free_bytes, *total_bytes);
  }
  return r;
}

template <typename Real, typename Mode>
auto begin_capture(Real real, CUstream stream, Mode mode, bool per_thread) {
  kv_before(KvPoint::kCaptureBegin);
  auto r = real(stream, mode);
  if (r == ApiCodes<decltype(r)>::ok) {
    on_capture_begin(capture_stream_key(stream, per_thread), static_cast<int>(mode));
    kv_capture_began(capture_stream_key(stream, per_thread));
  }
  return r;
}

// A capture ends when its end call succeeds or reports the capture invalidated.
template <typename Real>
auto end_capture(Real real, CUstream stream, CUgraph* graph, bool per_thread) {
  using Codes = ApiCodes<decltype(real(stream, graph))>;
  auto r = real(stream, graph);
  if (r == Codes::ok || r == Codes::capture_invalidated) {
    on_capture_end(capture_stream_key(stream, per_thread), r == Codes::ok);
    kv_capture_ended(capture_stream_key(stream, per_thread));
  }
  return r;
}

// An instantiation holds the driver memory it consumed until the executable graph is destroyed.
template <typename Real, typename Param>
auto instantiate(Real real, CUgraphExec* exec, CUgraph graph, Param param, const char* api) {
  using Result = decltype(real(exec, graph, param));
  std::uint64_t bytes = 0;
  Result r = measure_consumed(&bytes, ApiCodes<Result>::ok, [&] { return real(exec, graph, param); });
  if (r == ApiCodes<Result>::ok && exec) on_graph_instantiate(reinterpret_cast<std::uint64_t>(*exec), bytes, api);
  return r;
}

template <typename Real>
auto graph_launch(Real real, CUgraphExec exec, CUstream stream) {
  kv_before(KvPoint::kGraphLaunch);
  auto r = real(exec, stream);
  if (r == ApiCodes<decltype(r)>::ok) on_graph_launch();
  return r;
}

template <typename Real>
auto graph_exec_destroy(Real real, CUgraphExec exec, const char* api) {
  using Result = decltype(real(exec));
  return tracked_free(reinterpret_cast<std::uint64_t>(exec), Held::kGraphExec, api, ApiCodes<Result>::ok,
                      [&] { return real(exec); });
}

}  // namespace kvremap::interpose
