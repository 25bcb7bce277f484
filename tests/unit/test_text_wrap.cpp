// Prose filled for a terminal: widths kept, words whole, indentation on every line.
#include "policy/text_wrap.h"

#include <gtest/gtest.h>

using kvremap::policy::without_backticks;
using kvremap::policy::wrap_text;

TEST(TextWrap, FillsWordsIntoIndentedLinesOfTheWidth) {
  EXPECT_EQ(wrap_text("one two three four five", 14, "  "), "  one two\n  three four\n  five\n");
  EXPECT_EQ(wrap_text("  spaced\n\tout   words ", 80, ""), "spaced out words\n");
  EXPECT_EQ(wrap_text("", 80, "  "), "");
  EXPECT_EQ(wrap_text(" \n ", 80, "  "), "");
}

TEST(TextWrap, AWordLongerThanTheRoomStaysWholeOnItsOwnLine) {
  EXPECT_EQ(wrap_text("a /a/very/long/path/name b", 10, "  "), "  a\n  /a/very/long/path/name\n  b\n");
}

TEST(TextWrap, BackticksGo) { EXPECT_EQ(without_backticks("set `KVREMAP_MODE=defer` or ``"), "set KVREMAP_MODE=defer or "); }
