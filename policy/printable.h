// Text safe to print on a terminal or in a log: control bytes shown as \xNN escapes.
#pragma once

#include <string>
#include <string_view>

namespace kvremap::policy {

// `text` with every byte that could break a line or drive a terminal written as `\xNN` (two lowercase
// hex digits): C0 controls and DEL, the bytes of a C1 control (U+0080..U+009F; U+009B is a terminal's
// CSI) and every byte that is not part of valid UTF-8. Everything else — printable ASCII and valid
// UTF-8 — is unchanged, so a path in any language stays readable. A string from a trace, a profile
// or the command line printed through it cannot start a line of its own or send a terminal escape.
std::string printable(std::string_view text);

}  // namespace kvremap::policy
