// policy::printable: control bytes become \xNN, every other byte stays as it was.
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
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \x80\xff"), "caf\xc3\xa9 \xe2\x82\xac \x80\xff");  // UTF-8 and stray high bytes
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
  EXPECT_EQ(shown.size(), 256 + 33 * 3u);  // 33 control bytes, each 1 → 4
}
