// Profiles written by defer mode, through LD_PRELOAD on the simulated driver: one whole file per start-up
// and rank, what the commit measured in it, no effect on the engine when it cannot be written, never a
// half-written file under the final name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
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
using kvremap::testing::kill_after;
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

// Every entry of `dir`, split into final profile names and anything else (temporary files).
struct DirContents {
  std::vector<std::string> profiles;
  std::vector<std::string> others;
};
DirContents contents(const std::string& dir) {
  DirContents c;
  if (!fs::exists(dir)) return c;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    (name.ends_with(".json") ? c.profiles : c.others).push_back(e.path().string());
  }
  std::sort(c.profiles.begin(), c.profiles.end());
  return c;
}

// The profile in `path` read with the key it names: the reader refuses a torn or corrupt file.
kvremap::policy::ProfileRead read_back(const std::string& path) {
  const std::string text = slurp(path);
  const auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("key") || !json["key"].is_string())
    return {std::nullopt, "no key: " + text};
  return kvremap::policy::read_profile(text, json["key"].get<std::string>());
}

const kvremap::trace::OtherEvent* find_event(const kvremap::trace::Trace& t, const std::string& name) {
  for (const auto& e : t.other_events)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<const kvremap::trace::OtherEvent*> events(const kvremap::trace::Trace& t, const std::string& name) {
  std::vector<const kvremap::trace::OtherEvent*> out;
  for (const auto& e : t.other_events)
    if (e.name == name) out.push_back(&e);
  return out;
}

// The engine's output less its wall-clock timings, which differ from run to run.
std::string without_timings(const std::string& out) {
  return std::regex_replace(out, std::regex("[0-9.]+ (seconds|secs)"), "N $1");
}

std::vector<std::string> seed_argv(const std::string& program) {
  return {program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95"};
}

std::vector<std::string> defer_env(const std::string& trace_dir, const std::string& profile_dir, int ranks = 1) {
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, ranks);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + trace_dir,
                         "KVREMAP_PROFILE_DIR=" + profile_dir});
  return env;
}

}  // namespace

