// Finds the libkvremap.so the kvremap tool preloads: an explicit KVREMAP_LIBRARY, else the library
// beside the tool in the tree it was installed in (or built in), so a moved tree keeps working.
#include "tools/library_location.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace kvremap::cli {
namespace fs = std::filesystem;

LibraryLocation locate_library(const char* variable, const std::string& tool,
                               const std::vector<std::string>& beside_tool) {
  std::error_code ec;
  if (variable != nullptr && *variable != '\0') {
    const std::string named = variable;
    if (!fs::is_regular_file(named, ec))
      return {"", std::string(kLibraryVariable) + "='" + named +
                      "' is not a file: name a libkvremap.so, or unset it to use the one installed beside kvremap"};
    return {fs::absolute(named, ec).lexically_normal().string(), ""};
  }
  const fs::path directory = fs::path(tool).parent_path();
  std::string looked;
  for (const std::string& relative : beside_tool) {
    const fs::path candidate = (directory / relative).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return {candidate.string(), ""};
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  return {"", "no libkvremap.so beside this kvremap (looked for " + looked + "); set " + kLibraryVariable +
                  " to the library, or pass --library PATH to kvremap run"};
}

LibraryLocation locate_own_library() {
  std::error_code ec;
  const fs::path tool = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {"", "cannot read /proc/self/exe (" + ec.message() + "); set " + kLibraryVariable + " to the library"};
  // KVREMAP_LIBDIR_FROM_BINDIR: the installed layout (cmake/InstallDirs.cmake); the build tree keeps
  // the tool in bin/ and the library in lib/.
  return locate_library(std::getenv(kLibraryVariable), tool.string(),
                        {KVREMAP_LIBDIR_FROM_BINDIR "/" KVREMAP_LIBRARY_SONAME, "../lib/" KVREMAP_LIBRARY_SONAME});
}

}  // namespace kvremap::cli
