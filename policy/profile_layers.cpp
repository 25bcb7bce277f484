// Splitting and checking KVREMAP_PROFILE_PATH, the read-only profile layers.
#include "policy/profile_layers.h"

#include "policy/path_rules.h"
#include "policy/printable.h"

namespace kvremap::policy {

std::vector<std::string> profile_path_entries(std::string_view value) {
  std::vector<std::string> out;
  while (true) {
    const std::size_t colon = value.find(':');
    const std::string_view entry = value.substr(0, colon);
    if (!entry.empty()) out.emplace_back(entry);
    if (colon == std::string_view::npos) break;
    value.remove_prefix(colon + 1);
  }
  return out;
}

std::optional<std::string> profile_path_problem(std::string_view value) {
  for (const std::string& entry : profile_path_entries(value)) {
    const std::string start = "kvremap: " + std::string(kProfilePathVariable) + " entry '" + printable(entry) + "' ";
    if (const auto bad = path_problem(entry))
      return start + *bad + ": expected " + std::string(kPathRulesSummary) + "; the other entries are still searched";
    // Relative to what? The engine's working directory is nobody's choice of where profiles live.
    if (!entry.starts_with('/'))
      return start + "is not an absolute path: expected directories such as /opt/kvremap-profiles, separated by ':'";
  }
  return std::nullopt;
}

}  // namespace kvremap::policy
