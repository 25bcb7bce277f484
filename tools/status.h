// `kvremap status`: the engines running under kvremap on this machine, from the metrics file they write.
#pragma once

#include <string>

namespace kvremap::cli {

// Prints one table of the processes in `metrics_file` (KVREMAP_METRICS_FILE) that still run — pid, title,
// device, phase, KV on the device, on scratch and on host memory, serving overflows — once, or every
// `watch_seconds` (> 0) until interrupted. Returns the exit status: 0, or 2 when the file is not named or
// cannot be read.
int run_status(const std::string& metrics_file, double watch_seconds);

}  // namespace kvremap::cli
