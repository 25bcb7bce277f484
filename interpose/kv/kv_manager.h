// KVREMAP_MODE=defer: KV placement in the arena, deferral after the KV burst, query adjustment, and the commit.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/base/library.h"
#include "interpose/kv/kv_tags.h"
#include "interpose/kv/launch_parameters.h"
#include "interpose/kv/stream_ages.h"
#include "policy/kv_recognition.h"

namespace kvremap::interpose {

// The calls at which the KV manager may act, each before the hooked call reaches the driver.
// Kernel launches have their own entry (kv_before_launch), which reads their parameters.
enum class KvPoint { kAllocation, kCaptureBegin, kMemoryQuery, kModuleLoad, kGraphLaunch };

// Cheap to call on every hook: false unless KVREMAP_MODE=defer.
inline bool kv_mode() { return mode_option() == policy::Mode::defer; }

namespace kv_detail {
// Set once the first KV arena exists: until then no free can be an arena region's (read inline by
// every free in defer mode).
inline constinit std::atomic<bool> g_any_arena{false};
// Checks the hooks make inline before calling in. g_active: devices with arena regions not yet
// committed (something to defer or commit). g_pending: devices deferred and not committed.
inline constinit std::atomic<int> g_active{0};
inline constinit std::atomic<int> g_pending{0};
// The first graph launch has checked that something was deferred (and said why not, once).
inline constinit std::atomic<bool> g_serving_checked{false};
// Nothing for before() to do at `point`: no device has anything to defer or commit there, and no
// graph launch still has to check that something was deferred.
inline bool nothing_before(KvPoint point) {
  return g_active.load(std::memory_order_relaxed) == 0 &&
         (point != KvPoint::kGraphLaunch || g_serving_checked.load(std::memory_order_relaxed));
}
// The defer-mode bodies of the three functions below; only called under kv_mode().
bool allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr, CUresult* result);
bool release(CUdeviceptr ptr, const char* api, CUresult* result);
void before(KvPoint point);
void before_launch(std::uint64_t stream, const KernelLaunch& launch);
void touch(std::uint64_t address, std::uint64_t bytes, const char* api, bool zero_fill);
bool region_of(std::uint64_t address, std::uint64_t* base, std::uint64_t* size);
std::size_t sizing_free(std::size_t reported, std::size_t total);
}  // namespace kv_detail

// Whether an allocation of `bytes` may be KV at all (policy::may_place_in_arena with the hot options and
// this thread's tag): most allocations stop here, inline, without a call.
inline bool kv_candidate(std::uint64_t bytes) {
  return policy::may_place_in_arena(bytes, current_tag(), kv_min_bytes_option(), kv_tensor_bytes_option());
}

