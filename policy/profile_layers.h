// KVREMAP_PROFILE_PATH: the read-only profile directories searched after the writable KVREMAP_PROFILE_DIR.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

inline constexpr std::string_view kProfilePathVariable = "KVREMAP_PROFILE_PATH";

// The directories of a KVREMAP_PROFILE_PATH value, in order: colon-separated, empty entries ignored.
std::vector<std::string> profile_path_entries(std::string_view value);

// The first entry of `value` that breaks the path rules (policy/path_rules.h) or is not absolute, as one
// line naming the variable, the entry and what would work; nothing when every entry is usable.
std::optional<std::string> profile_path_problem(std::string_view value);

}  // namespace kvremap::policy
