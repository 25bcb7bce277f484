// vLLM sleep mode (CuMemAllocator's VMM KV cache) on the simulator: stock, under kvremap, verl's order, learned sizing.
#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
