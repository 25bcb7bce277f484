// policy/profile_key_parts and policy/profile_layers: a key's text read back field by field and named as the
// library names its file; durations and ages; KVREMAP_PROFILE_PATH split and checked.
#include "policy/profile_key_parts.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "policy/profile.h"
#include "policy/profile_layers.h"

using kvremap::policy::KeyParts;
using kvremap::policy::parse_key_text;
using kvremap::policy::ProfileKey;

namespace {

ProfileKey sample_key() {
  ProfileKey key;
  key.argv = {"/usr/bin/vllm", "serve", "/models/llama 3", "--max-model-len", "8192", "--api-key", "secret",
              "--tokenizer=\"odd\\name\"\x01"};
  key.device_name = "NVIDIA H100 80GB HBM3";
  key.device_total_bytes = 85'029'158'912;
  key.rank = 3;
  key.driver_version = 12080;
  key.environment = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"};
  key.software = {"torch/_C abc123", "vllm/_C def456"};
  key.config = "cfg.yaml fnv1a:0123456789abcdef";
  key.model_identity = "config.json fnv1a:fedcba9876543210";
  return key;
}

}  // namespace

TEST(ProfileKeyParts, EveryFieldOfAKeyTextReadsBack) {
  const ProfileKey key = sample_key();
  const std::string text = kvremap::policy::key_text(key);
  std::string problem;
  const auto parts = parse_key_text(text, &problem);
  ASSERT_TRUE(parts) << problem << "\n" << text;
  EXPECT_EQ(parts->argv.size(), kvremap::policy::normalised_cmdline(key.argv).size());
  EXPECT_EQ(parts->argv.front(), "vllm");
  EXPECT_NE(std::find(parts->argv.begin(), parts->argv.end(), "<model>"), parts->argv.end());
  EXPECT_NE(std::find(parts->argv.begin(), parts->argv.end(), "\"odd\\name\"\x01"), parts->argv.end());
  EXPECT_EQ(parts->device_name, key.device_name);
  EXPECT_EQ(parts->device_total_bytes, key.device_total_bytes);
  EXPECT_EQ(parts->rank, 3u);
  EXPECT_EQ(parts->driver_version, 12080);
  EXPECT_EQ(parts->schema_version, kvremap::policy::kProfileSchemaVersion);
  EXPECT_EQ(parts->environment, key.environment);
  EXPECT_EQ(parts->software, key.software);
  EXPECT_EQ(parts->config, key.config);
  EXPECT_EQ(parts->model_identity, key.model_identity);
  EXPECT_EQ(kvremap::policy::key_engine(*parts), "vllm");
  EXPECT_EQ(kvremap::policy::key_model(*parts), key.model_identity);
  EXPECT_EQ(kvremap::policy::profile_file_name_for_key(*parts, text), kvremap::policy::profile_file_name(key));
}

TEST(ProfileKeyParts, AModelWithoutConfigIsItsArgumentAndTheNameStillMatches) {
  ProfileKey key;
  key.argv = {"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"};
  key.device_name = "sim";
  key.device_total_bytes = 1ull << 36;
  const std::string text = kvremap::policy::key_text(key);
  std::string problem;
  const auto parts = parse_key_text(text, &problem);
  ASSERT_TRUE(parts) << problem;
  EXPECT_EQ(kvremap::policy::key_engine(*parts), "sglang");
  EXPECT_EQ(kvremap::policy::key_model(*parts), "Qwen/Qwen3-8B");
  EXPECT_EQ(kvremap::policy::profile_file_name_for_key(*parts, text), kvremap::policy::profile_file_name(key));
}

TEST(ProfileKeyParts, TextsThatAreNoKeyAreOneProblem) {
  const std::string good = kvremap::policy::key_text(sample_key());
  for (const std::string& bad : {std::string("argv: vllm"), std::string("nonsense"),
                                good + "; rank: 4", good + "; colour: blue", std::string("argv: \"open; device: \"x\""),
                                std::string("argv: vllm; device: \"d\"; total_bytes: many; rank: 0; driver: 1; schema: 2")}) {
    std::string problem;
    EXPECT_FALSE(parse_key_text(bad, &problem)) << bad;
    EXPECT_FALSE(problem.empty()) << bad;
    EXPECT_EQ(problem.find('\n'), std::string::npos);
  }
}

TEST(ProfileKeyParts, DurationsTakeAWholeNumberAndAUnit) {
  EXPECT_EQ(kvremap::policy::parse_duration_seconds("45s"), 45);
  EXPECT_EQ(kvremap::policy::parse_duration_seconds("90m"), 5400);
  EXPECT_EQ(kvremap::policy::parse_duration_seconds("12h"), 43200);
  EXPECT_EQ(kvremap::policy::parse_duration_seconds("30d"), 30 * 86400);
  EXPECT_EQ(kvremap::policy::parse_duration_seconds("2w"), 14 * 86400);
  for (const char* bad : {"", "d", "30", "3x", "-1d", "1.5h", "99999999999999999999d"})
    EXPECT_FALSE(kvremap::policy::parse_duration_seconds(bad)) << bad;
  EXPECT_EQ(kvremap::policy::format_age(59), "59 s");
  EXPECT_EQ(kvremap::policy::format_age(3600), "60 min");
  EXPECT_EQ(kvremap::policy::format_age(3 * 3600), "3 h");
  EXPECT_EQ(kvremap::policy::format_age(20 * 86400), "20 d");
}

TEST(ProfileLayers, EntriesAreColonSeparatedAndEmptyOnesIgnored) {
  using V = std::vector<std::string>;
  EXPECT_EQ(kvremap::policy::profile_path_entries(""), V{});
  EXPECT_EQ(kvremap::policy::profile_path_entries("/a::/b:"), (V{"/a", "/b"}));
  EXPECT_FALSE(kvremap::policy::profile_path_problem("/a::/b:"));
  const auto relative = kvremap::policy::profile_path_problem("/a:profiles");
  ASSERT_TRUE(relative);
  EXPECT_NE(relative->find("KVREMAP_PROFILE_PATH entry 'profiles' is not an absolute path"), std::string::npos)
      << *relative;
  const auto control = kvremap::policy::profile_path_problem("/a:/b\x1b[31m");
  ASSERT_TRUE(control);
  EXPECT_NE(control->find("KVREMAP_PROFILE_PATH entry '/b\\x1b[31m' holds a control character"), std::string::npos)
      << *control;
}
