// One profile store shared by starts of one configuration launched at once, through LD_PRELOAD on the
// simulated driver: every start is sized from the profile that exists, markers are per start, and a start
// a profile sized that died before its commit still makes the next start unsized.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "policy/profile.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> vllm_argv(const std::string& scenario) {
  return {link_as(VLLM_LIKE, "vllm"), "--scenario", scenario, "--gpu-memory-utilization", "0.95"};
}

std::vector<std::string> defer_env(const std::string& scenario, const std::string& traces, const std::string& profiles) {
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, scenario);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + traces,
                         "KVREMAP_PROFILE_DIR=" + profiles});
  return env;
}

// One start's outcome, read from its stderr (written to a file by the forked runner) and its trace.
struct Outcome {
  int status = -1;
  std::string err;
  std::vector<kvremap::trace::Trace> traces;
  const kvremap::trace::OtherEvent* event(const std::string& name) const {
    if (traces.size() != 1) return nullptr;
    for (const auto& e : traces[0].other_events)
      if (e.name == name) return &e;
    return nullptr;
  }
  std::uint64_t u(const std::string& name, const char* field) const {
    const auto* e = event(name);
    return e ? e->args.at(field).get<std::uint64_t>() : ~std::uint64_t{0};
  }
};

Outcome read_outcome(int status, const std::string& traces, const std::string& err_file) {
  Outcome o;
  o.status = status;
  o.err = slurp(err_file);
  for (const std::string& f : trace_files(traces)) {
    o.traces.push_back(kvremap::trace::read_trace(f));
    EXPECT_EQ(kvremap::trace::validate(o.traces.back()), std::vector<std::string>{}) << f;
  }
  return o;
}

// `n` starts of one command launched together, each with its own trace directory, all on `profiles`.
std::vector<Outcome> start_together(int n, const std::string& scenario, const std::string& profiles) {
  std::vector<pid_t> children;
  std::vector<std::string> trace_dirs, err_files;
  for (int i = 0; i < n; ++i) {
    trace_dirs.push_back(make_temp_dir());
    err_files.push_back(trace_dirs.back() + ".err");
    const std::vector<std::string> argv = vllm_argv(scenario);
    const std::vector<std::string> env = defer_env(scenario, trace_dirs.back(), profiles);
    const pid_t pid = fork();
    if (pid == 0) {
      const RunResult r = run_program(argv, env, {}, 240);
      std::ofstream(err_files[static_cast<std::size_t>(i)]) << r.err;
      _exit(r.exit_code < 0 ? 99 : r.exit_code);
    }
    children.push_back(pid);
  }
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    waitpid(children[i], &status, 0);
    out.push_back(read_outcome(WIFEXITED(status) ? WEXITSTATUS(status) : -1, trace_dirs[i], err_files[i]));
  }
  return out;
}

Outcome start_one(const std::string& scenario, const std::string& profiles) {
  const std::string traces = make_temp_dir();
  const RunResult r = run_program(vllm_argv(scenario), defer_env(scenario, traces, profiles), {}, 240);
  std::ofstream(traces + ".err") << r.err;
  return read_outcome(r.exit_code, traces, traces + ".err");
}

// The entries of `dir` that are markers of some profile.
std::vector<std::string> markers_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".unconfirmed") != std::string::npos) out.push_back(e.path().string());
  return out;
}

std::string the_profile(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") return e.path().string();
  return "";
}

// A start a profile sized: it served with all its KV on the device, and said nothing of markers.
void expect_sized_on_device(const Outcome& o) {
  EXPECT_EQ(o.status, 0) << o.err;
  ASSERT_EQ(o.traces.size(), 1u) << o.err;
  EXPECT_NE(o.event("kv sizing adjusted"), nullptr) << "sized from the profile: " << o.err;
  ASSERT_NE(o.event("kv committed"), nullptr) << o.err;
  EXPECT_EQ(o.u("kv committed", "host_bytes"), 0u) << "all its KV on the device: " << o.err;
  EXPECT_EQ(o.err.find("not used for sizing"), std::string::npos) << o.err;
}

void concurrent_starts_are_all_sized(int n) {
  const std::string profiles = make_temp_dir();
  const Outcome first = start_one(SEED_SCENARIO, profiles);
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_GT(first.u("kv committed", "host_bytes"), 0u) << "the seed's first start has a deficit";
  const std::vector<Outcome> together = start_together(n, SEED_SCENARIO, profiles);
  for (std::size_t i = 0; i < together.size(); ++i) {
    SCOPED_TRACE("start " + std::to_string(i));
    expect_sized_on_device(together[i]);
  }
  EXPECT_EQ(markers_in(profiles), std::vector<std::string>{}) << "every start removed its own marker";
  const std::string text = slurp(the_profile(profiles));
  const auto key = nlohmann::json::parse(text, nullptr, false).value("key", std::string());
  EXPECT_TRUE(kvremap::policy::read_profile(text, key).profile) << text;
}

}  // namespace

// Eight replicas of one configuration started at once with one profile directory (one model on eight
// GPUs as eight servers): every one is sized from the profile the first start wrote and holds all of
// its KV cache on the device; the markers of starts still running refuse none of the others.
TEST(ProfileSharing, EightStartsAtOnceAreAllSized) { concurrent_starts_are_all_sized(8); }
TEST(ProfileSharing, SixteenStartsAtOnceAreAllSized) { concurrent_starts_are_all_sized(16); }

// A start the profile sized that died before its commit (the engine's own out-of-memory exit: its
// autotuning grew) leaves its marker; the next start is not sized from the profile, says why and what
// follows in one line, commits, rewrites the profile and removes the dead start's marker; the start after
// it is sized again.
TEST(ProfileSharing, AStartThatDiedBeforeItsCommitStillMakesTheNextOneUnsized) {
  const std::string profiles = make_temp_dir();
  const std::string scenario = make_temp_dir() + "/seed.json";
  const std::string seed = slurp(SEED_SCENARIO);
  std::ofstream(scenario) << seed;
  ASSERT_EQ(start_one(scenario, profiles).status, 0);
  const std::string grown = std::regex_replace(seed, std::regex(R"("peak": "11GiB")"), R"("peak": "70GiB")");
  ASSERT_NE(grown, seed);
  std::ofstream(scenario, std::ios::trunc) << grown;
  const Outcome died = start_one(scenario, profiles);
  EXPECT_EQ(died.status, 5) << died.err;
  EXPECT_NE(died.event("kv sizing adjusted"), nullptr);
  ASSERT_EQ(markers_in(profiles).size(), 1u) << "the dead start's marker stays";
  const std::string marker = markers_in(profiles)[0];

  std::ofstream(scenario, std::ios::trunc) << seed;
  const Outcome next = start_one(scenario, profiles);
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(next.event("kv sizing adjusted"), nullptr) << "not sized from the profile";
  std::size_t lines = 0;
  std::istringstream err(next.err);
  for (std::string line; std::getline(err, line);)
    if (line.find("not used for sizing: a start it sized (pid ") != std::string::npos) {
      ++lines;
      EXPECT_NE(line.find(marker + " is still there"), std::string::npos) << line;
      EXPECT_NE(line.find("never reached its commit (failed, killed or crashed"), std::string::npos) << line;
      EXPECT_NE(line.find("the next start is sized again"), std::string::npos) << line;
    }
  EXPECT_EQ(lines, 1u) << next.err;
  EXPECT_EQ(markers_in(profiles), std::vector<std::string>{}) << "removed by the unsized start's profile write";
  expect_sized_on_device(start_one(scenario, profiles));
}
