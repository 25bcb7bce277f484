// `kvremap run`'s closing summary: per process and device, what its KV cache asked for and got, from the trace's "kv"
// events.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/trace/trace_reader.h"

namespace kvremap::run {

// One trace file that appeared in the trace directory during a run.
struct ProcessTrace {
  int attempt = 1;  // 1, or 2 after a restart
  std::string path;
  std::optional<trace::Trace> trace;  // empty when the file could not be read
  std::string read_error;             // then why, one line naming the file
};

// The summary, one line per process and device (a process with no KV device, or an unreadable trace,
// is one line), each starting "kvremap run: " and ending in '\n'; ordered by attempt, then by the
// process's start. Pure: no I/O, and missing or mistyped event fields print as "?" rather than throw.
std::string render_run_summary(std::vector<ProcessTrace> traces);

// One line per distinct `option error` event of the traces (an option the library fell back from, say one the
// engine set in its own environment), naming the processes whose trace holds it; empty when none.
std::string render_option_fallbacks(const std::vector<ProcessTrace>& traces);

}  // namespace kvremap::run
