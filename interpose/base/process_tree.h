// This process's place in its process tree, read from /proc: parents, pids with their start times.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/engine_root.h"

namespace kvremap::interpose {

// The parent's pid of process `pid`, or "" when it cannot be read.
std::string parent_of(const std::string& pid);

// Process `pid`'s pid and start time, or nullopt.
std::optional<policy::ProcessStamp> stamp_of(const std::string& pid);

// This process's ancestors, its parent first, up to init (32 levels at most).
std::vector<policy::ProcessStamp> ancestors();

}  // namespace kvremap::interpose
