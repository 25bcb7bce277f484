// The path rules (policy/path_rules.h) and how an option that breaks them is reported and what it turns off.
#include <gtest/gtest.h>

#include <string>

#include "policy/options.h"
#include "policy/path_rules.h"

using kvremap::policy::parse_options;
using kvremap::policy::path_problem;

TEST(PathRules, OrdinaryPathsPass) {
  EXPECT_EQ(path_problem("."), std::nullopt);
  EXPECT_EQ(path_problem("/var/tmp/kvremap traces"), std::nullopt);
  EXPECT_EQ(path_problem("relative/dir/"), std::nullopt);
  EXPECT_EQ(path_problem("/données/trace"), std::nullopt) << "UTF-8 outside the C1 block is a name like any other";
  EXPECT_EQ(path_problem("/" + std::string(255, 'a')), std::nullopt);
  std::string longest;
  while (longest.size() + 100 < 4095) longest += "/" + std::string(99, 'b');
  longest += std::string(4095 - longest.size(), 'c');
  ASSERT_EQ(longest.size(), 4095u);
  EXPECT_EQ(path_problem(longest), std::nullopt);
}

TEST(PathRules, ControlCharactersAreRefusedWithTheirPlace) {
  EXPECT_EQ(path_problem("/tmp/\x1b[31mred"), "holds a control character (byte 6 of 13)");
  EXPECT_NE(path_problem(std::string("/tmp/a\nb")), std::nullopt);
  EXPECT_NE(path_problem(std::string("/tmp/a\x7f")), std::nullopt);
  EXPECT_NE(path_problem(std::string("/tmp/\xc2\x9b" "31m")), std::nullopt) << "U+009B, a terminal's CSI";
  EXPECT_NE(path_problem(std::string("/tmp/a\0b", 8)), std::nullopt);
}

TEST(PathRules, LengthsOverTheKernelsLimitsAreRefused) {
  EXPECT_EQ(path_problem("/" + std::string(256, 'a')),
            "has a component of 256 bytes (starting at byte 2), over the 255 a file name may have");
  std::string whole;
  while (whole.size() < 5000) whole += "/" + std::string(99, 'd');
  EXPECT_EQ(path_problem(whole.substr(0, 5000)), "is 5000 bytes long, over the 4095 a path may have");
  EXPECT_NE(path_problem(std::string(4096, 'e')), std::nullopt);
}

TEST(PathRules, ABadTraceDirectoryIsOneLineNamingTheVariableAndTurnsOffOnlyTheTrace) {
  const auto parsed = parse_options({{"KVREMAP_TRACE_DIR", "/tmp/\x1b[2J"}, {"KVREMAP_MODE", "defer"}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_EQ(parsed.problems[0].message,
            "kvremap: KVREMAP_TRACE_DIR='/tmp/\\x1b[2J' holds a control character (byte 6 of 9): expected a path "
            "without control characters, at most 4095 bytes, each component at most 255 bytes; no trace is written; "
            "KV deferral and tracking go on");
  EXPECT_FALSE(parsed.options.trace);
  EXPECT_EQ(parsed.options.mode, kvremap::policy::Mode::defer);
  EXPECT_EQ(parsed.options.trace_dir, ".") << "the bad name is never kept";
}

TEST(PathRules, ABadProfileDirectoryTurnsProfilesOffForThisProcess) {
  const auto parsed = parse_options({{"KVREMAP_PROFILE_DIR", "prof\x01iles"}, {"KVREMAP_MODE", "defer"}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_NE(parsed.problems[0].message.find("KVREMAP_PROFILE_DIR='prof\\x01iles' holds a control character"),
            std::string::npos)
      << parsed.problems[0].message;
  EXPECT_NE(parsed.problems[0].message.find("profiles are off for this process"), std::string::npos);
  EXPECT_EQ(parsed.options.profile_dir, "off");
  EXPECT_EQ(parsed.options.mode, kvremap::policy::Mode::defer);
}

TEST(PathRules, ABadMetricsFileWritesNoMetrics) {
  const auto parsed = parse_options({{"KVREMAP_METRICS_FILE", "/" + std::string(300, 'm')}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_NE(parsed.problems[0].message.find("KVREMAP_METRICS_FILE='/mmm"), std::string::npos);
  EXPECT_EQ(parsed.options.metrics_file, "");
}
