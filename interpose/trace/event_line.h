// A fixed-size, allocation-free JSON line builder for the hot trace events (allocations, frees, counters).
#pragma once

#include <bit>
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
  // The first `n` bytes of a fixed-size buffer: when there is room for all N, all N are copied (a
  // copy of constant size is a few vector moves rather than a call) and the line ends after n.
  template <std::size_t N>
  [[gnu::always_inline]] EventLine& padded(const char (&text)[N], std::size_t n) {
    if (N > room()) return raw(text, n);
    std::memcpy(end_, text, N);
    end_ += n;
    return *this;
  }
  EventLine& u64(std::uint64_t value) {
    // Digits written from the last backwards, two per step from a table: no temporary, no copy.
    const std::size_t n = decimal_digits(value);
    if (n > room()) return overflow();
    char* p = end_ + n;
    end_ = p;
    while (value >= 100) {
      const std::size_t pair = static_cast<std::size_t>(value % 100) * 2;
      value /= 100;
      *--p = kDecimalPairs[pair + 1];
      *--p = kDecimalPairs[pair];
    }
    if (value >= 10) {
      const std::size_t pair = static_cast<std::size_t>(value) * 2;
      *--p = kDecimalPairs[pair + 1];
      *--p = kDecimalPairs[pair];
    } else {
      *--p = static_cast<char>('0' + value);
    }
    return *this;
  }
  EventLine& hex(std::uint64_t value) {
    // Whole bytes two digits at a time; a leading zero nibble is dropped afterwards.
    const std::size_t n = (static_cast<std::size_t>(std::bit_width(value | 1)) + 3) / 4;
    if (n + 4 > room()) return overflow();
    *end_++ = '"';
    *end_++ = '0';
    *end_++ = 'x';
    char* p = end_ + n;
    end_ = p;
    for (std::size_t left = n; left >= 2; left -= 2, value >>= 8) {
      const std::size_t pair = static_cast<std::size_t>(value & 0xff) * 2;
      *--p = kHexPairs[pair + 1];
      *--p = kHexPairs[pair];
    }
    if (n % 2) *--p = kHexPairs[(value & 0xf) * 2 + 1];
    *end_++ = '"';
    return *this;
  }
  // Microseconds with three decimals, from nanoseconds.
  EventLine& micros(std::uint64_t ns) {
    u64(ns / 1000);
    const unsigned frac = static_cast<unsigned>(ns % 1000);
    const std::size_t pair = (frac % 100) * 2;  // the last two digits from the table, like u64()
    const char tail[4] = {'.', static_cast<char>('0' + frac / 100), kDecimalPairs[pair], kDecimalPairs[pair + 1]};
    return raw(tail, 4);
  }
  // A quoted JSON string, escaped.
  EventLine& quoted(std::string_view text);

  bool overflowed() const { return overflowed_; }
  std::string_view view() const { return {begin_, static_cast<std::size_t>(end_ - begin_)}; }

 private:
  static constexpr char kDecimalPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  static constexpr char kHexPairs[] =
      "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
      "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
      "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
      "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
      "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
      "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
      "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
      "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
  // Decimal digits of `value` (at least 1), from its bit width without a division loop.
  static std::size_t decimal_digits(std::uint64_t value) {
    static constexpr std::uint64_t kPowers[] = {1ULL,
                                                10ULL,
                                                100ULL,
                                                1000ULL,
                                                10000ULL,
                                                100000ULL,
                                                1000000ULL,
                                                10000000ULL,
                                                100000000ULL,
                                                1000000000ULL,
                                                10000000000ULL,
                                                100000000000ULL,
                                                1000000000000ULL,
                                                10000000000000ULL,
                                                100000000000000ULL,
                                                1000000000000000ULL,
                                                10000000000000000ULL,
                                                100000000000000000ULL,
                                                1000000000000000000ULL,
                                                10000000000000000000ULL};
    // 1233/4096 ~ log10(2): an estimate that is exact or one too high, corrected by one comparison.
    // `value | 1` makes 0 count as one digit and compares like `value` against the (even) powers.
    const std::uint64_t v = value | 1;
    const std::size_t estimate = (static_cast<std::size_t>(std::bit_width(v)) * 1233) >> 12;
    return estimate + (v >= kPowers[estimate] ? 1 : 0);
  }

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
