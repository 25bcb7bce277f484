// The trace's KV events (KVREMAP_MODE=defer), one typed function each: the arena, the deferral, the commit, profiles.
#pragma once

// The KV manager hands these functions plain figures; trace/ alone writes the JSON, and
// docs/trace-format.md describes what each one writes. Each writes one instant event of category
// "kv" and flushes it at once: a commit that fails stops the process right after.

#include <array>
#include <cstdint>
#include <string_view>

#include "policy/commit_plan.h"
#include "policy/commit_trigger.h"
#include "policy/engine.h"
#include "policy/options.h"
#include "policy/trace_schema.h"

namespace kvremap::interpose::trace_events {

// One category's bytes over a window that began at the end of the KV burst (or at the commit): live
// when it began, and the highest they have been since.
struct CategoryPeak {
  std::int64_t at_start = 0;
  std::int64_t peak = 0;
};
// Per category, in policy::kCategoryNames' order.
using PostKvPeaks = std::array<CategoryPeak, policy::kCategoryCount>;

// Settings only the device can check refused the device's arena; `reason` is the line printed.
void kv_arena_refused(int device, std::string_view reason);

struct KvArenaReservedEvent {
  int device = 0;
  std::uint64_t base = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t chunk_bytes = 0;
  bool one_handle = false;
  std::uint64_t granularity = 0;
  bool posix_fd_handles = false;
  bool rdma_capable = false;
  std::uint64_t requested_bytes = 0;  // the first size tried: reserved_bytes is less when that did not fit
};
void kv_arena_reserved(const KvArenaReservedEvent& event);

// The KV burst ended: its tensors went onto the scratch.
struct KvDeferredEvent {
  int device = 0;
  std::uint64_t regions = 0;
  std::uint64_t tensor_bytes = 0;
  std::uint64_t deferred_bytes = 0;
  std::uint64_t scratch_bytes = 0;
  policy::EngineKind engine = policy::EngineKind::other;
  bool graphs_expected = false;
  policy::TriggerMode commit_mode = policy::TriggerMode::automatic;
};
void kv_deferred(const KvDeferredEvent& event);

// Another interposer (`library`, its path) defines the function kvremap's `api` hook forwards to:
// kvremap places none of that API's allocations in its arena.
void kv_stands_aside(std::string_view api, std::string_view library);

// KV deferral is observe-only in this process: the engine maps its KV cache itself (`why`).
void kv_observe_only(std::string_view why);

// Defer mode reached serving (or exit) with nothing deferred on any device.
void kv_nothing_deferred(std::string_view reason);

// The engine's server listens on its serving port or socket (`where`: "port 8000", "socket /run/v.sock").
void kv_serving_port_open(std::string_view where);

// With its KV cache backed the engine would have `short_bytes` less than nothing free.
void kv_free_below_zero(int device, std::uint64_t short_bytes);

// After the commit the device refused an allocation of `bytes` twice, the engine's allocator freeing
// `freed_bytes_since_refusal` in `frees_since_refusal` frees between, and kvremap backed the retry with host
// memory at `address` (`host_bytes`: all such allocations live now).
void kv_serving_overflow(int device, std::string_view api, std::uint64_t address, std::uint64_t bytes,
                         std::uint64_t host_bytes, std::uint64_t frees_since_refusal,
                         std::uint64_t freed_bytes_since_refusal);

// At exit: each category's peak while serving, since the commit.
void kv_serving_peaks(int device, const PostKvPeaks& since_commit);

// What the commit measured and how it splits the KV cache between device and host memory.
struct KvCommitPlanEvent {
  int device = 0;
  std::uint64_t kv_bytes = 0;
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t tensors = 0;
  std::uint64_t host_bytes_per_tensor = 0;
  std::uint64_t granularity = 0;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t device_free_bytes = 0;
  std::uint64_t headroom_bytes = 0;
  std::string_view headroom_source;
  std::uint64_t post_kv_transient_bytes = 0;
  std::int64_t margin_bytes = 0;
  std::uint64_t deficit_bytes = 0;
  policy::CommitVerdict verdict = policy::CommitVerdict::fail;
};
void kv_commit_plan(const KvCommitPlanEvent& event);

// The KV cache is backed for good: where it went, what moved it, and the peaks of the post-KV work.
struct KvCommittedEvent {
  int device = 0;
  policy::CommitReason trigger = policy::CommitReason::none;
  std::string_view call;  // the API at the decision point
  std::uint64_t kv_bytes = 0;
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t tensors = 0;
  std::uint64_t host_bytes_per_tensor = 0;
  std::uint64_t granularity = 0;
  std::uint64_t headroom_bytes = 0;
  std::int64_t margin_bytes = 0;
  std::uint64_t deficit_bytes = 0;
  bool scratch_released = false;
  std::int64_t sizing_shift_bytes = 0;
  std::string_view same_start_flags;
  PostKvPeaks post_kv_peaks{};
};
void kv_committed(const KvCommittedEvent& event);

void kv_profile_written(int device, std::string_view path, std::uint64_t key_hash);

// A profile's fate on one device: `profile` is its path; the reason is the line logged.
void kv_profile_ignored(int device, std::string_view profile, std::string_view problem);
void kv_sizing_unchanged(int device, std::string_view profile, std::string_view reason);
void kv_sizing_missed(int device, std::string_view profile, std::string_view what);

// KVREMAP_DEFICIT=restart: the profile is written and the process exits with `exit_status`.
void kv_restart(int device, std::uint64_t deficit_bytes, int exit_status);

// The sizing query reported free memory shifted as the profile of an earlier start asked.
struct KvSizingAdjustedEvent {
  int device = 0;
  std::uint64_t query_index = 0;
  std::string_view phase;
  std::uint64_t driver_free = 0;
  std::uint64_t reported_free = 0;
  std::int64_t shift_bytes = 0;
  policy::SizingWhen sizing = policy::SizingWhen::learned;
  std::int64_t previous_margin_bytes = 0;
  std::int64_t previous_shift_bytes = 0;
  std::int64_t slack_bytes = 0;
  std::uint64_t target_kv_bytes = 0;
  std::uint64_t step_bytes = 0;
  std::string_view profile;
  std::string_view reason;
};
void kv_sizing_adjusted(const KvSizingAdjustedEvent& event);

}  // namespace kvremap::interpose::trace_events
