// `kvremap run`: starts a command under libkvremap.so, forwards signals to it, restarts it once after a KV deficit, and
// summarises its traces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvremap::run {

struct RunOptions {
  std::vector<std::string> command;  // argv of the command; argv[0] is looked up in PATH as execvp does
  std::string trace_dir;             // --trace-dir; empty: $KVREMAP_TRACE_DIR, else a private directory
  std::string profile_dir;           // --profile-dir; empty: the environment's KVREMAP_PROFILE_DIR, if any
  std::string library;               // libkvremap.so to preload
};

// The child's LD_PRELOAD: `existing`'s entries (separated by spaces or colons, as the dynamic loader
// reads them) in their order, then `library`, joined by ':'. A sanitizer runtime among them has to
// stay ahead of every other library, and another interposer of cudaMalloc (torch_memory_saver's
// preload library) ahead of kvremap (docs/kv-deferral.md, Stacked interposers). When entries already
// name `library`'s file (compared by real path), the first of them is kept, once, after all the
// others (loading it twice would run two interposers); `existing` is returned unchanged when it is
// already there alone.
std::string compose_ld_preload(std::string_view existing, const std::string& library);

// Runs the whole subcommand and returns kvremap's exit status (the command's, see tools/exit_status.h).
// Prints its own one-line errors, the restart line and the summary on stderr.
int run_command(const RunOptions& options);

}  // namespace kvremap::run
