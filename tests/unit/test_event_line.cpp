// The hand-written number formatting of the hot trace lines, checked against the standard library.
#include "interpose/trace/event_line.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>

namespace {

using kvremap::interpose::EventLine;

std::string decimal(std::uint64_t v) {
  EventLine e;
  e.u64(v);
  return std::string(e.view());
}

std::string hex(std::uint64_t v) {
  EventLine e;
  e.hex(v);
  return std::string(e.view());
}

std::string printf_hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "\"0x%" PRIx64 "\"", v);
  return buf;
}

TEST(EventLine, DecimalsMatchToStringAtEveryDigitCountBoundary) {
  std::uint64_t p = 1;
  for (int digits = 1; digits <= 20; ++digits) {
    for (std::uint64_t v : {p - 1, p, p + 1}) EXPECT_EQ(decimal(v), std::to_string(v)) << v;
    if (digits < 20) p *= 10;
  }
  EXPECT_EQ(decimal(0), "0");
  EXPECT_EQ(decimal(UINT64_MAX), std::to_string(UINT64_MAX));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    ASSERT_EQ(decimal(v), std::to_string(v)) << v;
  }
}

TEST(EventLine, HexMatchesPrintfForOddAndEvenDigitCounts) {
  for (std::uint64_t v : std::initializer_list<std::uint64_t>{0, 1, 0xf, 0x10, 0xabc, 0x7f6b27c00000, UINT64_MAX})
    EXPECT_EQ(hex(v), printf_hex(v)) << v;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t v = rng() >> (rng() % 64);
    ASSERT_EQ(hex(v), printf_hex(v)) << v;
  }
}

TEST(EventLine, MicrosecondsHaveThreeDecimals) {
  EventLine e;
  e.micros(2919120).lit(" ").micros(5).lit(" ").micros(1000);
  EXPECT_EQ(e.view(), "2919.120 0.005 1.000");
  // Every fraction, in front of integer parts of every length, as printf writes it.
  for (std::uint64_t whole : {0ULL, 7ULL, 42ULL, 123456789ULL}) {
    for (std::uint64_t frac = 0; frac < 1000; ++frac) {
      const std::uint64_t ns = whole * 1000 + frac;
      EventLine line;
      line.micros(ns);
      char expected[64];
      std::snprintf(expected, sizeof expected, "%llu.%03llu", static_cast<unsigned long long>(whole),
                    static_cast<unsigned long long>(frac));
      ASSERT_EQ(line.view(), expected) << ns;
    }
  }
}

TEST(EventLine, AFullCallerBufferMarksTheLineOverflowedInsteadOfWritingPastIt) {
  char out[8] = {};
  EventLine e(out, 6);
  e.u64(12345);
  EXPECT_FALSE(e.overflowed());
  e.u64(99);  // 5 + 2 > 6
  EXPECT_TRUE(e.overflowed());
  EXPECT_EQ(e.view(), "12345");
  EXPECT_EQ(out[6], 0);
}

}  // namespace
