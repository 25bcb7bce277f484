// The KV deferral's events (cat "kv", KVREMAP_MODE=defer) as typed records, each read once from its args.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::trace {

// One category's line of "kv committed"'s post_kv_peaks.
struct KvPostKvPeak {
  std::string category;
  std::optional<std::uint64_t> at_kv_end;
  std::optional<std::uint64_t> peak;
  std::optional<std::uint64_t> peak_above;
};

// A "kv" event. A trace cut short, or written by another library version, may lack a field or type it
// differently: such a number is empty (callers print "?" or 0), such a string "".
struct KvEvent {
  enum class Kind {
    arena_reserved,
    arena_refused,
    deferred,
    nothing_deferred,
    commit_plan,
    committed,
    sizing_adjusted,
    profile_written,
    restart,
    serving_overflow,
    other,
  };
  EventRef event;
  Kind kind = Kind::other;
  std::string name;
  std::optional<std::int64_t> device;  // empty: about the whole process
  // "kv deferred"
  std::optional<std::uint64_t> regions;
  std::optional<std::uint64_t> tensor_bytes;
  std::optional<std::uint64_t> deferred_bytes;
  std::optional<std::uint64_t> scratch_bytes;
  std::optional<std::uint64_t> bytes;  // "kv serving overflow": the allocation carried on host memory
  // "kv commit plan" and "kv committed" ("kv arena reserved": granularity)
  std::optional<std::uint64_t> kv_bytes;
  std::optional<std::uint64_t> tensors;
  std::optional<std::uint64_t> device_bytes;
  std::optional<std::uint64_t> host_bytes;
  std::optional<std::uint64_t> host_bytes_per_tensor;
  std::optional<std::uint64_t> granularity;
  std::optional<std::uint64_t> headroom_bytes;
  std::optional<std::int64_t> margin_bytes;
  std::optional<std::uint64_t> deficit_bytes;
  std::optional<std::uint64_t> device_free_bytes;        // plan
  std::optional<std::uint64_t> post_kv_transient_bytes;  // plan
  std::string verdict;                                   // plan
  std::string headroom_source;                           // plan
  std::optional<std::int64_t> sizing_shift_bytes;        // committed
  std::string trigger;                                   // committed
  std::string same_start_flags;                          // committed
  std::vector<KvPostKvPeak> post_kv_peaks;               // committed, by category name
  bool has_post_kv_peaks = false;                        // committed: the object was there, maybe empty
  // "kv sizing adjusted"
  std::optional<std::int64_t> shift_bytes;
  std::string profile;
  std::string reason;  // "kv arena refused", "kv nothing deferred"
  std::string path;    // "kv profile written"
};

// The trace's "kv" events in file order.
std::vector<KvEvent> kv_events(const Trace& trace);

}  // namespace kvremap::trace
