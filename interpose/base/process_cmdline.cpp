// Reads command lines from /proc, walking up past Python multiprocessing children to the engine's own.
#include "interpose/base/process_cmdline.h"

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "policy/engine.h"

namespace kvremap::interpose {
namespace {

std::vector<std::string> cmdline_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return policy::split_cmdline(raw);
}

// The parent's pid from /proc/<pid>/stat: the field after the parenthesised command name.
std::string parent_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 1));
  std::string state, ppid;
  rest >> state >> ppid;
  return ppid;
}

}  // namespace

std::vector<std::string> own_command_line() { return cmdline_of(std::to_string(::getpid())); }

std::vector<std::string> engine_command_line() {
  std::string pid = std::to_string(::getpid());
  std::vector<std::string> argv = cmdline_of(pid);
  // vLLM's engine core and workers, SGLang's schedulers: a few levels at most.
  for (int level = 0; level < 8 && policy::is_multiprocessing_child(argv); ++level) {
    pid = parent_of(pid);
    if (pid.empty() || pid == "0") break;
    std::vector<std::string> parent = cmdline_of(pid);
    if (parent.empty()) break;
    argv = std::move(parent);
  }
  return argv;
}

}  // namespace kvremap::interpose
