// `kvremap report`: renders one process's trace as a plain-text memory summary.
#pragma once

#include <cstdint>
#include <string>

#include "tools/trace/trace_reader.h"

namespace kvremap::report {

// "512 B", "1.50 KiB", "40.00 GiB": binary units, two decimals, as engines print their budgets.
std::string format_bytes(std::uint64_t bytes);
// Like format_bytes with an explicit sign ("+1.00 GiB", "-512 B", "0 B") for differences.
std::string format_signed_bytes(std::int64_t bytes);

// The whole report for one trace: process identity, how it ended, per-device category table (from
// the summary when the process exited cleanly, else replayed from events, with a cross-check when
// both exist), checkpoints, phases, capture windows, graph-exec and module totals. Pure: no I/O.
std::string render_report(const trace::Trace& trace);

}  // namespace kvremap::report
