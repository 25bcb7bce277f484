// Unit tests for policy/engine_root: the root command line handed to an engine's descendants.
#include "policy/engine_root.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kvremap::policy;

TEST(EngineRoot, RoundTripsAnyArgumentsExceptNul) {
  const std::vector<std::vector<std::string>> lines = {
      {"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "org/model", "--port", "8000"},
      {"vllm", "", "with space", "quote\"and\\back", "utf8 \xc3\xa9", "ctl \x01\x1f\x7f\xff", ":colon:"},
      {""},
      {}};
  for (const auto& argv : lines) {
    const EngineRoot root{{4242, 123456789}, argv};
    const std::string encoded = encode_engine_root(root);
    EXPECT_EQ(encoded.find_first_not_of("0123456789abcdef:"), std::string::npos) << encoded;
    const auto back = decode_engine_root(encoded);
    ASSERT_TRUE(back.has_value()) << encoded;
    EXPECT_EQ(back->process, root.process);
    // An empty line and a line of one empty argument both encode as nothing.
    EXPECT_EQ(back->argv, argv == std::vector<std::string>{""} ? std::vector<std::string>{} : argv);
  }
}

TEST(EngineRoot, RefusesAnythingElse) {
  const std::string good = encode_engine_root({{7, 9}, {"vllm", "serve"}});
  ASSERT_TRUE(decode_engine_root(good).has_value());
  for (const std::string& bad : {std::string(""), std::string("2:7:9:76"), std::string("1:x:9:76"),
                                 std::string("1:-7:9:76"), std::string("1:0:9:76"), std::string("1:7::76"),
                                 std::string("1:7:9:7"), std::string("1:7:9:7g"), std::string("1:7:9:76:00"),
                                 std::string("1:7:9"), good + "0", std::string("1:7:9:") + std::string(kMaxEngineRootBytes, 'a')}) {
    EXPECT_FALSE(decode_engine_root(bad).has_value()) << bad.substr(0, 40);
  }
}

TEST(EngineRoot, TrustedOnlyWhenItNamesAnAncestorByPidAndStartTime) {
  const EngineRoot root{{100, 5000}, {"vllm", "serve", "m"}};
  const std::vector<ProcessStamp> chain = {{120, 5100}, {100, 5000}, {1, 1}};
  EXPECT_TRUE(root_is_ancestor(root, chain));
  // The pid reused by another process since (another start time), an unrelated process, no ancestors.
  EXPECT_FALSE(root_is_ancestor({{100, 4999}, root.argv}, chain));
  EXPECT_FALSE(root_is_ancestor({{300, 5000}, root.argv}, chain));
  EXPECT_FALSE(root_is_ancestor(root, {}));
}
