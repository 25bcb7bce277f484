// `kvremap size` through the real CLI: a serving replica is measured, ended and its profile written; the next start
// of the same command is sized from it; commands that cannot be measured say why.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::count_of;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

std::string library() { return kvremap::testing::split_preload(KVREMAP_PRELOAD).library; }
std::vector<std::string> base_env() {
  const std::string runtime = kvremap::testing::split_preload(KVREMAP_PRELOAD).runtime;
  return runtime.empty() ? std::vector<std::string>{} : std::vector<std::string>{"LD_PRELOAD=" + runtime};
}
std::vector<std::string> base_unset() {
  std::vector<std::string> unset = {"KVREMAP_TRACE_DIR", "KVREMAP_PROFILE_DIR", "KVREMAP_MODE", "VLLM_LIKE_KEEP_SERVING"};
  if (base_env().empty()) unset.push_back("LD_PRELOAD");
  return unset;
}

RunResult cli(const std::string& subcommand, const std::vector<std::string>& options,
                  const std::vector<std::string>& command, std::vector<std::string> env, int timeout_s = 120) {
  std::vector<std::string> argv = {KVREMAP_CLI, subcommand, "--library", library()};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  std::vector<std::string> all = base_env();
  all.insert(all.end(), env.begin(), env.end());
  return run_program(argv, all, base_unset(), timeout_s);
}

std::vector<std::string> profiles_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".json") names.push_back(entry.path().string());
  return names;
}

// The `kv committed` event of every trace in `dir`.
std::vector<nlohmann::json> commits_in(const std::string& dir) {
  std::vector<nlohmann::json> commits;
  for (const std::string& file : trace_files(dir))
    for (const auto& e : kvremap::trace::read_trace(file).other_events)
      if (e.name == "kv committed") commits.push_back(e.args);
  return commits;
}

struct Engine {
  std::string name;                  // what the command line calls it
  std::vector<std::string> options;  // its flags
};

// A sizing run of `engine` serving until it is stopped, then the same command's start under kvremap run, with
// one profile directory: the sizing run ends the server, and the start after it holds every byte of its KV
// cache on the device.
void size_then_start(const Engine& engine, int ranks = 1) {
  const std::string profiles = make_temp_dir(), sized_traces = make_temp_dir(), traces = make_temp_dir();
  std::vector<std::string> command = {link_as(VLLM_LIKE, engine.name), "serve", "--scenario", SEED_SCENARIO};
  command.insert(command.end(), engine.options.begin(), engine.options.end());
  if (ranks > 1) command.insert(command.end(), {"--ranks", std::to_string(ranks)});
  const std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, ranks);

  std::vector<std::string> serving_env = env;
  serving_env.push_back("VLLM_LIKE_KEEP_SERVING=1");
  const RunResult sized =
      cli("size", {"--profile-dir", profiles, "--trace-dir", sized_traces, "--settle", "0.2"}, command, serving_env);
  ASSERT_EQ(sized.exit_code, 0) << sized.out << sized.err;
  // The server was serving and was asked to stop: every engine process shut down on SIGTERM, none was killed.
  EXPECT_EQ(count_of(sized.out, "vllm_like: serving until SIGTERM or SIGINT\n"), static_cast<std::size_t>(ranks))
      << sized.out;
  EXPECT_EQ(count_of(sized.out, "vllm_like: shutting down on signal 15\n"), static_cast<std::size_t>(ranks))
      << sized.out;
  EXPECT_EQ(count_of(sized.err, "kvremap size: measured "), 1u) << sized.err;
  const std::string measured = ranks == 1 ? "kvremap size: measured 1 process: device 0 holds "
                                          : "kvremap size: measured " + std::to_string(ranks) + " processes: ";
  EXPECT_NE(sized.err.find(measured), std::string::npos) << sized.err;
  const auto written = profiles_in(profiles);
  ASSERT_EQ(written.size(), static_cast<std::size_t>(ranks)) << sized.err;
  for (const std::string& profile : written) {
    struct stat st {};
    ASSERT_EQ(stat(profile.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    for (const auto& e : fs::directory_iterator(fs::path(profile).parent_path()))
      EXPECT_FALSE(e.path().string().starts_with(profile + ".unconfirmed"))
          << "a sizing run's start committed: no failed-start marker";
  }

  const RunResult next = cli("run", {"--profile-dir", profiles, "--trace-dir", traces}, command, env);
  ASSERT_EQ(next.exit_code, 0) << next.out << next.err;
  const auto commits = commits_in(traces);
  ASSERT_EQ(commits.size(), static_cast<std::size_t>(ranks)) << next.err;
  for (const auto& c : commits) {
    EXPECT_EQ(c.at("host_bytes").get<std::uint64_t>(), 0u) << c.dump();
    EXPECT_GT(c.at("sizing_shift_bytes").get<std::uint64_t>(), 0u) << "sized from the sizing run's profile";
  }
}

}  // namespace

