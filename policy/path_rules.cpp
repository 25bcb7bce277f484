// Checks a path's characters and lengths before kvremap opens or creates anything by that name.
#include "policy/path_rules.h"

namespace kvremap::policy {

namespace {

// The length of the control character at path[i], 0 when there is none: one byte for C0 and DEL,
// two for a C1 control in UTF-8 (0xC2 0x80..0x9F).
std::size_t control_length(std::string_view path, std::size_t i) {
  const auto byte = static_cast<unsigned char>(path[i]);
  if (byte < 0x20 || byte == 0x7f) return 1;
  if (byte == 0xc2 && i + 1 < path.size()) {
    const auto next = static_cast<unsigned char>(path[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return 2;
  }
  return 0;
}

}  // namespace

std::optional<std::string> path_problem(std::string_view path) {
  for (std::size_t i = 0; i < path.size(); ++i)
    if (control_length(path, i) != 0)
      return "holds a control character (byte " + std::to_string(i + 1) + " of " + std::to_string(path.size()) +
             ")";
  if (path.size() >= kPathMax)
    return "is " + std::to_string(path.size()) + " bytes long, over the " + std::to_string(kPathMax - 1) +
           " a path may have";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end - start > kNameMax)
      return "has a component of " + std::to_string(end - start) + " bytes (starting at byte " +
             std::to_string(start + 1) + "), over the " + std::to_string(kNameMax) + " a file name may have";
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace kvremap::policy