// The seed start-up at 0.95 has a deficit: its profile holds the KV the engine asked for, the commit's
// negative margin and, rewritten at exit, the serving peak.
TEST(Profiles, TheSeedStartUpWritesOneWholeProfileOfWhatItsCommitMeasured) {
  const std::string traces = make_temp_dir(), profiles = make_temp_dir() + "/profiles";
  const RunResult r = run_program(seed_argv(link_as(VLLM_LIKE, "vllm")), defer_env(traces, profiles), {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const DirContents c = contents(profiles);
  ASSERT_EQ(c.profiles.size(), 1u);
  EXPECT_EQ(c.others, std::vector<std::string>{}) << "no temporary file left behind";
  EXPECT_TRUE(fs::path(c.profiles[0]).filename().string().starts_with("vllm-"));
  EXPECT_TRUE(c.profiles[0].ends_with("-rank0.json"));
  const auto read = read_back(c.profiles[0]);
  ASSERT_TRUE(read.profile) << read.problem;
  const kvremap::policy::Profile& p = *read.profile;
  EXPECT_NE(p.key.find("--scenario"), std::string::npos) << p.key;
  EXPECT_EQ(p.key.find("0.95"), std::string::npos) << "the memory share is not part of the key: " << p.key;

  const auto files = trace_files(traces);
  ASSERT_EQ(files.size(), 1u);
  const auto trace = kvremap::trace::read_trace(files[0]);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  const auto* deferred = find_event(trace, "kv deferred");
  const auto* committed = find_event(trace, "kv committed");
  ASSERT_NE(deferred, nullptr);
  ASSERT_NE(committed, nullptr);
  EXPECT_EQ(p.kv_requested_bytes,
            deferred->args.at("regions").get<std::uint64_t>() * deferred->args.at("tensor_bytes").get<std::uint64_t>());
  EXPECT_EQ(p.margin_bytes, committed->args.at("margin_bytes").get<std::int64_t>());
  EXPECT_LT(p.margin_bytes, 0) << "0.95 does not fit on the seed device";
  EXPECT_GT(committed->args.at("deficit_bytes").get<std::uint64_t>(), 0u);
  EXPECT_EQ(p.headroom_bytes, committed->args.at("headroom_bytes").get<std::uint64_t>());
  ASSERT_TRUE(p.serving_peak_bytes) << "rewritten at exit";
  ASSERT_TRUE(p.sizing_query);
  EXPECT_GT(p.sizing_query->device_free_bytes, 0u);
  EXPECT_GE(p.written_at, p.measured_at);

  const auto written = events(trace, "kv profile written");
  ASSERT_EQ(written.size(), 2u) << "after the commit and at exit";
  for (const auto* w : written) {
    EXPECT_EQ(w->args.at("path").get<std::string>(), c.profiles[0]);
    EXPECT_NE(c.profiles[0].find(w->args.at("key_hash").get<std::string>()), std::string::npos);
  }
  EXPECT_GT(written[0]->event.ts_us, committed->event.ts_us);
}

// Each rank writes its own file; neither overwrites the other's.
TEST(Profiles, EachRankWritesItsOwnProfile) {
  const std::string traces = make_temp_dir(), profiles = make_temp_dir();
  std::vector<std::string> argv = seed_argv(link_as(VLLM_LIKE, "vllm"));
  argv.insert(argv.end(), {"--ranks", "2"});
  const RunResult r = run_program(argv, defer_env(traces, profiles, 2), {}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const DirContents c = contents(profiles);
  ASSERT_EQ(c.profiles.size(), 2u);
  EXPECT_EQ(c.others, std::vector<std::string>{});
  // Named by hash first: the two ranks' files sort in either order.
  EXPECT_NE(c.profiles[0].ends_with("-rank0.json"), c.profiles[1].ends_with("-rank0.json")) << c.profiles[0];
  EXPECT_NE(c.profiles[0].ends_with("-rank1.json"), c.profiles[1].ends_with("-rank1.json")) << c.profiles[1];
  std::vector<std::string> keys;
  for (const std::string& f : c.profiles) {
    const auto read = read_back(f);
    ASSERT_TRUE(read.profile) << f << ": " << read.problem;
    EXPECT_TRUE(read.profile->serving_peak_bytes) << f;
    keys.push_back(read.profile->key);
  }
  EXPECT_NE(keys[0], keys[1]);
}

// A profile directory that cannot exist: one warning naming it, and the engine starts and prints
// exactly what it prints when the profile is written.
TEST(Profiles, AnUnwritableDirectoryIsOneWarningAndChangesNothingElse) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  const std::string good = make_temp_dir();
  const RunResult ok = run_program(seed_argv(program), defer_env(make_temp_dir(), good), {}, 120);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  ASSERT_EQ(contents(good).profiles.size(), 1u);

  const std::string blocker = make_temp_dir() + "/a-file";
  std::ofstream(blocker) << "not a directory";
  const std::string traces = make_temp_dir();
  const RunResult r = run_program(seed_argv(program), defer_env(traces, blocker + "/profiles"), {}, 120);
  EXPECT_EQ(r.exit_code, ok.exit_code);
  EXPECT_EQ(without_timings(r.out), without_timings(ok.out));
  std::size_t warnings = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);)
    if (line.find("no profile written") != std::string::npos) {
      ++warnings;
      EXPECT_NE(line.find(blocker + "/profiles"), std::string::npos) << line;
      EXPECT_NE(line.find("Not a directory"), std::string::npos) << line;
    }
  EXPECT_EQ(warnings, 1u) << r.err;
  const auto trace = kvremap::trace::read_trace(trace_files(traces).at(0));
  EXPECT_EQ(find_event(trace, "kv profile written"), nullptr);
}

// SIGKILL at any point, the profile writes included: under a profile's final name there is only ever
// a whole profile (or nothing).
TEST(Profiles, AKillNeverLeavesAPartialProfile) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(run_program(seed_argv(program), defer_env(make_temp_dir(), make_temp_dir()), {}, 120).exit_code, 0);
  const auto whole_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  constexpr int kPoints = 24;
  int with_profile = 0;
  const std::vector<std::string> argv = seed_argv(program);
  for (int i = 0; i < kPoints; ++i) {
    const std::string profiles = make_temp_dir();
    // Denser near the end of the start-up, where the commit and its profile are.
    kill_after(argv, defer_env(make_temp_dir(), profiles), whole_us / 2 + whole_us * (i + 1) / (2 * kPoints));
    const DirContents c = contents(profiles);
    EXPECT_LE(c.profiles.size(), 1u);
    for (const std::string& f : c.profiles) {
      ++with_profile;
      const auto read = read_back(f);
      EXPECT_TRUE(read.profile) << f << " killed at point " << i << ": " << read.problem;
    }
  }
  std::printf("kills that left a profile: %d of %d\n", with_profile, kPoints);
}
