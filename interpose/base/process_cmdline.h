// The command line that describes the engine: this process's as it started, or the root's that spawned it.
#pragma once

#include <string>
#include <vector>

namespace kvremap::interpose {

// /proc/self/cmdline split into arguments; empty when it cannot be read.
std::vector<std::string> own_command_line();

// At load, before the program runs (engines rename their processes with setproctitle, which
// overwrites /proc/self/cmdline, before any CUDA call): keeps this process's command line and, unless
// it is a Python multiprocessing child or adopts its ancestor's root (a line that names no engine
// below one that does: policy::adopts_root), hands it to every descendant in KVREMAP_ENGINE_ROOT
// (policy/engine_root.h).
void capture_command_line_at_load();

// The command line that describes the engine: the one this process started with, or, where its own
// names no engine, the root's that an ancestor naming one handed down (a Ray worker below `vllm
// serve`); for a Python multiprocessing child (spawn, forkserver), whose own line names only the
// bootstrap, the root's that an ancestor handed down, else the nearest ancestor's in /proc that is not
// a multiprocessing child's. A handed-down root is trusted only when that ancestor's pid and start time
// match. Empty when nothing can be read.
std::vector<std::string> engine_command_line();

// Whether this process is the root of an engine's tree: started by exec (not a multiprocessing child),
// adopting no ancestor's line, and its own line names an engine (policy::named_engine). Decided at load.
bool started_as_engine_root();

}  // namespace kvremap::interpose
