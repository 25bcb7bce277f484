// Minimal JSON text helpers for the trace writer (the library never parses JSON, only writes it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvremap::interpose {

// Appends `text` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view text);
// "0x7f12a0000000"
std::string hex_pointer(std::uint64_t value);

}  // namespace kvremap::interpose
