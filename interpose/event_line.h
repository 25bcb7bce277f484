// A fixed-size, allocation-free JSON line builder for the hot trace events (allocations, frees, counters).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kvremap::interpose {

// Appends pieces into a stack buffer. Literal pieces are copied with their compile-time length;
// numbers are formatted by hand. If the line would not fit, it is marked overflowed and must be
// dropped (only escaped strings of unbounded length can cause that).
class EventLine {
 public:
  template <std::size_t N>
  [[gnu::always_inline]] EventLine& lit(const char (&text)[N]) {
    return raw(text, N - 1);
  }
  // Always inlined: with a literal's constant length the copy becomes a few moves.
  [[gnu::always_inline]] EventLine& raw(const char* text, std::size_t n) {
    if (n > room()) return overflow();
    std::memcpy(end_, text, n);
    end_ += n;
    return *this;
  }
  EventLine& raw(std::string_view text) { return raw(text.data(), text.size()); }
  EventLine& u64(std::uint64_t value) {
    // Two digits per step from a table: half the divisions of a digit loop.
    static constexpr char kPairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char digits[20];
    char* p = digits + sizeof digits;
    while (value >= 100) {
      const unsigned pair = static_cast<unsigned>(value % 100) * 2;
      value /= 100;
      *--p = kPairs[pair + 1];
      *--p = kPairs[pair];
    }
    if (value >= 10) {
      const unsigned pair = static_cast<unsigned>(value) * 2;
      *--p = kPairs[pair + 1];
      *--p = kPairs[pair];
    } else {
      *--p = static_cast<char>('0' + value);
    }
    return raw(p, static_cast<std::size_t>(digits + sizeof digits - p));
  }
  EventLine& hex(std::uint64_t value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    char digits[16];
    int n = 0;
    do {
      digits[n++] = kDigits[value & 15];
      value >>= 4;
    } while (value);
    if (static_cast<std::size_t>(n) + 4 > room()) return overflow();
    *end_++ = '"';
    *end_++ = '0';
    *end_++ = 'x';
    while (n) *end_++ = digits[--n];
    *end_++ = '"';
    return *this;
  }
  // Microseconds with three decimals, from nanoseconds.
  EventLine& micros(std::uint64_t ns) {
    u64(ns / 1000);
    const unsigned frac = static_cast<unsigned>(ns % 1000);
    const char tail[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
    return raw(tail, 4);
  }
  // A quoted JSON string, escaped.
  EventLine& quoted(std::string_view text);

  bool overflowed() const { return overflowed_; }
  std::string_view view() const { return {buffer_, static_cast<std::size_t>(end_ - buffer_)}; }

 private:
  std::size_t room() const { return static_cast<std::size_t>(buffer_ + sizeof buffer_ - end_); }
  EventLine& overflow() {
    overflowed_ = true;
    return *this;
  }

  char buffer_[768];
  char* end_ = buffer_;
  bool overflowed_ = false;
};

}  // namespace kvremap::interpose
