// The trace's process, memory and capture events, one typed function each (KV events: kv_events.h).
#pragma once

// trace/ is the only part of the library that writes JSON: the layers above hand these functions
// plain figures, and docs/trace-format.md describes what each one writes.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/events.h"
#include "policy/phases.h"
#include "policy/trace_schema.h"

namespace kvremap::interpose::trace_events {

using policy::kCategoryCount;

// Creates this process's trace file (kvremap-HOST-PID[.N].json in KVREMAP_TRACE_DIR) with its
// header and one "option error" event per problem the options had; logs and leaves tracing off
// when no file can be created.
void open_trace();

// First sight of a device: its total memory, as a metadata event.
void device_seen(int device, std::uint64_t total_bytes);

// Tracking turned itself off after an internal failure.
void tracking_disabled(std::string_view reason);

// The phase inference moved a device to another phase.
void phase_changed(int device, policy::Phase from, policy::Phase to, std::string_view reason);

// A driver object that holds device memory from its creation to its destruction.
enum class HeldObject : std::uint8_t { graph_exec, module };
void held_object_created(HeldObject kind, std::string_view api, std::uint64_t key, std::uint64_t bytes, int device);
void held_object_destroyed(HeldObject kind, std::string_view api, std::uint64_t key, std::uint64_t bytes, int device);

// A live allocation moved to another category: a free in the old one and an allocation in the new
// one, so replaying the events gives the summary's bytes per category. `phase` stamps the allocation.
void reclassified(std::uint64_t ptr, std::uint64_t bytes, int device, policy::Category from, policy::Category to,
                  policy::Phase phase);

// A memory query (cudaMemGetInfo, cuMemGetInfo): what the driver said and what the engine was told.
// Kept by the tracker for the summary's "checkpoints".
struct MemoryQuery {
  std::uint64_t index = 0;
  std::string api;
  int device = 0;
  std::uint64_t driver_free = 0;
  std::uint64_t driver_total = 0;
  std::uint64_t returned_free = 0;
  std::uint64_t returned_total = 0;
  policy::Phase phase = policy::Phase::init;
  std::uint64_t ts_ns = 0;  // trace time
};
void memory_query(const MemoryQuery& query);

// A stream capture that ended. A slice on the capturing thread's track, or, when it would end inside
// a window that began after it on that track (slices must nest), an async begin/end pair.
struct CaptureWindow {
  std::uint64_t id = 0;
  std::uint64_t stream = 0;
  int mode = 0;  // cudaStreamCaptureMode: 0 global, 1 thread-local, 2 relaxed
  bool ok = true;
  std::uint64_t allocated_bytes = 0;
  int tid = 0;
  std::uint64_t begin_ns = 0;  // trace time
  std::uint64_t end_ns = 0;
  bool interleaved = false;
};
void capture_ended(const CaptureWindow& window);

// What was live when a hook returned an out-of-memory error (docs/trace-format.md).
struct CallerBytes {
  std::string caller;  // empty: unknown
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
};
struct OomSnapshot {
  int device = 0;
  policy::Phase phase = policy::Phase::init;
  std::string_view api;
  std::uint64_t requested_bytes = 0;
  std::string_view caller;                   // empty: not resolved
  std::optional<std::uint64_t> device_free_bytes;  // empty: the driver could not say
  std::array<std::uint64_t, kCategoryCount> live_bytes{};
  std::vector<CallerBytes> top_callers;      // largest first, at most the snapshot's limit
};
void oom_snapshot(const OomSnapshot& snapshot);

// The summary that closes the trace (returned, for TraceWriter::close).
struct CategorySummary {
  std::int64_t live_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::uint64_t peak_ts_ns = 0;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
};
struct DeviceSummary {
  int device = 0;
  std::uint64_t total_bytes = 0;
  std::array<CategorySummary, kCategoryCount> categories{};
};
struct Summary {
  std::string_view exit;  // "atexit", "SIGTERM", …
  std::vector<DeviceSummary> devices;
  std::vector<MemoryQuery> checkpoints;
  std::uint64_t captures = 0;
  std::uint64_t graph_launches = 0;
  std::uint64_t kernel_launches = 0;
  std::uint64_t module_loads = 0;
  std::uint64_t routed_lookups = 0;
  std::uint64_t hooks_in_flight = 0;  // threads still inside a hook when the exit's wait ended
};
std::string summary(const Summary& summary);

}  // namespace kvremap::interpose::trace_events