// An allocation the engine asked for: placed in the arena when it may be KV cache. True when it
// was handled (then *result is the outcome and *ptr the address); false to allocate normally.
// Inline, like the two below: in observe mode every allocation hook pays one comparison for them.
inline bool kv_allocate(std::uint64_t bytes, const char* api, void* return_address, CUdeviceptr* ptr,
                        CUresult* result) {
  return kv_mode() && kv_candidate(bytes) && kv_detail::allocate(bytes, api, return_address, ptr, result);
}
// A free: true (with *result) when the pointer was an arena region.
inline bool kv_free(CUdeviceptr ptr, const char* api, CUresult* result) {
  return kv_mode() && kv_detail::g_any_arena.load(std::memory_order_relaxed) && kv_detail::release(ptr, api, result);
}
// Before the hooked call at `point`: ends the KV burst (synchronise, defer to scratch) and commits
// when the trigger says so. Never acts while a capture is open.
inline void kv_before(KvPoint point) {
  if (kv_mode() && !kv_detail::nothing_before(point)) kv_detail::before(point);
}
// Before a kernel launch on `stream` (as capture_stream_key() names it): in a device's KV burst, a launch
// whose parameters reach a KV tensor keeps that tensor backed at the deferral unless it is PyTorch's zero
// fill (policy::is_zero_fill_kernel), which the commit's zero-fill replays; after the deferral, the
// commit trigger decides, told what the parameters reach where its rules need it.
inline void kv_before_launch(std::uint64_t stream, const KernelLaunch& launch) {
  if (!kv_mode()) return;
  note_stream_launch(stream);
  if (kv_detail::g_active.load(std::memory_order_relaxed) != 0) kv_detail::before_launch(stream, launch);
}
// Before a copy, memset, IPC handle, export or range query of [address, address + bytes): commits
// first when that touches deferred KV (the call could be serving reading or writing the cache). On a
// KV tensor still in its burst, anything but a zero fill (`zero_fill`: a memset of zeros, which the
// commit's zero-fill replays) keeps that tensor backed at the deferral, so what the engine wrote
// there is never lost to scratch.
inline void kv_touch(std::uint64_t address, std::uint64_t bytes, const char* api, bool zero_fill = false) {
  if (!kv_mode()) return;
  if (kv_detail::g_pending.load(std::memory_order_relaxed) != 0 ||
      (!zero_fill && kv_detail::g_active.load(std::memory_order_relaxed) != 0))
    kv_detail::touch(address, bytes, api, zero_fill);
}
// The KV arena placement holding `address`, as the engine allocated it: its base and the bytes it asked
// for. A range query on it answers that whole range, as for a cudaMalloc of that size, whatever
// chunks and scratch aliases the arena mapped it with. False outside the arena.
inline bool kv_region_of(std::uint64_t address, std::uint64_t* base, std::uint64_t* size) {
  return kv_mode() && kv_detail::g_any_arena.load(std::memory_order_relaxed) &&
         kv_detail::region_of(address, base, size);
}
// `stream`: capture_stream_key() of the capturing stream.
void kv_capture_began(std::uint64_t stream);
// A socket of this process listens (the listen hook): when it is the engine's serving port or socket
// (policy::EngineProfile::serving_port, serving_socket), the engine's serving flag is set, and every
// process of the engine commits its deferred KV before its next kernel launch.
void kv_listening(int fd);
void kv_capture_ended(std::uint64_t stream);
// Before the engine destroys `stream` (capture_stream_key()): its handle may come back for a new stream,
// which is neither a capture stream nor the capture loop's warm-up stream.
void kv_stream_destroyed(std::uint64_t stream);
// At exit, before the summary: the serving peaks since each device's commit.
void kv_at_exit();
// An allocation hook is about to return out of memory for `bytes` (set_out_of_memory_hook): after the
// device's commit, serving's need (what it holds beyond the commit plus what it asked) goes into the
// profile at once, so the next start of the configuration keeps room for it.
void kv_out_of_memory(std::uint64_t bytes, int device_hint);
// After the device's commit, an allocation the device refused (cudaMalloc, cuMemAlloc): where host-located
// VMM works and KVREMAP_DEFICIT=host, backed by host memory in the arena instead (*ptr), so serving goes
// on, slower, rather than failing; the need goes into the profile at once, as kv_out_of_memory's does.
// False (nothing done) otherwise: the caller returns the out-of-memory error.
bool kv_serving_overflow(std::uint64_t bytes, const char* api, void* return_address, int device_hint,
                         CUdeviceptr* ptr);
// While KV is deferred, what a memory query returns: free memory as if KV were fully backed.
std::size_t kv_reported_free(std::size_t driver_free);
// Before the KV burst, at the memory query a profile of this configuration names as the engine's
// sizing query: the free memory moved by the profile's shift (policy/sizing.h), traced as
// `kv sizing adjusted`; `reported` unchanged everywhere else.
inline std::size_t kv_sizing_free(std::size_t reported, std::size_t total) {
  return kv_mode() && options().sizing != policy::SizingWhen::engine ? kv_detail::sizing_free(reported, total)
                                                                     : reported;
}

}  // namespace kvremap::interpose
