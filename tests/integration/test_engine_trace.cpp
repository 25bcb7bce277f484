// The vLLM-like engine under kvremap in observe mode: unchanged outcome, and a trace that names its start-up.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;

// The simulated device the scenario describes, as the engine itself prints it.
std::vector<std::string> scenario_env(const char* scenario = SEED_SCENARIO) {
  return kvremap::testing::scenario_simcuda_env(VLLM_LIKE, scenario);
}

// The example engine under the name kvremap recognises vLLM by, as `vllm serve` runs.
const std::string& vllm_program() {
  static const std::string link = link_as(VLLM_LIKE, "vllm");
  return link;
}

RunResult run_engine(const char* utilization, std::vector<std::string> extra_env, const std::string& cwd = "",
                     const char* scenario = SEED_SCENARIO) {
  std::vector<std::string> env = scenario_env(scenario);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return run_program({vllm_program(), "--scenario", scenario, "--gpu-memory-utilization", utilization}, env,
                     {"LD_PRELOAD"}, 120, 9, cwd);
}

// The engine's KV figure from its "started, KV <n> GiB" line, or a negative number without one.
double started_kv_gib(const std::string& out) {
  static const std::regex started(R"(started, KV ([0-9.]+) GiB)");
  std::smatch m;
  return std::regex_search(out, m, started) ? std::stod(m[1]) : -1.0;
}

// The engine's output without its wall-clock figures ("took 48.00 GiB and 0.003 seconds"), which
// differ between any two runs.
std::string without_timings(const std::string& text) {
  static const std::regex timings(R"([0-9.]+ (seconds|secs))");
  return std::regex_replace(text, timings, "<time>");
}

// Standard error without the engine root's start-up line ("kvremap 0.1.0 loaded into vllm …"), which
// says kvremap is there; `had` tells whether it was the first line.
std::string without_start_up_line(const std::string& err, bool* had) {
  static const std::regex start_up(R"(^kvremap [0-9.]+ loaded into vllm \(pid [0-9]+\): [^\n]*\n)");
  *had = std::regex_search(err, start_up);
  return std::regex_replace(err, start_up, "", std::regex_constants::format_first_only);
}

}  // namespace

