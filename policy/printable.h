// Text from outside (paths, file contents, arguments) made safe to print on one line of a log or terminal.
#pragma once

#include <string>
#include <string_view>

namespace kvremap::policy {

// `text` with every byte that could break a line or drive a terminal written as an escape: C0 controls
// and DEL as \n, \t, \r or \xNN, C1 controls (U+0080..U+009F) and bytes that are not valid UTF-8 as
// \xNN per byte, and a backslash as \\ so that an escape in the output always means an escaped byte.
// Valid UTF-8 otherwise passes unchanged (a path in any language stays readable).
std::string printable_text(std::string_view text);

}  // namespace kvremap::policy
