// Expands directories among the reading commands' trace arguments into the trace files in them.
#include "tools/trace_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "tools/text.h"

namespace kvremap::cli {

namespace fs = std::filesystem;

namespace {

// The *.json regular files directly in `dir`, sorted; nullopt after the line on stderr when there are none.
std::optional<std::vector<std::string>> traces_in(const char* command, const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_error;
    if (it->path().extension() == ".json" && it->is_regular_file(type_error)) files.push_back(it->path().string());
  }
  if (ec) {
    say(command, dir + ": cannot list the directory: " + ec.message());
    return std::nullopt;
  }
  if (files.empty()) {
    say(command, dir + ": the directory holds no trace files (*.json); name a directory kvremap run wrote, or trace files");
    return std::nullopt;
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::optional<std::vector<std::string>> expand_trace_paths(const char* command, const std::vector<std::string>& paths) {
  std::vector<std::string> expanded;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      expanded.push_back(path);
      continue;
    }
    const auto files = traces_in(command, path);
    if (!files) return std::nullopt;
    expanded.insert(expanded.end(), files->begin(), files->end());
  }
  return expanded;
}

std::optional<std::string> expand_one_trace_path(const char* command, const std::string& path) {
  const auto files = expand_trace_paths(command, {path});
  if (!files) return std::nullopt;
  if (files->size() != 1) {
    say(command, text("{}: the directory holds {} trace files; kvremap {} takes one trace there: name one of them",
                      path, files->size(), command));
    return std::nullopt;
  }
  return files->front();
}

}  // namespace kvremap::cli