TEST(EngineTrace, ObserveModeLeavesTheSeedOutcomesAsTheyAre) {
  ASSERT_FALSE(scenario_env().empty());
  for (const char* u : {"0.8", "0.95"}) {
    const std::string dir = make_temp_dir();
    const RunResult plain = run_engine(u, {});
    const RunResult traced =
        run_engine(u, {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=observe", "KVREMAP_TRACE_DIR=" + dir});
    EXPECT_EQ(plain.exit_code, std::string(u) == "0.8" ? 0 : 5) << plain.out;
    EXPECT_EQ(traced.exit_code, plain.exit_code) << u;
    EXPECT_EQ(without_timings(traced.out), without_timings(plain.out)) << u;
    bool announced = false;
    EXPECT_EQ(without_timings(without_start_up_line(traced.err, &announced)), without_timings(plain.err))
        << u << " (the OOM report)";
    EXPECT_TRUE(announced) << traced.err;
  }
}

TEST(EngineTrace, TheTraceNamesTheStartUpPhasesAndTheirMemory) {
  const std::string dir = make_temp_dir();
  const RunResult r =
      run_engine("0.8", {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=observe", "KVREMAP_TRACE_DIR=" + dir});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const auto trace = kvremap::trace::read_trace(files[0]);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});

  std::vector<std::string> phases;
  for (const auto& p : trace.phase_changes) phases.push_back(p.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"loading", "profiling", "kv_allocation", "post_kv_warmup", "capture",
                                              "serving"}));

  ASSERT_TRUE(trace.summary.has_value());
  EXPECT_EQ(trace.summary->counts.at("captures"), 67u) << "one capture per batch size";
  const auto& cats = trace.summary->devices.at(0).categories;
  // The scenario's 2.30 GiB graph pool, 0.3 GiB of graph execs and 0.4 GiB of modules.
  EXPECT_NEAR(static_cast<double>(cats.at("graph_pool").peak_bytes) / kMiB, 2.30 * 1024, 8);
  EXPECT_NEAR(static_cast<double>(cats.at("graph_exec").live_bytes) / kMiB, 0.30 * 1024, 1);
  EXPECT_NEAR(static_cast<double>(cats.at("module").live_bytes) / kMiB, 0.40 * 1024, 1);
  // Every checkpoint the engine took is there, with what the driver said.
  EXPECT_GE(trace.checkpoints.size(), 4u);
  for (const auto& c : trace.checkpoints) EXPECT_EQ(c.driver_free, c.returned_free);
}

// Issue 4's seed: stock vLLM runs out of memory after sizing its KV cache at 0.9 and 0.95; with
// kvremap deferring the KV backing it starts, with the KV cache the engine itself asked for.
TEST(EngineTrace, DeferModeStartsTheSeedScenarioWhereStockRunsOutOfMemory) {
  for (const char* u : {"0.9", "0.95"}) {
    SCOPED_TRACE(u);
    const RunResult stock = run_engine(u, {});
    EXPECT_EQ(stock.exit_code, 5) << "stock runs out of memory";
    const std::string dir = make_temp_dir();
    const RunResult r =
        run_engine(u, {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir, "KVREMAP_MODE=defer"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("vllm_like: started, KV"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("KV verified"), std::string::npos) << "graph replays read back what they wrote";
    // The engine's own sizing line is the same as without kvremap: nothing changed its request.
    const auto sizing = [](const std::string& out) {
      const auto at = out.find("Available KV cache memory:");
      return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
    };
    EXPECT_EQ(sizing(r.out), sizing(stock.out));
    const auto files = trace_files(dir);
    ASSERT_EQ(files.size(), 1u);
    const auto trace = kvremap::trace::read_trace(files[0]);
    std::vector<std::string> kv_events;
    for (const auto& e : trace.other_events)
      if (e.cat == "kv") kv_events.push_back(e.name);
    EXPECT_EQ(kv_events, (std::vector<std::string>{"kv arena reserved", "kv deferred", "kv commit plan", "kv committed",
                                                   "kv profile written", "kv serving peaks", "kv profile written"}));
    // Placed in the arena: exactly the 48 KV tensors — never weights, profiling activations, the
    // attention workspace allocated after them, or the IPC-shared all-reduce buffers.
    std::size_t placed = 0, kv_regions = 0, moved_out = 0;
    for (const auto& a : trace.allocs)
      if (a.category == "kv" && a.api != "kvremap reclassify") ++placed;
    for (const auto& f : trace.frees)
      if (f.api == "kvremap reclassify") ++moved_out;
    for (const auto& e : trace.other_events) {
      if (e.name == "kv deferred") kv_regions = e.args.at("regions").get<std::size_t>();
      if (e.name == "kv arena reserved") {
        EXPECT_EQ(e.args.at("device"), 0);
        // Default reservation: twice the device, rounded up to whole chunks.
        const std::uint64_t reserved = e.args.at("reserved_bytes").get<std::uint64_t>();
        EXPECT_GE(reserved, 2 * trace.device_total_bytes.at(0));
        EXPECT_LT(reserved, 2 * trace.device_total_bytes.at(0) + e.args.at("chunk_bytes").get<std::uint64_t>());
        EXPECT_EQ(reserved % e.args.at("chunk_bytes").get<std::uint64_t>(), 0u);
      }
    }
    EXPECT_EQ(kv_regions, 48u);
    EXPECT_EQ(placed, kv_regions);
    EXPECT_EQ(moved_out, 0u);
    EXPECT_NE(r.out.find("cudaIpcGetMemHandle works on all"), std::string::npos) << r.out;
    // What post-KV work really needed, measured: the scenario's 11 GiB autotune peak plus the
    // persistent buffers allocated right after the KV tensors (256 MiB attention workspace, block
    // tables, slot mapping: 0.26 GiB), 2.3 GiB graph pool, 0.3 GiB of graph execs, 0.4 GiB of modules.
    for (const auto& e : trace.other_events) {
      if (e.name != "kv committed") continue;
      EXPECT_EQ(e.args.at("trigger"), "graph launch") << "auto commits before the first replay";
      const auto& peaks = e.args.at("post_kv_peaks");
      const auto gib_above = [&](const char* c) { return peaks.at(c).at("peak_above").get<double>() / (1ull << 30); };
      EXPECT_NEAR(gib_above("other"), 11.26, 0.05);
      EXPECT_NEAR(gib_above("graph_pool"), 2.3, 0.02);
      EXPECT_NEAR(gib_above("graph_exec"), 0.3, 0.01);
      EXPECT_NEAR(gib_above("module"), 0.4, 0.01);
    }
    ASSERT_TRUE(trace.summary.has_value());
    EXPECT_GT(trace.summary->devices.at(0).categories.at("kv").live_bytes, 10ull << 30) << "the KV cache, in kv";
  }
}

TEST(EngineTrace, DeferModeStartsTheSglangLikeEngineToo) {
  std::vector<std::string> env = scenario_env();
  const std::vector<std::string> args = {
      link_as(VLLM_LIKE, "sglang"), "serve", "--scenario", SEED_SCENARIO, "--engine", "sglang",
      "--mem-fraction-static",      "0.9"};
  EXPECT_EQ(run_program(args, env, {"LD_PRELOAD"}).exit_code, 5) << "stock SGLang-like runs out of memory";
  env.push_back("LD_PRELOAD=" KVREMAP_PRELOAD);
  env.push_back("KVREMAP_MODE=defer");
  env.push_back("KVREMAP_TRACE=off");
  const RunResult r = run_program(args, env, {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("KV verified"), std::string::npos);
}

// vLLM versions that estimate graph memory while profiling take the estimate off the KV budget, so
// 0.9 starts stock; 0.95 still runs out of memory (autotune is not estimated), and deferral
// starts it with a larger cache than stock 0.9 gets.
TEST(EngineTrace, DeferModeAlsoHelpsEnginesThatEstimateGraphMemory) {
  const auto run = [](const char* u, std::vector<std::string> env) {
    return run_engine(u, std::move(env), "", GRAPH_ESTIMATE_SCENARIO);
  };
  const RunResult stock_90 = run("0.9", {});
  ASSERT_EQ(stock_90.exit_code, 0) << stock_90.out << stock_90.err;
  EXPECT_EQ(run("0.95", {}).exit_code, 5) << "stock 0.95 runs out of memory";
  const RunResult deferred = run("0.95", {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE=off"});
  ASSERT_EQ(deferred.exit_code, 0) << deferred.out << deferred.err;
  EXPECT_NE(deferred.out.find("KV verified"), std::string::npos);
  EXPECT_GT(started_kv_gib(deferred.out), started_kv_gib(stock_90.out) + 3.0) << stock_90.out << deferred.out;
}

// KVREMAP_COMMIT=first-launch: the first launch after the KV burst commits, before autotuning and
// any capture: no gain, never wrong; the engine starts where stock does and its graphs verify.
TEST(EngineTrace, FirstLaunchCommitStartsTheGraphEstimatingEngine) {
  const std::string dir = make_temp_dir();
  const RunResult r = run_engine(
      "0.8",
      {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_COMMIT=first-launch", "KVREMAP_TRACE_DIR=" + dir},
      "", GRAPH_ESTIMATE_SCENARIO);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("KV verified"), std::string::npos);
  EXPECT_GT(started_kv_gib(r.out), 0.0) << r.out;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  std::vector<std::string> kv_events;
  for (const auto& e : kvremap::trace::read_trace(files[0]).other_events) {
    if (e.cat == "kv") kv_events.push_back(e.name);
    if (e.name == "kv committed") {
      EXPECT_EQ(e.args.at("trigger"), "first launch");
    }
  }
  EXPECT_EQ(kv_events, (std::vector<std::string>{"kv arena reserved", "kv deferred", "kv commit plan", "kv committed",
                                                 "kv profile written", "kv serving peaks", "kv profile written"}));
}

// The stop writes this start's profile first: the same command started again, without `kvremap run`,
// is sized from it and serves.
TEST(EngineTrace, DeficitFailStopsWithWhatToChange) {
  const std::string profiles = make_temp_dir();
  const std::vector<std::string> env = {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_DEFICIT=fail",
                                        "KVREMAP_TRACE=off", "KVREMAP_PROFILE_DIR=" + profiles};
  const RunResult r = run_engine("0.95", env);
  EXPECT_EQ(r.exit_code, 78) << "kvremap's own status for a KV cache that cannot be backed";
  // 0.95 of 79.19 GiB leaves about half a GiB too little once post-KV work and the serving
  // activations are counted: the message names it and the utilisation that fits.
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(kvremap: the KV cache \(23\.16 GiB\) does not fit: 0\.5[0-9] GiB missing on the device)")))
      << r.err;
  EXPECT_NE(r.err.find("--gpu-memory-utilization 0.94"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(GiB missing on the device [^\n]*; this start's profile is written, so the same command )"
                        R"(started again is sized from it\n)")))
      << "one line: " << r.err;
  EXPECT_EQ(r.out.find("started"), std::string::npos) << "never serves from scratch memory";

  const RunResult again = run_engine("0.95", env);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_GT(started_kv_gib(again.out), 0.0) << again.out;
  EXPECT_NE(again.out.find("KV verified"), std::string::npos) << again.out;
  // Sized from the profile: the commit line says where its KV cache went; how it was sized is an info line.
  EXPECT_NE(again.err.find("device 0: KV cache committed: "), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("sizing this start from profile "), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("was sized from profile"), std::string::npos) << "it reached its commit: " << again.err;
}

// A KV connector on vLLM's command line (here LMCache's multi-process adapter, which registers every KV
// tensor by legacy CUDA IPC right after allocating it, and VMM memory refuses that) keeps the KV cache
// out of the arena: the start runs as stock does, and one info line and the trace say why nothing was
// deferred.
TEST(EngineTrace, AKvConnectorKeepsTheKvCacheOutOfTheArena) {
  const std::vector<std::string> argv = {vllm_program(),
                                         "--scenario",
                                         SEED_SCENARIO,
                                         "--gpu-memory-utilization",
                                         "0.8",
                                         "--kv-transfer-config",
                                         R"({"kv_connector":"LMCacheMPConnector","kv_role":"kv_both"})"};
  const RunResult stock = run_program(argv, scenario_env(), {"LD_PRELOAD"}, 120, 9);
  ASSERT_EQ(stock.exit_code, 0) << stock.out << stock.err;
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = scenario_env();
  for (const std::string& e : {std::string("LD_PRELOAD=" KVREMAP_PRELOAD), std::string("KVREMAP_MODE=defer"),
                               "KVREMAP_TRACE_DIR=" + dir, std::string("KVREMAP_LOG_LEVEL=info")})
    env.push_back(e);
  const RunResult r = run_program(argv, env, {"LD_PRELOAD"}, 120, 9);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("registered 48 KV tensors with the KV connector (CUDA IPC)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV verified"), std::string::npos) << r.out;
  EXPECT_EQ(started_kv_gib(r.out), started_kv_gib(stock.out));
  const std::string line =
      "KVREMAP_MODE=defer deferred nothing: the engine's command line hands its KV cache to a KV connector "
      "(--kv-transfer-config)";
  std::size_t lines = 0;
  for (std::size_t at = r.err.find(line); at != std::string::npos; at = r.err.find(line, at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_EQ(r.err.find("warn"), std::string::npos) << "an info line, no warning: " << r.err;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  std::vector<std::string> kv_events;
  for (const auto& e : kvremap::trace::read_trace(files[0]).other_events)
    if (e.cat == "kv") kv_events.push_back(e.name);
  EXPECT_EQ(kv_events, std::vector<std::string>{"kv nothing deferred"});
}

// Perfetto draws the `device 0 bytes` counter as what the device holds: at 0.95 the seed's deferred KV cache at its
// size beside autotuning's peak is more than the device, so a counter that counted it so went past the device's total. The
// `device 0 kv bytes` counter says where that cache lies: all of it on the scratch while deferred, then the device
// and a host tail after the commit.
TEST(EngineTrace, TheCountersShowWhatTheDeviceHoldsAndWhereTheKvCacheLies) {
  const std::string dir = make_temp_dir();
  const RunResult r = run_engine("0.95", {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir, "KVREMAP_MODE=defer"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  kvremap::trace::ReadOptions every;
  every.keep_every_counter_sample = true;
  const auto trace = kvremap::trace::read_trace(files[0], every);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  const std::uint64_t total = trace.device_total_bytes.at(0);
  ASSERT_FALSE(trace.counters.empty());
  for (const auto& c : trace.counters) {
    std::uint64_t held = 0;
    for (const auto& [category, bytes] : c.bytes_by_category) held += bytes;
    EXPECT_LE(held, total) << "the device's counter at " << c.event.ts_us << " us holds more than the device";
  }
  ASSERT_FALSE(trace.kv_counters.empty());
  const auto committed_at = std::find_if(trace.other_events.begin(), trace.other_events.end(),
                                         [](const auto& e) { return e.name == "kv committed"; });
  ASSERT_NE(committed_at, trace.other_events.end());
  const auto* committed = &*committed_at;
  const std::uint64_t host_bytes = committed->args.at("host_bytes").get<std::uint64_t>();
  ASSERT_GT(host_bytes, 0u) << "0.95 leaves a host tail on the seed device";
  std::size_t deferred = 0, after_commit = 0;
  for (const auto& k : trace.kv_counters) {
    const auto& p = k.bytes_by_category;
    EXPECT_EQ(p.at("device") + p.at("scratch") + p.at("host"), p.at("reserved")) << k.event.ts_us;
    if (p.at("reserved") > 0 && p.at("scratch") == p.at("reserved")) ++deferred;  // all of it on the scratch
    if (k.event.ts_us >= committed->event.ts_us && p.at("host") == host_bytes &&
        p.at("device") == p.at("reserved") - host_bytes)
      ++after_commit;
  }
  EXPECT_GT(deferred, 0u) << "a sample while the KV cache was deferred";
  EXPECT_GT(after_commit, 0u) << "a sample after the commit with its host tail";
}

// Stock sizing at 0.95 runs out of memory in post-KV autotuning. The trace holds one snapshot per
// phase that saw an out-of-memory error: what was live then by category (the same figures as the
// counter sample written with it), who held it, and the request that failed, larger than what was free.
TEST(EngineTrace, AnOutOfMemoryErrorLeavesOneSnapshotPerPhase) {
  const std::string dir = make_temp_dir();
  const RunResult r =
      run_engine("0.95", {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=observe", "KVREMAP_TRACE_DIR=" + dir});
  ASSERT_EQ(r.exit_code, 5) << r.out << r.err;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const auto trace = kvremap::trace::read_trace(files[0]);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  std::vector<const kvremap::trace::OtherEvent*> snapshots;
  for (const auto& e : trace.other_events)
    if (e.cat == "oom" && e.name == "oom snapshot") snapshots.push_back(&e);
  ASSERT_FALSE(snapshots.empty()) << "the engine's out-of-memory error left no snapshot";
  std::vector<std::string> phases;
  for (const auto* e : snapshots) phases.push_back(e->args.at("phase").get<std::string>());
  std::vector<std::string> unique = phases;
  std::sort(unique.begin(), unique.end());
  EXPECT_EQ(std::unique(unique.begin(), unique.end()), unique.end()) << "one snapshot per phase";
  EXPECT_NE(std::find(phases.begin(), phases.end(), "post_kv_warmup"), phases.end());
  for (const auto* e : snapshots) {
    const auto& a = e->args;
    SCOPED_TRACE(a.dump());
    EXPECT_GT(a.at("requested_bytes").get<std::uint64_t>(), a.at("device_free_bytes").get<std::uint64_t>());
    std::uint64_t sum = 0;
    for (const auto& [category, bytes] : a.at("live_bytes").items()) sum += bytes.get<std::uint64_t>();
    EXPECT_EQ(sum, a.at("live_total_bytes").get<std::uint64_t>());
    std::uint64_t held = a.at("other_bytes").get<std::uint64_t>();
    for (const auto& c : a.at("top_callers")) {
      EXPECT_FALSE(c.at("caller").get<std::string>().empty());
      EXPECT_GT(c.at("allocations").get<std::uint64_t>(), 0u);
      held += c.at("bytes").get<std::uint64_t>();
    }
    EXPECT_EQ(held, sum) << "named callers and the rest add up to what was live";
    EXPECT_FALSE(a.at("top_callers").empty()) << "the weights and the KV cache have callers";
    // The counter sample forced right after the snapshot shows the same bytes.
    bool matched = false;
    for (const auto& c : trace.counters) {
      if (c.event.index < e->event.index || c.device != a.at("device").get<int>()) continue;
      matched = true;
      for (const auto& [category, bytes] : a.at("live_bytes").items())
        EXPECT_EQ(c.bytes_by_category.count(category) ? c.bytes_by_category.at(category) : 0u,
                  bytes.get<std::uint64_t>())
            << category;
      break;
    }
    EXPECT_TRUE(matched) << "a counter sample at the snapshot";
  }
}
