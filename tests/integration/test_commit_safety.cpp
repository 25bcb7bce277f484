// The commit invariant on engine start-ups as vLLM and SGLang run them: no serving work on deferred KV, ever.
//
// The example engine runs under the name of the engine it imitates (a link named `vllm` or `sglang`),
// so kvremap recognises it from its command line as it would the real one. Its serving steps write
// and verify KV, and it marks the start of serving in the simulated driver, whose oracle stops the
// program (exit 86) when any kernel, copy or memset touches memory still aliased to the scratch —
// whatever words the engine's own checks happen to sample.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::kill_at_trace_bytes;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::repetitions;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_bytes;
using kvremap::testing::trace_files;

namespace {

constexpr int kOracleFired = 86;
constexpr double kGiB = 1ull << 30;

std::vector<std::string> scenario_env(const char* scenario, int ranks = 1) {
  return kvremap::testing::scenario_simcuda_env(VLLM_LIKE, scenario, ranks);
}

struct StartUp {
  const char* name;
  const char* engine;  // the name the example runs under: "vllm" or "sglang"
  const char* scenario;
  std::vector<std::string> flags;
  int stock_exit;       // 0 started, 5 out of memory
  int kvremap_exit;     // under KVREMAP_MODE=defer
  const char* trigger;  // the commit's reason in the trace, when kvremap starts it
};

// SGLang's replica starts as its server (`sglang serve`); vLLM's as an offline start-up.
std::vector<std::string> argv_of(const StartUp& s, const std::string& program) {
  std::vector<std::string> argv = {program};
  if (std::string_view(s.engine) == "sglang") argv.push_back("serve");
  argv.insert(argv.end(), {"--scenario", s.scenario});
  argv.insert(argv.end(), s.flags.begin(), s.flags.end());
  return argv;
}

const kvremap::trace::OtherEvent* find_event(const kvremap::trace::Trace& t, const std::string& name) {
  for (const auto& e : t.other_events)
    if (e.name == name) return &e;
  return nullptr;
}

// Every start-up of the issue: graph mode with graph replays first, with an eager prefill first,
// with graph-memory estimation, with --kv-cache-memory; SGLang with its warm-up request and prefix
// reuse; and both engines without graphs, where kvremap commits before the first launch after the
// KV burst and so starts exactly when stock does.
std::vector<StartUp> start_ups() {
  const std::vector<std::string> sglang = {"--engine", "sglang", "--mem-fraction-static"};
  auto with = [](std::vector<std::string> a, std::initializer_list<const char*> more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  return {
      {"vllm graph replays first", "vllm", SEED_SCENARIO, {"--gpu-memory-utilization", "0.95"}, 5, 0, "graph launch"},
      {"vllm eager prefill first",
       "vllm",
       SEED_SCENARIO,
       {"--gpu-memory-utilization", "0.95", "--first-request", "eager-prefill"},
       5,
       0,
       "kernel launch off the capture streams"},
      {"vllm graph-memory estimate",
       "vllm",
       GRAPH_ESTIMATE_SCENARIO,
       {"--gpu-memory-utilization", "0.95"},
       5,
       0,
       "graph launch"},
      // vLLM with a given KV size takes no memory query after its weights (gpu_worker.py:489-510): no
      // KV window opens, nothing is deferred, and the start runs as stock does.
      {"vllm --kv-cache-memory",
       "vllm",
       SEED_SCENARIO,
       {"--gpu-memory-utilization", "0.95", "--kv-cache-memory", "20GiB"},
       5,
       5,
       ""},
      {"sglang warm-up request", "sglang", SEED_SCENARIO, with(sglang, {"0.9"}), 5, 0,
       "kernel launch off the capture streams"},
      // An offline start-up whose flags say graphs while the engine captures none (vLLM sets
      // cudagraph_mode NONE on its own, config/compilation.py:1433-1438): no port will open, so the first
      // kernel that takes a KV address — its first serving forward — commits.
      {"vllm offline, graphs dropped by the engine",
       "vllm",
       SEED_SCENARIO,
       {"--gpu-memory-utilization", "0.95", "--graphs-dropped"},
       5,
       0,
       "kernel launch reaching KV before any capture, no serving port"},
      {"vllm --enforce-eager starts",
       "vllm",
       SEED_SCENARIO,
       {"--gpu-memory-utilization", "0.8", "--enforce-eager"},
       0,
       0,
       "kernel launch, no captures expected"},
      {"vllm --enforce-eager out of memory",
       "vllm",
       SEED_SCENARIO,
       {"--gpu-memory-utilization", "0.95", "--enforce-eager"},
       5,
       5,
       ""},
      {"sglang --disable-cuda-graph starts", "sglang", SEED_SCENARIO, with(sglang, {"0.8", "--disable-cuda-graph"}), 0,
       0, "kernel launch, no captures expected"},
      {"sglang --disable-cuda-graph out of memory", "sglang", SEED_SCENARIO,
       with(sglang, {"0.9", "--disable-cuda-graph"}), 5, 5, ""},
  };
}

}  // namespace

TEST(CommitSafety, EveryStartUpServesOnlyFromCommittedKv) {
  for (const StartUp& s : start_ups()) {
    SCOPED_TRACE(s.name);
    const std::string program = link_as(VLLM_LIKE, s.engine);
    const std::vector<std::string> env = scenario_env(s.scenario);
    const RunResult stock = run_program(argv_of(s, program), env, {"LD_PRELOAD"}, 120);
    EXPECT_EQ(stock.exit_code, s.stock_exit) << stock.out << stock.err;

    const std::string dir = make_temp_dir();
    std::vector<std::string> under = env;
    under.insert(under.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + dir});
    const RunResult r = run_program(argv_of(s, program), under, {}, 120);
    EXPECT_NE(r.exit_code, kOracleFired) << "served from scratch-backed KV: " << r.err;
    EXPECT_EQ(r.err.find("serving oracle"), std::string::npos) << r.err;
    ASSERT_EQ(r.exit_code, s.kvremap_exit) << r.out << r.err;
    const auto files = trace_files(dir);
    ASSERT_EQ(files.size(), 1u);
    const auto trace = kvremap::trace::read_trace(files[0]);
    EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
    if (s.kvremap_exit != 0) {
      EXPECT_EQ(r.out.find("phase serving"), std::string::npos) << "never reached serving";
      continue;
    }
    EXPECT_NE(r.out.find("simcudart_mark_serving() called"), std::string::npos) << "the oracle was armed";
    EXPECT_NE(r.out.find("KV verified"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("vllm_like: started"), std::string::npos);
    const auto* deferred = find_event(trace, "kv deferred");
    const auto* committed = find_event(trace, "kv committed");
    ASSERT_NE(deferred, nullptr);
    ASSERT_NE(committed, nullptr);
    EXPECT_EQ(committed->args.at("trigger"), s.trigger);
    EXPECT_EQ(deferred->args.at("engine"), s.engine);
    if (std::string_view(s.engine) == "sglang") {
      // `sglang serve`: the scheduler is a spawned process renamed before any CUDA call; kvremap read the
      // engine from the line its root handed down.
      EXPECT_EQ(trace.header.cmdline.substr(0, trace.header.cmdline.find(' ')), "sglang::scheduler_TP0");
      EXPECT_NE(trace.header.engine_cmdline.find(" serve --scenario "), std::string::npos)
          << trace.header.engine_cmdline;
    }
    const auto* serving = find_event(trace, "kv serving peaks");
    ASSERT_NE(serving, nullptr) << "the serving peaks since the commit, for the next start's sizing";
    EXPECT_GT(serving->event.ts_us, committed->event.ts_us);
  }
}

// The oracle is what makes the test above mean something: with the trigger told to wait for a
// kvremap_commit() the engine never makes, the eager prefill runs on scratch and the oracle fires.
TEST(CommitSafety, TheOracleCatchesAnEagerPrefillOnDeferredKv) {
  const StartUp s = start_ups()[1];
  const std::string program = link_as(VLLM_LIKE, s.engine);
  std::vector<std::string> env = scenario_env(s.scenario);
  env.insert(env.end(),
             {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_COMMIT=manual", "KVREMAP_TRACE=off"});
  const RunResult r = run_program(argv_of(s, program), env, {}, 120);
  EXPECT_EQ(r.exit_code, kOracleFired) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("simcuda: serving oracle: cuLaunchKernel touched 0x[0-9a-f]+ which "
                                                  "maps a handle mapped at [0-9]+ addresses")))
      << r.err;
}

// Headroom kept at the commit: the profiled activation peak for vLLM, also when its graph-memory
// estimate queries memory after the profiling forward; for SGLang, which never profiles, its own
// reserve less what stayed resident after its KV pool, and at least its own prefill estimate while no
// start has measured serving.
TEST(CommitSafety, TheCommitKeepsTheHeadroomServingNeeds) {
  struct Case {
    const char* engine;
    const char* scenario;
    std::vector<std::string> flags;
    double headroom_gib;
    const char* source;
  };
  for (const Case& c :
       {Case{"vllm", SEED_SCENARIO, {"--gpu-memory-utilization", "0.9"}, 3.0, "profiled activation peak"},
        Case{"vllm", GRAPH_ESTIMATE_SCENARIO, {"--gpu-memory-utilization", "0.95"}, 3.0, "profiled activation peak"},
        // (1 - 0.9) x 79.19 GiB = 7.92 GiB reserve, less what SGLang allocated beside KV since it sized
        // its pool and still holds: its req_to_token table (0.25), then 2.3 graph pool, 0.3 graph execs,
        // 0.4 modules, 0.7 autotune workspace and 0.26 persistent buffers (4.21 GiB, measured in the trace;
        // the commit comes at the scheduler's first write into req_to_token on the forward stream, before
        // the warm-up request's activations). Its prefill estimate for 2048-token chunks, 3 GiB, is less.
        Case{"sglang",
             SEED_SCENARIO,
             {"--engine", "sglang", "--mem-fraction-static", "0.9", "--chunked-prefill-size", "2048"},
             7.92 - 4.21,
             "SGLang's activation reserve"},
        // At 0.85 a start without kvremap reaches serving (autotuning's peak fits beside the whole KV
        // cache): its share stands as given, 11.88 GiB less the same 4.21 GiB held, and no estimate.
        Case{"sglang",
             SEED_SCENARIO,
             {"--engine", "sglang", "--mem-fraction-static", "0.85"},
             11.88 - 4.21,
             "SGLang's activation reserve"},
        // At 0.9 only the deferral carries the start-up, and no profile has measured serving yet: SGLang's own estimate for its default 8192-token chunks on
        // an 80 GiB device, 8192 x 1.5 MiB = 12 GiB (server_args.py:3462, 3569), is more than the reserve.
        Case{"sglang",
             SEED_SCENARIO,
             {"--engine", "sglang", "--mem-fraction-static", "0.9"},
             12.0,
             "SGLang's prefill estimate (1.5 MiB per token of --chunked-prefill-size 8192, its default on a "
             "79.19 GiB device)"}}) {
    SCOPED_TRACE(std::string(c.engine) + " " + c.scenario);
    const std::string dir = make_temp_dir();
    std::vector<std::string> env = scenario_env(c.scenario);
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + dir});
    std::vector<std::string> argv = {link_as(VLLM_LIKE, c.engine)};
    if (std::string(c.engine) == "sglang") argv.push_back("serve");
    argv.insert(argv.end(), {"--scenario", c.scenario});
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    const RunResult r = run_program(argv, env, {}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto files = trace_files(dir);
    ASSERT_EQ(files.size(), 1u);
    const auto trace = kvremap::trace::read_trace(files[0]);
    const auto* plan = find_event(trace, "kv commit plan");
    ASSERT_NE(plan, nullptr);
    EXPECT_NEAR(plan->args.at("headroom_bytes").get<double>() / kGiB, c.headroom_gib, 0.1);
    EXPECT_EQ(plan->args.at("headroom_source"), c.source);
  }
}

