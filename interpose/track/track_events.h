// The tracker's trace events: header, device metadata, counter samples, hot-line formatting and the summary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "interpose/base/hot_path.h"
#include "interpose/trace/event_line.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracking_state.h"

namespace kvremap::interpose::tracker_detail {

// The process id, cached (getpid() is a system call); refreshed in a forked child.
int process_id();
void refresh_process_id();
// The head of a cold event in a reused per-thread string; finish one event before starting another.
std::string& event_head(const char* ph, const char* cat, std::string_view name);
// The HotFormatter of this trace's alloc/free records (set on the writer when the trace opens).
std::size_t format_hot_record(const HotLine& line, char* out, std::size_t capacity);
// An allocation's or a free's line, formatted now and written as a cold event: with "caller" when
// given, and `full_bytes` as its size when that is above HotRecord::kMaxBytes.
void emit_hot_line(const HotRecord& record, const char* caller, const std::uint64_t* full_bytes = nullptr);
void emit(const EventLine& e);
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
std::string options_json();
// Creates the trace file with its header, when tracing is on.
void open_trace();
std::string summary_json(const char* reason);

}  // namespace kvremap::interpose::tracker_detail
