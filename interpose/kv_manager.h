// KVREMAP_MODE=defer: KV placement in the arena, deferral after the KV burst, query adjustment, and the commit.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "interpose/library.h"

namespace kvremap::interpose {

// The calls at which the KV manager may act, each before the hooked call reaches the driver.
enum class KvPoint { kAllocation, kCaptureBegin, kMemoryQuery, kModuleLoad, kGraphLaunch, kKernelLaunch };

// Cheap to call on every hook: false unless KVREMAP_MODE=defer.
inline bool kv_mode() { return mode_option() == policy::Mode::defer; }

namespace kv_detail {
// The defer-mode bodies of the three functions below; only called under kv_mode().
bool allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr, CUresult* result);
bool release(CUdeviceptr ptr, const char* api, CUresult* result);
void before(KvPoint point);
}  // namespace kv_detail

// An allocation the engine asked for: placed in the arena when it may be KV cache. True when it
// was handled (then *result is the outcome and *ptr the address); false to allocate normally.
// Inline, like the two below: in observe mode every allocation hook pays one comparison for them.
inline bool kv_allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr,
                        CUresult* result) {
  return kv_mode() && kv_detail::allocate(bytes, api, return_address, ptr, result);
}
// A free: true (with *result) when the pointer was an arena region.
inline bool kv_free(CUdeviceptr ptr, const char* api, CUresult* result) {
  return kv_mode() && kv_detail::release(ptr, api, result);
}
// Before the hooked call at `point`: ends the KV burst (synchronise, defer to scratch) and commits
// when the trigger says so. Never acts while a capture is open.
inline void kv_before(KvPoint point) {
  if (kv_mode()) kv_detail::before(point);
}
void kv_capture_began();
void kv_capture_ended();
// While KV is deferred, what a memory query returns: free memory as if KV were fully backed.
std::size_t kv_reported_free(std::size_t driver_free);

}  // namespace kvremap::interpose
