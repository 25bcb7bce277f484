// Unit tests for policy/units: the size, fraction and boolean syntax every option table accepts.
#include "policy/units.h"

#include <gtest/gtest.h>

using namespace kvremap::policy;

TEST(Units, SizesAcceptBinarySuffixesAndPlainBytes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64KiB"), 64u << 10);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size(" 80gb "), 80ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("0"), 0u);
}

TEST(Units, SizesRejectGarbage) {
  for (const char* bad : {"", "abc", "-1", "1.5", "12XB", "1..5G", "1e3", "0.3B", "99999999999T"})
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
}

TEST(Units, FractionsAcceptDecimalAndPercent) {
  EXPECT_DOUBLE_EQ(*parse_fraction("0.02"), 0.02);
  EXPECT_DOUBLE_EQ(*parse_fraction("2%"), 0.02);
  EXPECT_DOUBLE_EQ(*parse_fraction("1"), 1.0);
  for (const char* bad : {"", "1.5", "150%", "-0.1", "x%", "2 %%"}) EXPECT_FALSE(parse_fraction(bad)) << bad;
}

TEST(Units, BooleansAndCounts) {
  EXPECT_EQ(parse_bool("on"), true);
  EXPECT_EQ(parse_bool("FALSE"), false);
  EXPECT_FALSE(parse_bool("maybe"));
  EXPECT_EQ(parse_count("42"), 42u);
  EXPECT_FALSE(parse_count("4 2"));
  EXPECT_FALSE(parse_count("-3"));
}

TEST(Units, FormatBytesPicksTheLargestUnit) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(256ull << 20), "256.00 MiB");
}

TEST(Units, WholeSizesAreExactUpToTheLargestAndNeverWrap) {
  EXPECT_EQ(parse_size("18446744073709551615"), std::optional<std::uint64_t>(~std::uint64_t{0}));
  EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_size("16777215T"), std::optional<std::uint64_t>(((std::uint64_t{1} << 24) - 1) << 40));
  EXPECT_EQ(parse_size("16777216T"), std::nullopt) << "2^64 bytes";
  EXPECT_EQ(parse_size("17179869184GiB"), std::nullopt);
  EXPECT_EQ(parse_size("9223372036854775808"), std::optional<std::uint64_t>(std::uint64_t{1} << 63));
}
