// A fixed-size, allocation-free JSON line builder for the hot trace events (allocations, frees, counters).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kvremap::interpose {

// Appends pieces into a buffer: its own (on the stack) or one the caller hands it, so a formatter
// can write straight into its destination. Literal pieces are copied with their compile-time
// length; numbers are formatted by hand, in place. If the line would not fit, it is marked
// overflowed and must be dropped (only escaped strings of unbounded length can cause that).
class EventLine {
 public:
  EventLine() : begin_(buffer_), end_(buffer_), limit_(buffer_ + sizeof buffer_) {}
  EventLine(char* out, std::size_t capacity) : begin_(out), end_(out), limit_(out + capacity) {}
  EventLine(const EventLine&) = delete;
  EventLine& operator=(const EventLine&) = delete;

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
    // Digits written from the last backwards, two per step from a table: no temporary, no copy.
    static constexpr char kPairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    std::size_t n = 1;
    for (std::uint64_t v = value; v >= 10; v /= 10) ++n;
    if (n > room()) return overflow();
    char* p = end_ + n;
    end_ = p;
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
    return *this;
  }
  EventLine& hex(std::uint64_t value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::size_t n = 1;
    for (std::uint64_t v = value >> 4; v; v >>= 4) ++n;
    if (n + 4 > room()) return overflow();
    *end_++ = '"';
    *end_++ = '0';
    *end_++ = 'x';
    for (char* p = end_ + n; p != end_; value >>= 4) *--p = kDigits[value & 15];
    end_ += n;
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
  std::string_view view() const { return {begin_, static_cast<std::size_t>(end_ - begin_)}; }

 private:
  std::size_t room() const { return static_cast<std::size_t>(limit_ - end_); }
  EventLine& overflow() {
    overflowed_ = true;
    return *this;
  }

  char buffer_[768];  // used when no output buffer is given
  char* begin_;
  char* end_;
  char* limit_;
  bool overflowed_ = false;
};

}  // namespace kvremap::interpose
