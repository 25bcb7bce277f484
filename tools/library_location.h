// Where `kvremap run` and `kvremap libpath` find libkvremap.so: KVREMAP_LIBRARY, else beside the tool
// itself (an installed tree's library directory, then a build tree's), never a path compiled in.
#pragma once

#include <string>
#include <vector>

namespace kvremap::cli {

// The environment variable that names the library for the tool (the library itself ignores it).
inline constexpr const char* kLibraryVariable = "KVREMAP_LIBRARY";

struct LibraryLocation {
  std::string path;     // the library, lexically normal; empty when `problem` says why
  std::string problem;  // one line naming what was wrong and what would work
};

// What keeps `path` from being a libkvremap.so to preload, as a phrase that completes "'PATH' ...", or
// empty when it is one: a regular file, an ELF shared object (ET_DYN) of this tool's class and byte
// order whose dynamic symbol table defines kvremap's entry point kvremap_version. Read from the file's
// ELF headers, never by loading it (the library's constructors would interpose on this tool).
std::string library_problem(const std::string& path);

// `variable`: KVREMAP_LIBRARY's value, or null when unset (empty is unset). `tool`: this executable's own path.
// `beside_tool`: the library's paths relative to the tool's directory, in the order to try.
LibraryLocation locate_library(const char* variable, const std::string& tool,
                               const std::vector<std::string>& beside_tool);

// The same for the running tool: its path from /proc/self/exe, the relative paths this build knows.
LibraryLocation locate_own_library();

}  // namespace kvremap::cli
