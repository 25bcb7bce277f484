// vLLM sleep mode (CuMemAllocator's VMM KV cache) on the simulator: stock, under kvremap, verl's order, learned sizing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

constexpr int kLayers = 8;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kWeightsBytes = std::uint64_t{1} << 30;  // vmm_sleep_engine's weights

// A 16 GiB device whose whole memory the engine sees (no context or module charges), as in
// test_stacked_interposers.cpp.
const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=16GiB", "SIMCUDA_CONTEXT_BYTES=0",
                                             "SIMCUDA_MODULE_BYTES=0"};

struct Start {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
  std::string output() const { return "stdout:\n" + run.out + "\nstderr:\n" + run.err; }
  const kvremap::trace::OtherEvent* event(const std::string& name) const {
    for (const auto& t : traces)
      for (const auto& e : t.other_events)
        if (e.name == name) return &e;
    return nullptr;
  }
  // The number after `prefix` in the engine's output, or -1.
  long long number_after(const std::string& prefix) const {
    const std::size_t at = run.out.find(prefix);
    if (at == std::string::npos) return -1;
    return std::stoll(run.out.substr(at + prefix.size()));
  }
};

// vmm_sleep_engine with `args`; under kvremap (defer mode, recognised as vLLM so graphs are expected)
// when `preload`, tracing to a fresh directory and keeping profiles in `profile_dir` (a fresh one when empty).
Start start(const std::vector<std::string>& args, bool preload, std::string profile_dir = "",
            const std::vector<std::string>& extra_env = {}) {
  const std::string dir = make_temp_dir();
  if (profile_dir.empty()) profile_dir = dir + "/profiles";
  std::vector<std::string> env = kSimulator;
  for (const std::string& e : {std::string("KVREMAP_ENGINE=vllm"), std::string("KVREMAP_MODE=defer"),
                               "KVREMAP_TRACE_DIR=" + dir, "KVREMAP_PROFILE_DIR=" + profile_dir})
    env.push_back(e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> unset;
  if (preload) {
    env.push_back("LD_PRELOAD=" KVREMAP_PRELOAD);
  } else {
    unset.push_back("LD_PRELOAD");
  }
  std::vector<std::string> argv = {VMM_SLEEP_ENGINE};
  argv.insert(argv.end(), args.begin(), args.end());
  Start s;
  s.run = run_program(argv, env, unset, 240);
  for (const std::string& file : trace_files(dir)) s.traces.push_back(kvremap::trace::read_trace(file));
  return s;
}

// The KV cache the engine sized: "kv tensors: N of B bytes".
std::uint64_t kv_bytes(const Start& s) {
  const std::size_t at = s.run.out.find("kv tensors: ");
  if (at == std::string::npos) return 0;
  const std::size_t of = s.run.out.find(" of ", at);
  return std::stoull(s.run.out.substr(at + 12)) * std::stoull(s.run.out.substr(of + 4));
}

void expect_every_check_passed(const Start& s) {
  EXPECT_EQ(s.run.exit_code, 0) << s.output();
  EXPECT_EQ(s.run.out.find("FAILED"), std::string::npos) << s.output();
  for (const char* step : {"kv tensors: ", "sleep: VA reservations kept", "wake: same addresses", "wake: KV usable",
                           "wake: weights restored", "graph launch after wake: ok", "KV check: ok", "freed everything"})
    EXPECT_NE(s.run.out.find(step), std::string::npos) << "missing \"" << step << "\"\n" << s.output();
}

TEST(SleepMode, StockRunsOutOfMemoryInAutotuning) {
  const Start high = start({"--share", "0.95", "--layers", std::to_string(kLayers)}, false);
  EXPECT_EQ(high.run.exit_code, 5) << high.output();
  EXPECT_NE(high.run.out.find("out of memory in autotuning"), std::string::npos) << high.output();
  const Start low = start({"--share", "0.8", "--layers", std::to_string(kLayers)}, false);
  expect_every_check_passed(low);
  EXPECT_NE(low.run.out.find("graph launch: ok"), std::string::npos) << low.output();
  // Stock: the whole KV cache and the weights were device memory, and the sleep gave all of it back.
  EXPECT_GE(static_cast<std::uint64_t>(low.number_after("sleep freed ")) * kMiB, kv_bytes(low) + kWeightsBytes)
      << low.output();
}

TEST(SleepMode, UnderKvremapItStartsServesSleepsAndWakes) {
  const Start s = start({"--share", "0.95", "--layers", std::to_string(kLayers)}, true);
  expect_every_check_passed(s);
  EXPECT_NE(s.run.out.find("graph launch: ok"), std::string::npos) << s.output();
  ASSERT_EQ(s.traces.size(), 1u) << s.output();
  const auto* deferred = s.event("kv deferred");
  ASSERT_NE(deferred, nullptr) << "no \"kv deferred\" event\n" << s.output();
  EXPECT_EQ(deferred->args.at("regions").get<int>(), kLayers) << s.output();
  EXPECT_NE(s.event("kv committed"), nullptr) << "no \"kv committed\" event\n" << s.output();
  // Committed before serving, so the sleep releases real device memory under the KV.
  EXPECT_GE(static_cast<std::uint64_t>(s.number_after("sleep freed ")) * kMiB, kv_bytes(s)) << s.output();
}

TEST(SleepMode, SleepBeforeTheFirstLaunchDropsTheDeferredKvWithoutCommitting) {
  const Start s = start({"--share", "0.95", "--layers", std::to_string(kLayers), "--sleep-before-launch"}, true);
  expect_every_check_passed(s);
  ASSERT_EQ(s.traces.size(), 1u) << s.output();
  EXPECT_NE(s.event("kv deferred"), nullptr) << "no \"kv deferred\" event\n" << s.output();
  EXPECT_EQ(s.event("kv committed"), nullptr) << "the KV was committed though the engine slept first\n" << s.output();
  // Only the weights count: the KV was still deferred when the engine slept, its tensors all mapped on
  // kvremap's small aliased scratch, so releasing them frees no device memory of their own (the scratch
  // is a few MiB at most). The bytes come back as device memory only at the wake, backed anew.
  EXPECT_GE(static_cast<std::uint64_t>(s.number_after("sleep freed ")) * kMiB, kWeightsBytes) << s.output();
}

TEST(SleepMode, TheSecondStartIsSizedFromTheProfile) {
  const std::string profiles = make_temp_dir();
  const std::vector<std::string> args = {"--share", "0.95", "--layers", std::to_string(kLayers)};
  // KVREMAP_SIZING=fit: at these sizes the first start's KV cache fits on the device beside the profiled
  // activations with room to spare, so `learned` (which only ever shrinks a KV cache that lacked memory)
  // would leave the second start alone; `fit` grows it into the measured surplus. A first start with a
  // deficit instead would hold part of its KV in host memory, and the engine's check that the sleep frees
  // the KV's bytes of device memory could not pass.
  const std::vector<std::string> fit = {"KVREMAP_SIZING=fit"};
  const Start first = start(args, true, profiles, fit);
  ASSERT_EQ(first.run.exit_code, 0) << "first start\n" << first.output();
  const Start second = start(args, true, profiles, fit);
  expect_every_check_passed(second);
  EXPECT_NE(second.event("kv sizing adjusted"), nullptr) << "no \"kv sizing adjusted\" event\n" << second.output();
  EXPECT_NE(kv_bytes(second), kv_bytes(first)) << second.output();
}

// The profile files a start wrote into `dir`, parsed.
std::vector<nlohmann::json> profiles_in(const std::string& dir) {
  std::vector<nlohmann::json> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json") out.push_back(nlohmann::json::parse(std::ifstream(entry.path())));
  return out;
}

// Sleep and wake teach the profile nothing false: the memory a wake re-creates for the KV cache (cumem.py wake_up:
// new memory of each tensor's size at its address) is KV, the weights it re-creates were freed by the sleep, and
// what comes and goes while the KV cache sleeps never competed with it. So the start after a slept-and-woken one
// keeps its KV cache, for a sleep after the commit and before it, level 1 (weights offloaded) and level 2
// (weights discarded, loaded again between the weights' wake and the KV cache's).
TEST(SleepMode, TheStartAfterASleptAndWokenStartKeepsItsKvCache) {
  struct Case {
    const char* name;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases = {
      {"sleep after the commit, level 1", {"--sleep-level", "1"}},
      {"sleep after the commit, level 2", {"--sleep-level", "2"}},
      {"sleep before the commit, level 1", {"--sleep-before-launch", "--sleep-level", "1"}},
      {"sleep before the commit, level 2", {"--sleep-before-launch", "--sleep-level", "2"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> args = {"--share", "0.95", "--layers", std::to_string(kLayers)};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const std::string profiles = make_temp_dir();
    const Start first = start(args, true, profiles);
    expect_every_check_passed(first);
    const bool after_commit = first.event("kv committed") != nullptr;
    EXPECT_EQ(after_commit, c.flags.front() != "--sleep-before-launch") << first.output();
    if (after_commit) {
      // What serving needed beside the KV cache: nothing the wake mapped again (no serving allocation at all here).
      const std::vector<nlohmann::json> written = profiles_in(profiles);
      ASSERT_EQ(written.size(), 1u) << first.output();
      const nlohmann::json& peak = written.front().at("serving_peak_bytes");
      ASSERT_TRUE(peak.is_number_unsigned()) << written.front().dump();
      EXPECT_LT(peak.get<std::uint64_t>(), kv_bytes(first) / kLayers) << written.front().dump() << first.output();
    }
    const Start second = start(args, true, profiles);
    expect_every_check_passed(second);
    ASSERT_GT(kv_bytes(first), 0u) << first.output();
    EXPECT_GE(kv_bytes(second) * 100, kv_bytes(first) * 99)
        << "first start's KV " << kv_bytes(first) << " bytes, the second's " << kv_bytes(second) << "\n"
        << second.output();
  }
}

// Headroom counts what is live once. An engine named only by KVREMAP_ENGINE=vllm (no command line to read a
// serving port from), its KV cache through CuMemAllocator, whose compile warm-up launches attention on the KV
// cache before autotuning: the commit comes at that launch, with the warm-up's 2.5 GiB of activations live. They
// are allocated already, so they count toward the 2.5 GiB headroom (the profiled peak) rather than beside it;
// stock vLLM at 0.8 holds all its KV on the device, and so does this start, whose autotuning then fits.
TEST(SleepMode, AnEarlyCommitCountsWhatTheWarmUpHoldsTowardTheHeadroom) {
  const std::vector<std::string> args = {"--share",          "0.8",  "--layers",           std::to_string(kLayers),
                                         "--activation-mib", "1280", "--warm-up-attention"};
  const Start stock = start(args, false);
  expect_every_check_passed(stock);
  const Start s = start(args, true);
  expect_every_check_passed(s);
  EXPECT_EQ(kv_bytes(s), kv_bytes(stock)) << s.output();
  const auto* committed = s.event("kv committed");
  ASSERT_NE(committed, nullptr) << s.output();
  EXPECT_EQ(committed->args.at("trigger").get<std::string>(),
            "kernel launch reaching KV before any capture, no serving port")
      << s.output();
  EXPECT_EQ(committed->args.at("host_bytes").get<std::uint64_t>(), 0u) << s.output();
  const auto* plan = s.event("kv commit plan");
  ASSERT_NE(plan, nullptr) << s.output();
  EXPECT_NE(plan->args.at("headroom_source").get<std::string>().find("less what start-up work held"), std::string::npos)
      << s.output();
  EXPECT_EQ(s.event("kv serving overflow"), nullptr) << s.output();
}

// Start-up work is never given host memory, whatever committed early: after the same early commit, an autotuning
// workspace the device refuses (4 GiB, with 3.2 GiB free beside the KV cache) gets the device's out-of-memory
// error, as stock vLLM does, rather than host memory from kvremap's serving overflow.
TEST(SleepMode, AutotuningAfterAnEarlyCommitGetsTheDevicesOutOfMemoryAsStockDoes) {
  const std::vector<std::string> args = {
      "--share",        "0.8", "--layers", std::to_string(kLayers), "--activation-mib", "1280", "--warm-up-attention",
      "--autotune-mib", "4096"};
  const Start stock = start(args, false);
  EXPECT_EQ(stock.run.exit_code, 5) << stock.output();
  const Start s = start(args, true);
  EXPECT_EQ(s.run.exit_code, 5) << s.output();
  EXPECT_NE(s.run.out.find("out of memory in autotuning"), std::string::npos) << s.output();
  EXPECT_NE(s.event("kv committed"), nullptr) << s.output();
  EXPECT_EQ(s.event("kv serving overflow"), nullptr) << s.output();
}

}  // namespace
