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
    const EngineRoot root{{4242, 123456789}, argv, 17};
    const std::string encoded = encode_engine_root(root);
    EXPECT_EQ(encoded.find_first_not_of("0123456789abcdef:"), std::string::npos) << encoded;
    const auto back = decode_engine_root(encoded);
    ASSERT_TRUE(back.has_value()) << encoded;
    EXPECT_EQ(back->process, root.process);
    EXPECT_EQ(back->serving_flag_fd, 17);
    // An empty line and a line of one empty argument both encode as nothing.
    EXPECT_EQ(back->argv, argv == std::vector<std::string>{""} ? std::vector<std::string>{} : argv);
  }
}

TEST(EngineRoot, RefusesAnythingElse) {
  const std::string good = encode_engine_root({{7, 9}, {"vllm", "serve"}});
  ASSERT_TRUE(decode_engine_root(good).has_value());
  EXPECT_EQ(decode_engine_root(encode_engine_root({{7, 9}, {"vllm"}})).value().serving_flag_fd, -1) << "none";
  for (const std::string& bad :
       {std::string(""), std::string("1:7:9:76"), std::string("1:7:9:-1:76"), std::string("2:x:9:-1:76"),
        std::string("2:-7:9:-1:76"), std::string("2:0:9:-1:76"), std::string("2:7::-1:76"), std::string("2:7:9::76"),
        std::string("2:7:9:-2:76"), std::string("2:7:9:x:76"), std::string("2:7:9:-1:7"), std::string("2:7:9:-1:7g"),
        std::string("2:7:9:-1:76:00"), std::string("2:7:9:-1"), good + "0",
        std::string("2:7:9:-1:") + std::string(kMaxEngineRootBytes, 'a')}) {
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

// /proc/<pid>/stat as the kernel writes it: the command name in parentheses may hold spaces and
// parentheses of its own, so fields are counted after the last ')'.
TEST(EngineRoot, StampsAndParentsFromProcStat) {
  const std::string stat =
      "4242 (python3 (vllm) x) S 4200 4242 4200 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3 4";
  EXPECT_EQ(stamp_from_stat(4242, stat), (ProcessStamp{4242, 987654}));
  EXPECT_EQ(parent_from_stat(stat), 4200);
  for (const std::string& bad : {std::string(""), std::string("4242 python3 S 4200"),
                                 std::string("4242 (p) S 4200 1 2 3"), std::string("4242 (p) S x")}) {
    EXPECT_FALSE(stamp_from_stat(4242, bad).has_value()) << bad;
  }
  EXPECT_FALSE(parent_from_stat("4242 (p) S x").has_value());
  EXPECT_FALSE(stamp_from_stat(0, stat).has_value()) << "no process has pid 0";
}

// A process started by exec whose own line names no engine, below a root that names one, takes the root's
// line: a Ray worker the raylet execs below `vllm serve`, a worker any launcher execs. Any line that names an
// engine keeps its own, and below a root that names none (`ray start --head`) so does every line.
TEST(EngineRoot, AnExecdLineThatNamesNoEngineAdoptsARootThatNamesOne) {
  const EngineRoot vllm{
      {100, 5000},
      {"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "org/model", "--distributed-executor-backend", "ray"}};
  const EngineRoot sglang{{100, 5000}, {"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "m"}};
  const EngineRoot ray_start{{100, 5000}, {"/usr/bin/python3", "/usr/local/bin/ray", "start", "--head", "--block"}};
  const std::vector<std::vector<std::string>> no_engine = {
      {"/usr/bin/python3", "/usr/lib/python3/dist-packages/ray/_private/workers/default_worker.py",
       "--node-ip-address=127.0.0.1"},
      {"/usr/lib/python3/dist-packages/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=/tmp/ray/s"},
      {"bash", "-c", "exec python3 default_worker.py"},
      {"ninja", "-v"},
      {"nvidia-smi"},
      {"/usr/bin/python3", "serve_org/vllm-tuned.py"}};
  for (const auto& own : no_engine) {
    SCOPED_TRACE(own.front());
    EXPECT_TRUE(adopts_root(own, vllm));
    EXPECT_TRUE(adopts_root(own, sglang));
    EXPECT_FALSE(adopts_root(own, ray_start)) << "a root that names no engine";
  }
  const std::vector<std::vector<std::string>> engines = {
      {"/usr/local/bin/vllm", "serve", "org/other"},
      {"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"},
      {"sglang", "serve", "--model-path", "m"}};
  for (const auto& own : engines) {
    SCOPED_TRACE(own.front());
    EXPECT_FALSE(adopts_root(own, vllm)) << "an engine's own line is its own";
    EXPECT_FALSE(adopts_root(own, ray_start));
  }
}
