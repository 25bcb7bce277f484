// JSON string escaping and pointer formatting for trace events.
#include "interpose/trace/json.h"

#include <charconv>
#include <cstdio>

namespace kvremap::interpose {

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string hex_pointer(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"0x%llx\"", static_cast<unsigned long long>(value));
  return buf;
}

void append_uint(std::string& out, std::uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;  // 24 characters always hold a 64-bit value
  out.append(buf, end);
}

void append_hex_pointer(std::string& out, std::uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, 16);
  (void)ec;
  out += "\"0x";
  out.append(buf, end);
  out += '"';
}

void append_us_from_ns(std::string& out, std::uint64_t ns) {
  append_uint(out, ns / 1000);
  const unsigned frac = static_cast<unsigned>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out.append(digits, 4);
}

}  // namespace kvremap::interpose

#include "interpose/trace/event_line.h"

namespace kvremap::interpose {

EventLine& EventLine::quoted(std::string_view text) {
  std::string escaped;
  append_json_string(escaped, text);
  return raw(escaped);
}

}  // namespace kvremap::interpose
