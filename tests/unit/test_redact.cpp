// Unit tests for policy/redact: secret flags, environment-style assignments and URL passwords out of command lines.
#include "policy/redact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kvremap::policy;

namespace {

using Argv = std::vector<std::string>;

bool holds(const Argv& argv, std::string_view secret) {
  for (const std::string& a : argv)
    if (a.find(secret) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(Redact, SecretFlagsAreKnownByTheirWords) {
  for (const char* flag : {"--api-key", "--hf-token", "--hf_token", "--HF-TOKEN", "--db-password", "--DB_Password",
                           "--client-secret", "--apikey", "--hfToken", "-token", "--ssl-key-password", "--api-keys",
                           "--aws.secret", "--passwd"})
    EXPECT_TRUE(is_secret_flag(flag)) << flag;
  // Words that decide memory use are not secrets, though they contain "token" or "key".
  for (const char* flag : {"--max-num-batched-tokens", "--tokenizer", "--tokenizer-mode", "--max-total-tokens",
                           "--ssl-keyfile", "--port", "--model", "--", "-", "--keyword-args"})
    EXPECT_FALSE(is_secret_flag(flag)) << flag;
}

TEST(Redact, ValuesOfSecretFlagsInBothForms) {
  const Argv argv = {"vllm",         "serve", "meta/llama", "--api-key",   "sk-x",       "--hf-token",
                     "hf_x",         "--db-password=y",      "--port",      "8000",       "--HF_TOKEN=hf_y",
                     "--max-num-batched-tokens", "8192"};
  EXPECT_EQ(redact_command_line(argv),
            (Argv{"vllm", "serve", "meta/llama", "--api-key", "<redacted>", "--hf-token", "<redacted>",
                  "--db-password=<redacted>", "--port", "8000", "--HF_TOKEN=<redacted>", "--max-num-batched-tokens",
                  "8192"}));
}

TEST(Redact, ValuesThatLookLikeOptionsAndManyValues) {
  // A key may begin with '-'; a flag at the end has no value; vLLM's --api-key takes several.
  EXPECT_EQ(redact_command_line(Argv{"p", "--hf-token", "-abc", "--port", "1"}),
            (Argv{"p", "--hf-token", "<redacted>", "--port", "1"}));
  EXPECT_EQ(redact_command_line(Argv{"p", "--token", "--port", "1"}), (Argv{"p", "--token", "--port", "1"}));
  EXPECT_EQ(redact_command_line(Argv{"p", "--hf-token"}), (Argv{"p", "--hf-token"}));
  EXPECT_EQ(redact_command_line(Argv{"vllm", "serve", "m", "--api-key", "k1", "k2", "--port", "1"}),
            (Argv{"vllm", "serve", "m", "--api-key", "<redacted>", "<redacted>", "--port", "1"}));
}

TEST(Redact, EnvironmentStyleAssignments) {
  EXPECT_EQ(redact_argument("HF_TOKEN=hf_abc"), "HF_TOKEN=<redacted>");
  EXPECT_EQ(redact_argument("OPENAI_API_KEY=sk"), "OPENAI_API_KEY=<redacted>");
  EXPECT_EQ(redact_argument("MAX_TOKENS=5"), "MAX_TOKENS=5");
  EXPECT_EQ(redact_argument("a b=c"), "a b=c");
}

TEST(Redact, UrlPasswords) {
  EXPECT_EQ(redact_argument("postgres://user:pa55@db.example:5432/x"), "postgres://user:<redacted>@db.example:5432/x");
  EXPECT_EQ(redact_argument("--model=s3://ak:s3cr3t@bucket/path?x=1"), "--model=s3://ak:<redacted>@bucket/path?x=1");
  // A password holding '@' ends at the authority's last '@'.
  EXPECT_EQ(redact_argument("https://u:p@ss@host/"), "https://u:<redacted>@host/");
  EXPECT_EQ(redact_argument(R"({"a":"http://u:p@h","b":"ftp://v:q@i/"})"),
            R"({"a":"http://u:<redacted>@h","b":"ftp://v:<redacted>@i/"})");
  for (const char* kept : {"https://host/a:b@c", "ssh://git@host/repo", "http://host:8080/", "http://u:@h/", "://"})
    EXPECT_EQ(redact_argument(kept), kept);
}

TEST(Redact, WithoutSecretsDropsFlagsAndTheirValues) {
  const Argv argv = {"/usr/bin/vllm", "serve", "meta/llama", "--hf-token", "hf_x", "--db-password=dbpw",
                     "--api-key",     "k1",    "k2",         "--max-num-batched-tokens", "8192",
                     "HF_TOKEN=hf_z", "--download-dir", "s3://u:pw@host/dir", "--secret"};
  const Argv kept = without_secrets(argv);
  EXPECT_EQ(kept, (Argv{"/usr/bin/vllm", "serve", "meta/llama", "--max-num-batched-tokens", "8192", "--download-dir",
                        "s3://u@host/dir"}));
  for (const char* secret : {"hf_x", "dbpw", "k1", "k2", "hf_z", "pw", "<redacted>"})
    EXPECT_FALSE(holds(kept, secret)) << secret;
  EXPECT_EQ(without_secrets(Argv{"--token"}), Argv{"--token"}) << "the program is kept whatever its name";
}
