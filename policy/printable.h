// Text as it may appear inside one line of a message: control characters escaped.
#pragma once

#include <string>
#include <string_view>

namespace kvremap::policy {

// `text` with every byte below 0x20 and 0x7f written as \xNN, so a user's value or path can neither
// break a message into two lines nor send terminal escapes.
std::string printable(std::string_view text);

}  // namespace kvremap::policy
