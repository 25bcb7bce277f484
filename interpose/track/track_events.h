// What the tracker samples for its trace events: first sight of a device, counter samples, the summary's figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "interpose/base/hot_path.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracking_state.h"

namespace kvremap::interpose::tracker_detail {

// First sight of a device: its total memory in a metadata event.
void first_sight_of_device(int device);
// `st` is S(), passed by hooks that already hold it (each S() is an atomic load and a branch).
inline void see_device(State& st, int device) {
  if (KVREMAP_UNLIKELY(!st.devices[static_cast<std::size_t>(device)].seen.load(std::memory_order_acquire)))
    first_sight_of_device(device);
}
inline void see_device(int device) { see_device(S(), device); }
// A counter sample of a device's live bytes per category (throttled unless `force`), stamped
// `now_ticks` (the hook's own timestamp, so a hot path reads the clock once).
void emit_counter_sample(int device, bool force, std::uint64_t now_ticks);
// Inline: on the allocation path almost every call ends at the first comparison.
inline void emit_counter(State& st, int device, bool force, std::uint64_t now_ticks) {
  if (KVREMAP_LIKELY(!force && now_ticks < st.devices[static_cast<std::size_t>(device)].next_counter_ticks.load(
                                               std::memory_order_relaxed)))
    return;
  emit_counter_sample(device, force, now_ticks);
}
void emit_counter(int device, bool force);
void emit_all_counters();
// The summary that closes the trace, from the figures tracked until now.
std::string summary_json(const char* reason, int hooks_in_flight = 0);

}  // namespace kvremap::interpose::tracker_detail
