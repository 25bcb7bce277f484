// The command line that describes the engine: this process's, or its nearest non-multiprocessing ancestor's.
#pragma once

#include <string>
#include <vector>

namespace kvremap::interpose {

// /proc/self/cmdline split into arguments; empty when it cannot be read.
std::vector<std::string> own_command_line();

// The same; for a Python multiprocessing child (spawn, forkserver),
// whose own line names only the multiprocessing bootstrap, the line of the nearest ancestor that is
// not one. Empty when nothing can be read.
std::vector<std::string> engine_command_line();

}  // namespace kvremap::interpose
