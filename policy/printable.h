// Text safe to print on a terminal or in a log: control bytes shown as \xNN escapes.
#pragma once

#include <string>
#include <string_view>

namespace kvremap::policy {

// `text` with every byte below 0x20 and 0x7f written as `\xNN` (two lowercase hex digits); every
// other byte, UTF-8 sequences included, unchanged. A string from a trace or a path printed through
// it cannot start a line of its own or send a terminal escape sequence.
std::string printable(std::string_view text);

}  // namespace kvremap::policy
