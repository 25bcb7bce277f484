// `kvremap merge`: the ranks of one job in one Perfetto timeline, one process track each.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::merge {

struct Input {
  std::string path;
  trace::Header header;
  std::int64_t offset_us = 0;  // added to every timestamp of this trace
  std::int64_t pid = 0;        // the pid it has in the merged file (its own unless another input has it)
};

struct MergeResult {
  std::vector<Input> inputs;
  std::size_t events = 0;
  bool aligned_on_wall_clock = true;  // false: some header lacks start_unix_ns, all start at ts 0
};

// Reads only the header of a trace (throws TraceError like read_trace).
trace::Header read_header(const std::string& path);

// Writes one trace in the writer's line format: a header of its own (the earliest start_unix_ns,
// the highest schema version), then every event of every input in turn with its timestamps moved
// by the input's offset from the earliest wall-clock start, and its pid made unique. Each input's
// kvremap_trace header becomes a "kvremap_merged_process" metadata event and its summary gets
// cat "merged_summary", so that the file has one header and no summary, as `kvremap validate`
// requires. `progress` (may be empty) is made per input and passed to the reader.
using ProgressFactory = std::function<std::function<void(std::uint64_t, std::uint64_t)>(const std::string& path)>;
MergeResult merge_traces(const std::vector<std::string>& paths, std::ostream& out, const ProgressFactory& progress);

}  // namespace kvremap::merge
