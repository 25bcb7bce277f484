// The character and length rules every path kvremap reads from the environment or the command line obeys.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

// Linux's limits (linux/limits.h): a whole path, its terminating NUL included, and one component.
inline constexpr std::size_t kPathMax = 4096;
inline constexpr std::size_t kNameMax = 255;

// What is wrong with `path` as a path to open or create, or nothing when it obeys the rules: no control
// character (C0, DEL, or a C1 control in UTF-8: a name holding one cannot be typed, shown or told apart
// from another), at most kPathMax - 1 bytes in all and kNameMax bytes per component. The answer is a
// phrase such as "holds a control character (byte 4)" that completes "VARIABLE='value' ...".
std::optional<std::string> path_problem(std::string_view path);

// What a path that obeys the rules looks like, for the end of an error line.
inline constexpr std::string_view kPathRulesSummary =
    "a path without control characters, at most 4095 bytes, each component at most 255 bytes";

}  // namespace kvremap::policy
