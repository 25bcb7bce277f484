// Control bytes, C1 controls and invalid UTF-8 as \xNN escapes (policy/printable.h).
#include "policy/printable.h"

#include <cstddef>
#include <cstdint>

namespace kvremap::policy {
namespace {

void append_hex(std::string& out, unsigned char byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

// The length of the valid UTF-8 sequence starting at text[i] (2 to 4), or 0 when there is none
// (overlong forms, surrogates and code points past U+10FFFF are not valid). `code` gets its code point.
std::size_t utf8_sequence(std::string_view text, std::size_t i, std::uint32_t* code) {
  const auto lead = static_cast<unsigned char>(text[i]);
  std::size_t length = 0;
  std::uint32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2, min = 0x80, *code = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3, min = 0x800, *code = lead & 0x0fu;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4, min = 0x10000, *code = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    *code = (*code << 6) | (next & 0x3fu);
  }
  if (*code < min || *code > 0x10ffff || (*code >= 0xd800 && *code <= 0xdfff)) return 0;
  return length;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80) {
      if (byte < 0x20 || byte == 0x7f) {
        append_hex(out, byte);
      } else {
        out += c;
      }
      ++i;
      continue;
    }
    std::uint32_t code = 0;
    const std::size_t length = utf8_sequence(text, i, &code);
    if (length == 0 || (code >= 0x80 && code <= 0x9f)) {
      // Invalid, or a C1 control (U+009B is a terminal's CSI): each byte escaped on its own.
      const std::size_t bytes = length == 0 ? 1 : length;
      for (std::size_t k = 0; k < bytes; ++k) append_hex(out, static_cast<unsigned char>(text[i + k]));
      i += bytes;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace kvremap::policy
