// The hand-down of lines an engine tree prints once: its encoding, what decodes, and when a descendant stays quiet.
#include "policy/tree_notice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using kvremap::policy::decode_tree_notice;
using kvremap::policy::encode_tree_notice;
using kvremap::policy::lines_hash;
using kvremap::policy::printed_by_ancestor;
using kvremap::policy::ProcessStamp;
using kvremap::policy::TreeNotice;

namespace {

const std::vector<std::string> kStrict = {"kvremap: KVREMAP_STRICT='2' is invalid"};
const std::vector<std::string> kMode = {"kvremap: KVREMAP_MODE='fast' is invalid"};

}  // namespace

TEST(TreeNotice, RoundTrips) {
  const TreeNotice notice{{4242, 987654321}, lines_hash(kStrict)};
  const std::string text = encode_tree_notice(notice);
  EXPECT_TRUE(text.starts_with("1:4242:987654321:")) << text;
  EXPECT_EQ(decode_tree_notice(text), notice);
}

TEST(TreeNotice, AnythingElseDecodesToNothing) {
  for (const char* bad : {"", "1", "2:1:1:0123456789abcdef", "1:0:1:0123456789abcdef", "1:-5:1:0123456789abcdef",
                          "1:x:1:0123456789abcdef", "1:1::0123456789abcdef", "1:1:1:0123456789abcde",
                          "1:1:1:0123456789abcdefa", "1:1:1:0123456789abcdeg", "1:1:1:0123456789abcdef:",
                          "1:1:1:0123456789abcdef:9", " 1:1:1:0123456789abcdef"})
    EXPECT_EQ(decode_tree_notice(bad), std::nullopt) << bad;
}

TEST(TreeNotice, TheHashTellsLinesAndTheirOrderApart) {
  std::vector<std::string> both = kStrict;
  both.push_back(kMode.front());
  std::vector<std::string> reversed = kMode;
  reversed.push_back(kStrict.front());
  EXPECT_NE(lines_hash(kStrict), lines_hash(kMode));
  EXPECT_NE(lines_hash(both), lines_hash(reversed));
  EXPECT_NE(lines_hash(std::vector<std::string>{"ab", "c"}), lines_hash(std::vector<std::string>{"a", "bc"}));
}

TEST(TreeNotice, OnlyAnAncestorThatPrintedTheSameLinesSilencesADescendant) {
  const ProcessStamp wrapper{100, 5000};
  const std::vector<ProcessStamp> ancestors = {{200, 5100}, wrapper, {1, 1}};
  const TreeNotice printed{wrapper, lines_hash(kStrict)};
  EXPECT_TRUE(printed_by_ancestor(kStrict, printed, ancestors));
  EXPECT_FALSE(printed_by_ancestor(kMode, printed, ancestors)) << "other lines are this process's to print";
  EXPECT_FALSE(printed_by_ancestor(kStrict, std::nullopt, ancestors));
  EXPECT_FALSE(printed_by_ancestor(kStrict, TreeNotice{{100, 4999}, printed.lines}, ancestors))
      << "a reused pid is not the process that printed";
  EXPECT_FALSE(printed_by_ancestor(kStrict, TreeNotice{{300, 5000}, printed.lines}, ancestors))
      << "a process outside the chain";
}
