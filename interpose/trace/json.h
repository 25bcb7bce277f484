// Minimal JSON text helpers for the trace writer (the library never parses JSON, only writes it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvremap::interpose {

// Appends `text` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view text);
// "0x7f12a0000000" (with the quotes)
std::string hex_pointer(std::uint64_t value);

// Allocation-free appends for the hot trace events.
void append_uint(std::string& out, std::uint64_t value);
void append_hex_pointer(std::string& out, std::uint64_t value);
// Microseconds with three decimals from integer nanoseconds: "1234.567".
void append_us_from_ns(std::string& out, std::uint64_t ns);

}  // namespace kvremap::interpose
