// How hot records (allocations, frees, counter samples) become trace lines.
#pragma once

#include <cstddef>
#include <cstdint>

#include "interpose/trace/trace_writer.h"

namespace kvremap::interpose::trace_events {

// The writer's HotFormatter: one record's line into `out`; 0 when it has none (a counter without
// its words) or it would not fit.
std::size_t format_hot_record(const HotLine& line, char* out, std::size_t capacity);
// An allocation's or a free's line, formatted now and written as a cold event: with "caller" when
// given, and `full_bytes` as its size when that is above HotRecord::kMaxBytes.
void hot_line(const HotRecord& record, const char* caller, const std::uint64_t* full_bytes = nullptr);

}  // namespace kvremap::interpose::trace_events
