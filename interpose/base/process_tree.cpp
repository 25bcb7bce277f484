// This process's place in its process tree, read from /proc: parents, pids with their start times.
#include "interpose/base/process_tree.h"

#include <unistd.h>

#include <fstream>
#include <iterator>

namespace kvremap::interpose {
namespace {

std::string stat_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

std::string parent_of(const std::string& pid) {
  const auto parent = policy::parent_from_stat(stat_of(pid));
  return parent ? std::to_string(*parent) : "";
}

std::optional<policy::ProcessStamp> stamp_of(const std::string& pid) {
  std::int64_t number = 0;
  try {
    number = std::stoll(pid);
  } catch (...) {
    return std::nullopt;
  }
  return policy::stamp_from_stat(number, stat_of(pid));
}

std::vector<policy::ProcessStamp> ancestors() {
  std::vector<policy::ProcessStamp> chain;
  std::string pid = parent_of(std::to_string(::getpid()));
  for (int level = 0; level < 32 && !pid.empty() && pid != "0"; ++level) {
    const auto stamp = stamp_of(pid);
    if (!stamp) break;
    chain.push_back(*stamp);
    pid = parent_of(pid);
  }
  return chain;
}

}  // namespace kvremap::interpose