TEST(Size, AVllmServerIsMeasuredEndedAndItsNextStartHoldsAllItsKvOnTheDevice) {
  size_then_start({"vllm", {"--gpu-memory-utilization", "0.95"}});
}

TEST(Size, AnSglangServerAt093IsMeasuredEndedAndItsNextStartHoldsAllItsKvOnTheDevice) {
  size_then_start({"sglang", {"--engine", "sglang", "--mem-fraction-static", "0.93"}});
}

TEST(Size, EveryRankOfATwoRankStartIsMeasuredBeforeTheStartIsEnded) {
  size_then_start({"vllm", {"--gpu-memory-utilization", "0.95"}}, 2);
}

// A start-up that ends by itself once it has served (an offline run) is measured as well.
TEST(Size, AStartThatEndsByItselfAfterItsCommitIsMeasured) {
  const std::string profiles = make_temp_dir();
  const RunResult r = cli("size", {"--profile-dir", profiles},
                              {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.9"},
                              kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kvremap size: measured 1 process: device 0 holds "), std::string::npos) << r.err;
  EXPECT_EQ(profiles_in(profiles).size(), 1u);
}

// A command that ignores SIGTERM is killed once the grace time has passed; what was measured stands. (The
// replica serving on would take a blocked SIGTERM from sigwait even when ignored, so the shell that started it
// lingers instead, ignoring the signal as a server stuck in its shutdown would.)
TEST(Size, ACommandThatIgnoresTheStopIsKilledAfterTheGraceTime) {
  const std::string profiles = make_temp_dir();
  const std::string vllm = link_as(VLLM_LIKE, "vllm");
  const RunResult r = cli("size", {"--profile-dir", profiles, "--settle", "0", "--grace", "0.5"},
                          {"/bin/sh", "-c",
                           "trap '' TERM; \"$0\" --scenario \"$1\" --gpu-memory-utilization 0.95 && exec sleep 600",
                           vllm, SEED_SCENARIO},
                          kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO), 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("kvremap size: measured 1 process"), std::string::npos) << r.err;
  EXPECT_EQ(profiles_in(profiles).size(), 1u);
}

// A command that never defers a KV cache cannot be measured: its status, or 1, with the reason.
TEST(Size, ACommandThatDefersNothingIsNotMeasured) {
  const RunResult r = cli("size", {"--profile-dir", make_temp_dir()}, {"/bin/true"}, {});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("kvremap size: the command ended with status 0 before kvremap measured its start-up: no "
                       "process deferred a KV cache"),
            std::string::npos)
      << r.err;
  const RunResult failed = cli("size", {"--profile-dir", make_temp_dir()}, {"/bin/sh", "-c", "exit 3"}, {});
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
}

// Observe mode and profiles off would measure nothing: refused before the command runs.
TEST(Size, ObserveModeAndProfilesOffAreRefusedBeforeTheCommandRuns) {
  const std::string marker = make_temp_dir() + "/ran";
  const std::vector<std::string> touch = {"/bin/sh", "-c", "touch \"$0\"", marker};
  const RunResult observe = cli("size", {"--profile-dir", make_temp_dir()}, touch, {"KVREMAP_MODE=observe"});
  EXPECT_EQ(observe.exit_code, 2);
  EXPECT_NE(observe.err.find("kvremap size: KVREMAP_MODE=observe defers nothing"), std::string::npos) << observe.err;
  const RunResult off = cli("size", {"--profile-dir", "off"}, touch, {});
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_NE(off.err.find("kvremap size: --profile-dir off keeps no profile"), std::string::npos) << off.err;
  EXPECT_FALSE(fs::exists(marker)) << "the command ran";
}
