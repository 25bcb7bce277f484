// policy::printable: control bytes, C1 controls and invalid UTF-8 become \xNN; printable ASCII and UTF-8 stay.
#include "policy/printable.h"

#include <gtest/gtest.h>

#include <string>

using kvremap::policy::printable;

TEST(Printable, ControlBytesBecomeLowercaseHexEscapes) {
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("\r\t\x7f"), "\\x0d\\x09\\x7f");
  EXPECT_EQ(printable(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(printable("\x1f"), "\\x1f");
}

TEST(Printable, EveryOtherByteIsUnchanged) {
  EXPECT_EQ(printable(""), "");
  EXPECT_EQ(printable("plain text: ~!\"\\ 0x20"), "plain text: ~!\"\\ 0x20");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(printable("/donn\xc3\xa9" "es/\xe6\xa8\xa1\xe5\x9e\x8b/\xf0\x9f\x99\x82"),
            "/donn\xc3\xa9" "es/\xe6\xa8\xa1\xe5\x9e\x8b/\xf0\x9f\x99\x82");
  for (int byte = 0x20; byte < 0x7f; ++byte) {
    const std::string one(1, static_cast<char>(byte));
    EXPECT_EQ(printable(one), one) << byte;
  }
}

TEST(Printable, ItsOutputHasNoControlBytesAndIsItsOwnImage) {
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all += static_cast<char>(byte);
  const std::string shown = printable(all);
  for (const char c : shown) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte >= 0x20 && byte != 0x7f) << static_cast<int>(byte);
  }
  EXPECT_EQ(printable(shown), shown);
  // 33 control bytes and, standing alone in this string, 128 bytes that are not valid UTF-8: each 1 → 4.
  EXPECT_EQ(shown.size(), 256 + (33 + 128) * 3u);
}

TEST(Printable, C1ControlsAndInvalidUtf8AreEscapedByteByByte) {
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\xc2\\x9b31m") << "U+009B, a terminal's CSI";
  EXPECT_EQ(printable("\x9b" "31m"), "\\x9b31m") << "a lone 8-bit CSI";
  EXPECT_EQ(printable("\xc0\x80"), "\\xc0\\x80") << "overlong";
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate";
  EXPECT_EQ(printable("end\xe6\xa8"), "end\\xe6\\xa8") << "cut short";
  EXPECT_EQ(printable("\x80\xff"), "\\x80\\xff");
}
