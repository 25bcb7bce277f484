// The trace arguments of the reading commands: a directory stands for the *.json trace files directly in it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvremap::cli {

// `paths` with every directory replaced by the `*.json` files directly in it, sorted by name; other paths
// are kept as given (the reader names what is wrong with them). A directory that holds no such file, or
// cannot be listed, is one line on stderr naming it, and nullopt (exit status 2).
std::optional<std::vector<std::string>> expand_trace_paths(const char* command, const std::vector<std::string>& paths);

// One trace for a command that takes exactly one per argument (diff, what-if): a file as given, or the
// only trace in a directory; nullopt after one line on stderr when the directory holds none or several.
std::optional<std::string> expand_one_trace_path(const char* command, const std::string& path);

}  // namespace kvremap::cli
