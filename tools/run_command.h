// `kvremap run`: starts a command under libkvremap.so, forwards signals to it, restarts it once after a KV deficit, and
// summarises its traces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvremap::run {

struct RunOptions {
  std::vector<std::string> command;  // argv of the command; argv[0] is looked up in PATH as execvp does
  std::string trace_dir;             // --trace-dir; empty: $KVREMAP_TRACE_DIR, else a kept run directory
  bool discard_traces = false;       // --discard-traces: without a named directory, a temporary one removed at the end
  std::string profile_dir;           // --profile-dir; empty: the environment's KVREMAP_PROFILE_DIR, if any
  std::string library;               // libkvremap.so to preload
  // `kvremap size`: once every process that deferred its KV cache has committed it and written its profile,
  // and nothing changed for `settle_ms`, the command is sent SIGTERM (SIGKILL after `grace_ms`); no restart,
  // one line instead of the summary, status 0 when measured.
  bool sizing_run = false;
  int settle_ms = 2000;
  int grace_ms = 30000;
};

// The child's LD_PRELOAD: `existing`'s entries (separated by spaces or colons, as the dynamic loader
// reads them) in their order, then `library`, joined by ':'. A sanitizer runtime among them has to
// stay ahead of every other library, and another interposer of cudaMalloc (torch_memory_saver's
// preload library) ahead of kvremap (docs/kv-deferral.md, Stacked interposers). When entries already
// name `library`'s file (compared by real path), the first of them is kept, once, after all the
// others (loading it twice would run two interposers); `existing` is returned unchanged when it is
// already there alone.
std::string compose_ld_preload(std::string_view existing, const std::string& library);

// Runs the whole subcommand (`run`, or `size` with options.sizing_run) and returns kvremap's exit status (the command's, see tools/exit_status.h).
// Prints its own one-line errors, the restart line and the summary on stderr.
int run_command(const RunOptions& options);

}  // namespace kvremap::run
