// The CLI's text output: strings from traces, paths and error texts shown without control bytes.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "policy/printable.h"

namespace kvremap::cli {

// A string argument through policy::printable, anything else as it is. The format strings are the
// tool's own: their newlines stay, while a newline or an escape sequence inside a trace's cmdline,
// caller or reason, or inside a file name, is shown as \xNN and cannot forge a line or drive the
// terminal.
template <typename T>
decltype(auto) shown(T&& value) {
  if constexpr (std::is_convertible_v<const std::remove_cvref_t<T>&, std::string_view>) {
    return policy::printable(std::string_view(value));
  } else {
    return std::forward<T>(value);
  }
}
template <typename T>
using Shown = std::remove_cvref_t<decltype(shown(std::declval<T>()))>;

// fmt::format_to onto `out` with every string argument shown(); the format string is checked at
// compile time against the shown types.
template <typename... Args>
void append(std::string& out, fmt::format_string<Shown<Args>...> format, Args&&... args) {
  std::tuple<Shown<Args>...> values(shown(std::forward<Args>(args))...);
  std::apply(
      [&](const auto&... value) {
        fmt::vformat_to(std::back_inserter(out), fmt::string_view(format), fmt::make_format_args(value...));
      },
      values);
}

// fmt::format with every string argument shown().
template <typename... Args>
std::string text(fmt::format_string<Shown<Args>...> format, Args&&... args) {
  std::string out;
  append<Args...>(out, format, std::forward<Args>(args)...);
  return out;
}

// One line on stderr, "kvremap <command>: <message>", the message shown() whole: it is one line, so
// any newline in it came from a path or a trace.
inline void say(std::string_view command, std::string_view message) {
  std::fprintf(stderr, "kvremap %s: %s\n", std::string(command).c_str(), policy::printable(message).c_str());
}

}  // namespace kvremap::cli
