// The exit statuses of the kvremap CLI, so scripts can tell a bad trace, a bad command line and a run's outcome apart.
#pragma once

#include "policy/options.h"

namespace kvremap::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitTraceProblem = 1;  // report/validate: a trace could not be read or breaks the schema
inline constexpr int kExitUsage = 2;         // a bad command line, a missing library, an unusable trace directory

// The library's status for "KV deficit: the profile is written, restart to be sized from it" (under
// KVREMAP_DEFICIT=restart). `kvremap run` starts the command once more when its first start exits
// with it.
inline constexpr int kExitDeficitRestart = policy::kExitRestartForProfile;

// `kvremap run` could not start the command, as shells report it: found but not executable (126),
// not found (127).
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;
// `kvremap run`'s status when the command was killed by signal N is kExitSignalBase + N, as shells report it.
inline constexpr int kExitSignalBase = 128;

}  // namespace kvremap::cli