// The launcher starts one process per simulated device; each rank defers and commits on its own
// device and verifies its KV, where stock runs out of memory on every rank.
TEST(CommitSafety, EachRankOfATwoRankJobCommitsItsOwnDevice) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  const std::vector<std::string> argv = {program,   "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95",
                                         "--ranks", "2"};
  std::vector<std::string> env = scenario_env(SEED_SCENARIO, 2);
  EXPECT_EQ(run_program(argv, env, {"LD_PRELOAD"}, 240).exit_code, 5);
  const std::string dir = make_temp_dir();
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + dir});
  const RunResult r = run_program(argv, env, {}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all 2 ranks started"), std::string::npos) << r.out;
  std::vector<int> committed_devices;
  for (const std::string& f : trace_files(dir)) {
    const auto trace = kvremap::trace::read_trace(f);
    if (const auto* c = find_event(trace, "kv committed")) committed_devices.push_back(c->args.at("device").get<int>());
  }
  std::sort(committed_devices.begin(), committed_devices.end());
  EXPECT_EQ(committed_devices, (std::vector<int>{0, 1}));
}

// Settings that cannot work are refused at load with one line naming both values; with
// KVREMAP_STRICT=1 the process exits before doing anything; without it kvremap observes only.
TEST(CommitSafety, ImpossibleSettingsAreRefusedNotSilentlyIgnored) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  const std::vector<std::string> argv = {program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.8"};
  std::vector<std::string> env = scenario_env(SEED_SCENARIO);
  env.insert(env.end(),
             {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_CHUNK_BYTES=2MiB", "KVREMAP_TRACE=off"});
  const std::string line =
      "kvremap: KVREMAP_SCRATCH_BYTES=64MiB does not divide KVREMAP_CHUNK_BYTES=2MiB: the scratch is mapped a whole "
      "number of times over each chunk; use 2MiB or another divisor of the chunk";
  const RunResult lenient = run_program(argv, env, {}, 120);
  EXPECT_EQ(lenient.exit_code, 0) << "observe-only: the engine starts as stock would";
  EXPECT_NE(lenient.err.find(line), std::string::npos) << lenient.err;
  env.push_back("KVREMAP_STRICT=1");
  const RunResult strict = run_program(argv, env, {}, 120);
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find(line), std::string::npos) << strict.err;
  EXPECT_EQ(strict.out.find("phase loading"), std::string::npos) << "stopped at load";

  // Only the device knows its granularity and size: checked when the arena is first reserved.
  struct Late {
    std::vector<std::string> settings;
    std::string line;
  };
  for (const Late& c :
       {Late{{"KVREMAP_CHUNK_BYTES=3MiB", "KVREMAP_SCRATCH_BYTES=1MiB"},
             "kvremap: KVREMAP_CHUNK_BYTES=3.00 MiB is not a multiple of device 0's VMM granularity (2.00 MiB): use a "
             "multiple such as 4.00 MiB"},
        Late{{"KVREMAP_HEADROOM=100GiB"},
             "kvremap: KVREMAP_HEADROOM=100.00 GiB is not below device 0's memory (79.19 GiB): use a headroom such as "
             "1GiB"}}) {
    SCOPED_TRACE(c.line);
    std::vector<std::string> late = scenario_env(SEED_SCENARIO);
    late.insert(late.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE=off"});
    late.insert(late.end(), c.settings.begin(), c.settings.end());
    const RunResult kept = run_program(argv, late, {}, 120);
    EXPECT_EQ(kept.exit_code, 0) << "the KV cache stays in ordinary allocations";
    EXPECT_NE(kept.err.find(c.line), std::string::npos) << kept.err;
    late.push_back("KVREMAP_STRICT=1");
    const RunResult stopped = run_program(argv, late, {}, 120);
    EXPECT_EQ(stopped.exit_code, 1);
    EXPECT_NE(stopped.err.find(c.line), std::string::npos) << stopped.err;
  }
}

// Defer mode that defers nothing says why, once: here no allocation is a KV candidate.
TEST(CommitSafety, DeferModeThatDefersNothingSaysWhy) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  std::vector<std::string> env = scenario_env(SEED_SCENARIO);
  env.insert(env.end(),
             {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_KV_MIN_BYTES=8GiB", "KVREMAP_TRACE=off"});
  const RunResult r =
      run_program({program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.8"}, env, {}, 120);
  EXPECT_EQ(r.exit_code, 0);
  const std::string line = "kvremap: [pid ";
  EXPECT_TRUE(std::regex_search(r.err, std::regex("warning: KVREMAP_MODE=defer deferred nothing: no allocation of at "
                                                  "least KVREMAP_KV_MIN_BYTES=8.00 GiB was made after the engine's "
                                                  "sizing memory query")))
      << r.err;
  std::vector<std::string> plain = scenario_env(SEED_SCENARIO);
  plain.insert(plain.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE=off"});
  const RunResult given = run_program(
      {program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95", "--kv-cache-memory", "8GiB"}, plain,
      {}, 120);
  EXPECT_EQ(given.exit_code, 0) << given.out << given.err;
  EXPECT_NE(given.err.find("deferred nothing: the engine's KV cache size is given (--kv-cache-memory): vLLM then "
                           "takes no memory query after its weights"),
            std::string::npos)
      << given.err;
}

// An arena too small for the KV cache, or a placement the driver refuses: what the arena cannot
// hold is an ordinary allocation, never an out-of-memory error the engine would not have had (the
// device has the memory), and one line says why.
TEST(CommitSafety, WhatTheArenaCannotPlaceIsAnOrdinaryAllocation) {
  struct Case {
    const char* setting;
    const char* line;
  };
  for (const Case& c :
       {Case{"KVREMAP_ARENA_BYTES=2GiB",
             "cannot place a 242.00 MiB allocation (its 2.00 GiB of address space is full): "
             "it stays an ordinary allocation (raise KVREMAP_ARENA_BYTES)"},
        Case{"SIMCUDA_FAIL=cuMemSetAccess:1:CUDA_ERROR_UNKNOWN",
             "cannot place a 242.00 MiB allocation (driver error 999, CUDA_ERROR_UNKNOWN): it stays an ordinary "
             "allocation"},
        Case{"SIMCUDA_FAIL=cuMemCreate:1:CUDA_ERROR_OUT_OF_MEMORY",
             "cannot place a 242.00 MiB allocation (driver error 2, CUDA_ERROR_OUT_OF_MEMORY): it stays an ordinary "
             "allocation"}}) {
    SCOPED_TRACE(c.setting);
    std::vector<std::string> env = scenario_env(SEED_SCENARIO);
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE=off", c.setting});
    const RunResult r = run_program(
        {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.8"}, env, {}, 120);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("KV verified"), std::string::npos);
    EXPECT_NE(r.err.find(c.line), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(c.line), r.err.rfind(c.line)) << "said once";
  }
}

// A driver failure while committing one tensor costs that tensor at most: a transient error is
// retried; an out-of-memory error puts that one tensor wholly on host memory; the tensors after it
// are committed as planned.
TEST(CommitSafety, ADriverFailureAtTheCommitCostsOnlyItsOwnTensor) {
  struct Case {
    const char* failure;  // SIMCUDA_FAIL: the 1st zero-fill fails; the 51st cuMemCreate (48 KV tensors
                          // and 2 scratch handles come first) is the first of the commit
    bool one_tensor_on_host;
  };
  for (const Case& c : {Case{"SIMCUDA_FAIL=cuMemsetD8_v2:1:CUDA_ERROR_UNKNOWN", false},
                        Case{"SIMCUDA_FAIL=cuMemCreate:51:CUDA_ERROR_OUT_OF_MEMORY", true}}) {
    SCOPED_TRACE(c.failure);
    const std::string dir = make_temp_dir();
    std::vector<std::string> env = scenario_env(SEED_SCENARIO);
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + dir, c.failure});
    const RunResult r = run_program(
        {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95"}, env, {}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("KV verified"), std::string::npos);
    const auto files = trace_files(dir);
    ASSERT_EQ(files.size(), 1u);
    const auto trace = kvremap::trace::read_trace(files[0]);
    const auto* plan = find_event(trace, "kv commit plan");
    const auto* committed = find_event(trace, "kv committed");
    ASSERT_NE(plan, nullptr);
    ASSERT_NE(committed, nullptr);
    const auto planned = plan->args.at("host_bytes").get<std::uint64_t>();
    const auto placed = committed->args.at("host_bytes").get<std::uint64_t>();
    if (!c.one_tensor_on_host) {
      EXPECT_EQ(placed, planned) << "retried, as planned";
    } else {
      const auto tensor =
          plan->args.at("kv_bytes").get<std::uint64_t>() / plan->args.at("tensors").get<std::uint64_t>();
      EXPECT_EQ(placed, planned - plan->args.at("host_bytes_per_tensor").get<std::uint64_t>() + tensor);
      EXPECT_NE(r.err.find("the device refused 1 of the planned tensor shares"), std::string::npos) << r.err;
    }
  }
}

// SIGKILL at any point of a deferring start-up — loading, profiling, the KV burst, the deferral,
// autotuning, capture, the commit, serving — leaves a trace that reads and validates, up to its
// last whole event.
TEST(CommitSafety, AKillAtAnyPointLeavesALoadableTrace) {
  const std::string program = link_as(VLLM_LIKE, "vllm");
  std::vector<std::string> env = scenario_env(SEED_SCENARIO);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer"});
  const std::vector<std::string> argv = {program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95"};
  // How far a whole start-up goes, in trace bytes: the kill points are spread over it by progress,
  // so a busy machine cannot push them past the end.
  const auto with_trace_dir = [&env](const std::string& dir) {
    std::vector<std::string> e = env;
    e.push_back("KVREMAP_TRACE_DIR=" + dir);
    return e;
  };
  const std::string whole_dir = make_temp_dir();
  ASSERT_EQ(run_program(argv, with_trace_dir(whole_dir), {}, 120).exit_code, 0);
  const std::uint64_t whole = trace_bytes(whole_dir);
  ASSERT_GT(whole, 0u);
  const int points = repetitions(24, 8, 4);
  int killed = 0;
  for (int i = 0; i < points; ++i) {
    const std::string dir = make_temp_dir();
    // Evenly over the start-up, the first before its trace exists.
    if (WIFSIGNALED(kill_at_trace_bytes(argv, with_trace_dir(dir), dir, whole * i / points))) ++killed;
    for (const std::string& file : trace_files(dir)) {
      SCOPED_TRACE(file + " killed at point " + std::to_string(i));
      kvremap::trace::Trace trace;
      ASSERT_NO_THROW(trace = kvremap::trace::read_trace(file));
      EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
    }
  }
  // Every point lies before the whole start-up's last byte; only those in its last flushes (the
  // serving requests, the summary) can see the program exit before the poll.
  EXPECT_GT(killed, points / 2) << "the points fall inside the start-up";
}
