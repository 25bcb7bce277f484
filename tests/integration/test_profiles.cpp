// Profiles written by defer mode, through LD_PRELOAD on the simulated driver: one whole file per start-up
// and rank, what the commit measured in it, no effect on the engine when it cannot be written, never a
// half-written file under the final name.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "policy/options.h"
#include "policy/profile.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::kill_at_trace_bytes;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::repetitions;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_bytes;
using kvremap::testing::trace_files;

namespace {
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
}  // namespace

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

// How many lines of `text` hold `needle`.
std::size_t lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) n += line.find(needle) != std::string::npos;
  return n;
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
  const std::vector<std::string> argv = seed_argv(program);
  const std::string whole_dir = make_temp_dir();
  ASSERT_EQ(run_program(argv, defer_env(whole_dir, make_temp_dir()), {}, 120).exit_code, 0);
  const std::uint64_t whole = trace_bytes(whole_dir);
  const int points = repetitions(24, 8, 4);
  int with_profile = 0;
  for (int i = 0; i < points; ++i) {
    const std::string traces = make_temp_dir(), profiles = make_temp_dir();
    // By trace progress over the second half of the start-up, where the commit and its profile are.
    kill_at_trace_bytes(argv, defer_env(traces, profiles), traces, whole / 2 + whole * (i + 1) / (2 * points));
    const DirContents c = contents(profiles);
    EXPECT_LE(c.profiles.size(), 1u);
    for (const std::string& f : c.profiles) {
      ++with_profile;
      const auto read = read_back(f);
      EXPECT_TRUE(read.profile) << f << " killed at point " << i << ": " << read.problem;
    }
  }
  std::printf("kills that left a profile: %d of %d\n", with_profile, points);
}

// ---- Learned sizing: the next start, sized from the profile --------------------------------------

namespace {

// One start's outcome: its exit, its trace (one per process) and the figures its kv events give.
struct Start {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
  const kvremap::trace::OtherEvent* event(const std::string& name, std::size_t process = 0) const {
    return process < traces.size() ? find_event(traces[process], name) : nullptr;
  }
  std::uint64_t u(const std::string& name, const char* field, std::size_t process = 0) const {
    const auto* e = event(name, process);
    return e ? e->args.at(field).get<std::uint64_t>() : 0;
  }
  std::int64_t i(const std::string& name, const char* field, std::size_t process = 0) const {
    const auto* e = event(name, process);
    return e ? e->args.at(field).get<std::int64_t>() : 0;
  }
};

Start start(const std::vector<std::string>& argv, const std::string& profiles, std::vector<std::string> extra = {},
            int ranks = 1) {
  const std::string traces = make_temp_dir();
  std::vector<std::string> env = defer_env(traces, profiles, ranks);
  env.insert(env.end(), extra.begin(), extra.end());
  Start s;
  s.run = run_program(argv, env, {}, 240);
  for (const std::string& f : trace_files(traces)) {
    s.traces.push_back(kvremap::trace::read_trace(f));
    EXPECT_EQ(kvremap::trace::validate(s.traces.back()), std::vector<std::string>{}) << f;
  }
  // Rank order: by the device each process committed on.
  std::sort(s.traces.begin(), s.traces.end(), [](const auto& a, const auto& b) {
    const auto device = [](const kvremap::trace::Trace& t) {
      const auto* e = find_event(t, "kv deferred");
      return e ? e->args.at("device").get<int>() : -1;
    };
    return device(a) < device(b);
  });
  return s;
}

// The largest KV cache the device held beside the headroom at the first start's commit: the
// driver's free memory then (the KV cache on scratch) less the headroom.
// What fits on the device beside the headroom `later` keeps, with the memory free at `first`'s commit (the
// same start-up work ran before both commits). `later` keeps the first start's headroom, or, once serving
// was measured, what serving needs instead of SGLang's estimate.
std::uint64_t oracle_kv(const Start& first, const Start& later, std::size_t process = 0) {
  return first.u("kv commit plan", "device_free_bytes", process) - later.u("kv commit plan", "headroom_bytes", process);
}

std::vector<std::string> sglang_argv(const std::string& fraction) {
  return {link_as(VLLM_LIKE, "sglang"), "serve", "--scenario", SEED_SCENARIO, "--engine", "sglang",
          "--mem-fraction-static",      fraction};
}

std::vector<std::string> vllm_argv(const std::string& utilization) {
  return {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", utilization};
}

// The seed scenario copied into a temporary directory, and the vLLM command line that starts it at
// 0.95: a test rewrites the copy between starts (post-KV work that grew) and may write `text` back.
struct SeedCopy {
  std::string path = make_temp_dir() + "/seed.json";
  std::string text = slurp(SEED_SCENARIO);  // the seed as shipped
  std::vector<std::string> argv = vllm_argv("0.95");
  SeedCopy() {
    write(text);
    argv[2] = path;
  }
  void write(const std::string& contents) const { std::ofstream(path, std::ios::trunc) << contents; }
};

// The checks every sized second start must pass: it started and served (the engine verified its KV
// reads; the simulator's serving oracle fails any access to scratch-backed KV), every KV byte on the
// device with the headroom kept, and at least 99.5% of what the device could hold.
void expect_fits_on_device(const Start& second, const Start& first, std::size_t process = 0) {
  EXPECT_EQ(second.run.exit_code, 0) << second.run.out << second.run.err;
  ASSERT_NE(second.event("kv committed", process), nullptr);
  const std::uint64_t oracle = oracle_kv(first, second, process);
  EXPECT_EQ(second.u("kv committed", "host_bytes", process), 0u);
  EXPECT_GE(second.i("kv committed", "margin_bytes", process), 0);
  const std::uint64_t kv = second.u("kv committed", "kv_bytes", process);
  EXPECT_GE(static_cast<double>(kv), 0.995 * static_cast<double>(oracle)) << kv << " of " << oracle;
  EXPECT_LE(kv, oracle);
}

}  // namespace

// The seed at 0.95: the first start's KV cache lacks 0.51 GiB beside the headroom (host tail); the
// second, sized from its profile, holds all of its KV cache on the device, within 0.5% of what fits;
// a third start changes nothing.
TEST(LearnedSizing, TheSecondStartOfTheSeedFitsOnTheDevice) {
  const std::string profiles = make_temp_dir();
  const Start first = start(vllm_argv("0.95"), profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_GT(first.u("kv committed", "host_bytes"), 0u) << "the first start has a deficit";
  EXPECT_EQ(first.event("kv sizing adjusted"), nullptr) << "no profile yet";
  const std::uint64_t deficit = first.u("kv committed", "deficit_bytes");
  // At the default log level, the commit says where the KV cache is and what the next start does.
  EXPECT_EQ(lines_with(first.run.err, "device 0: KV cache committed: "), 1u) << first.run.err;
  EXPECT_NE(first.run.err.find(") on host memory (the last "), std::string::npos) << first.run.err;
  EXPECT_NE(first.run.err.find("The next start of this configuration is sized from profile " + profiles + "/vllm-"),
            std::string::npos)
      << first.run.err;

  const Start second = start(vllm_argv("0.95"), profiles, {"KVREMAP_LOG_LEVEL=info"});
  expect_fits_on_device(second, first);
  const auto* adjusted = second.event("kv sizing adjusted");
  ASSERT_NE(adjusted, nullptr) << second.run.err;
  EXPECT_GE(adjusted->args.at("shift_bytes").get<std::int64_t>(), static_cast<std::int64_t>(deficit));
  EXPECT_EQ(
      adjusted->args.at("driver_free").get<std::uint64_t>() - adjusted->args.at("reported_free").get<std::uint64_t>(),
      adjusted->args.at("shift_bytes").get<std::uint64_t>());
  EXPECT_EQ(second.traces[0].checkpoints.at(adjusted->args.at("query_index").get<std::size_t>()).returned_free,
            adjusted->args.at("reported_free").get<std::uint64_t>());
  EXPECT_EQ(second.traces[0].checkpoints.at(0).returned_free, second.traces[0].checkpoints.at(0).driver_free)
      << "the start-up check's query is never moved";
  // The adjusted query is the one the engine sized from (the commit counts a shift only then).
  EXPECT_EQ(second.i("kv committed", "sizing_shift_bytes"), adjusted->args.at("shift_bytes").get<std::int64_t>());
  EXPECT_EQ(second.event("kv committed")->args.at("same_start_flags").get<std::string>(),
            "--kv-cache-memory " + std::to_string(second.u("kv committed", "kv_bytes")));
  EXPECT_EQ(lines_with(second.run.err, "sizing this start from profile "), 1u) << second.run.err;

  const Start third = start(vllm_argv("0.95"), profiles);
  expect_fits_on_device(third, first);
  EXPECT_NE(third.run.err.find("device 0: KV cache committed: "), std::string::npos) << third.run.err;
  EXPECT_NE(third.run.err.find(", all on the device ("), std::string::npos) << third.run.err;
  EXPECT_EQ(third.u("kv committed", "kv_bytes"), second.u("kv committed", "kv_bytes")) << "settled";
}

// SGLang's MHA pool as it allocates it by default (ENGINES-2026.md sequence D, step 6): every layer's K
// buffer, then every layer's V buffer, each half a layer's KV. The 2L equal tensors are one burst: stock runs
// out of memory after them; under kvremap all 2L are deferred, the first start serves, and the second,
// sized from the first one's profile, holds its whole KV cache on the device.
TEST(LearnedSizing, SglangsKBuffersThenVBuffersAreOneBurstAndTheSecondStartFits) {
  std::vector<std::string> argv = sglang_argv("0.9");
  argv.insert(argv.end(), {"--kv-layout", "k-then-v"});
  const RunResult stock =
      run_program(argv, kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO), {"LD_PRELOAD"}, 120);
  EXPECT_EQ(stock.exit_code, 5) << "stock runs out of memory: " << stock.out << stock.err;
  const std::string profiles = make_temp_dir();
  const Start first = start(argv, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  EXPECT_NE(first.run.out.find("KV verified"), std::string::npos) << first.run.out;
  std::smatch allocated;
  ASSERT_TRUE(std::regex_search(first.run.out, allocated, std::regex(R"(phase kv-cache: (\d+) KV tensors of)")))
      << first.run.out;
  const std::uint64_t tensors = std::stoull(allocated[1]);
  EXPECT_EQ(tensors % 2, 0u);
  EXPECT_GE(tensors, 4u);
  EXPECT_EQ(first.u("kv deferred", "regions"), tensors) << "every K and every V buffer deferred";
  // Every byte on the device with the headroom kept, and short of what fits by less than one step of the
  // engine's sizing: each of the 2L tensors is a whole number of 2 MiB granules, so the cache moves in steps of
  // 2L granules (0.8% of it here, where expect_fits_on_device's 0.5% bound is for L tensors).
  const Start second = start(argv, profiles);
  EXPECT_EQ(second.run.exit_code, 0) << second.run.out << second.run.err;
  EXPECT_EQ(second.u("kv committed", "host_bytes"), 0u);
  EXPECT_GE(second.i("kv committed", "margin_bytes"), 0);
  const std::uint64_t oracle = oracle_kv(first, second), kv = second.u("kv committed", "kv_bytes");
  EXPECT_LE(kv, oracle);
  EXPECT_LT(oracle - kv, tensors * (2ULL << 20)) << kv << " of " << oracle;
  EXPECT_EQ(second.u("kv deferred", "regions"), tensors);
  EXPECT_NE(second.run.out.find("KV verified"), std::string::npos) << second.run.out;
}

// Two models served under one process title (the engine core renames itself VLLM::EngineCore before any
// CUDA call): each start is keyed by the line `vllm serve` started with, handed down to the engine process,
// so each model keeps its own profile; `--model NAME` is the positional model, and a different --port is the
// same start.
TEST(LearnedSizing, TwoModelsUnderOneProcessTitleKeepTheirOwnProfiles) {
  const std::string profiles = make_temp_dir();
  const auto serve = [](std::initializer_list<const char*> model) {
    std::vector<std::string> argv = vllm_argv("0.95");
    argv.insert(argv.begin() + 1, "serve");
    argv.insert(argv.begin() + 2, model.begin(), model.end());
    return argv;
  };
  const auto profile_count = [&] {
    std::size_t n = 0;
    for (const auto& entry : fs::directory_iterator(profiles)) n += entry.path().extension() == ".json";
    return n;
  };
  const Start a = start(serve({"org/model-a"}), profiles);
  const Start b = start(serve({"org/model-b"}), profiles);
  for (const Start* s : {&a, &b}) {
    ASSERT_EQ(s->run.exit_code, 0) << s->run.err;
    ASSERT_EQ(s->traces.size(), 1u);
    // The title alone: the argv area setproctitle cleared is no padding after it.
    EXPECT_EQ(s->traces[0].header.cmdline, "VLLM::EngineCore");
    EXPECT_EQ(s->event("kv sizing adjusted"), nullptr) << "no profile of this model yet";
  }
  EXPECT_EQ(profile_count(), 2u) << "one profile per model";
  std::vector<std::string> again = serve({"--model", "org/model-a"});
  again.insert(again.end(), {"--port", "8123"});
  const Start a2 = start(again, profiles);
  ASSERT_EQ(a2.run.exit_code, 0) << a2.run.err;
  EXPECT_NE(a2.event("kv sizing adjusted"), nullptr) << "sized from model-a's profile: " << a2.run.err;
  EXPECT_EQ(profile_count(), 2u);
}

// SGLang's variants (ENGINES-2026.md sequence E). A hybrid Mamba/GDN model (36 of 48 layers linear attention):
// its state pool — one conv-state and one temporal-state tensor for every linear layer — comes before the
// other layers' KV buffers; the temporal state, a quarter of the sizing query's free memory and more, is the
// one-allocation burst and is deferred (it is zero-filled request state as KV is), the rest stays backed.
// EAGLE speculative decoding: the draft model's weights after the target's, the draft KV pool (another size)
// right after the target's: the target's tensors are the burst, the draft's stay backed. Each: stock out of
// memory; the first start serves with every KV and state check passing; the second holds all it deferred on
// the device.
TEST(LearnedSizing, SglangsHybridAndSpeculativeStartsServeAndTheSecondStartFits) {
  struct Variant {
    std::vector<std::string> flags;
    std::uint64_t deferred;  // tensors deferred
    std::uint64_t tensors;   // the engine's KV (and state) tensors
  };
  for (const Variant& v : {Variant{{"--mamba-layers", "36"}, 1, 2 + 12},
                           Variant{{"--speculative-algorithm", "EAGLE"}, 48, 48 + 2},
                           Variant{{"--speculative-algorithm", "EAGLE", "--kv-layout", "k-then-v"}, 96, 96 + 2}}) {
    std::vector<std::string> argv = sglang_argv("0.9");
    argv.insert(argv.end(), v.flags.begin(), v.flags.end());
    SCOPED_TRACE(v.flags[0] + " " + v.flags.back());
    const RunResult stock =
        run_program(argv, kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO), {"LD_PRELOAD"}, 120);
    EXPECT_EQ(stock.exit_code, 5) << "stock runs out of memory: " << stock.out << stock.err;
    const std::string profiles = make_temp_dir();
    const Start first = start(argv, profiles);
    ASSERT_EQ(first.run.exit_code, 0) << first.run.out << first.run.err;
    EXPECT_NE(first.run.out.find("KV and req_to_token verified"), std::string::npos) << first.run.out;
    EXPECT_NE(first.run.out.find("phase kv-cache: " + std::to_string(v.tensors) + " KV tensors"), std::string::npos)
        << first.run.out;
    EXPECT_EQ(first.u("kv deferred", "regions"), v.deferred);
    const Start second = start(argv, profiles);
    EXPECT_EQ(second.run.exit_code, 0) << second.run.out << second.run.err;
    EXPECT_EQ(second.u("kv committed", "host_bytes"), 0u) << second.run.err;
    EXPECT_GE(second.i("kv committed", "margin_bytes"), 0);
    EXPECT_LE(second.u("kv committed", "kv_bytes"), oracle_kv(first, second));
    EXPECT_EQ(second.u("kv deferred", "regions"), v.deferred);
    EXPECT_NE(second.run.out.find("KV and req_to_token verified"), std::string::npos) << second.run.out;
  }
}

// vLLM >= 0.29 (one allocation for every layer's KV, ENGINES-2026.md sequence A) and SGLang's unified
// pool: stock runs out of memory after the KV cache; under kvremap the one allocation is deferred as one
// tensor, the first start serves with its deficit at the end of that allocation on host memory, and the
// second start, sized from the first one's profile, holds its whole KV cache on the device.
TEST(LearnedSizing, AOneAllocationKvCacheStartsAndTheSecondStartFits) {
  std::vector<std::string> vllm = vllm_argv("0.95"), sglang = sglang_argv("0.9");
  for (std::vector<std::string>* argv : {&vllm, &sglang}) {
    argv->insert(argv->end(), {"--kv-layout", "one-allocation"});
    SCOPED_TRACE((*argv)[0]);
    const RunResult stock =
        run_program(*argv, kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO), {"LD_PRELOAD"}, 120);
    EXPECT_EQ(stock.exit_code, 5) << "stock runs out of memory: " << stock.out << stock.err;
    const std::string profiles = make_temp_dir();
    const Start first = start(*argv, profiles);
    ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
    EXPECT_NE(first.run.out.find("KV verified"), std::string::npos) << first.run.out;
    EXPECT_EQ(first.u("kv deferred", "regions"), 1u);
    EXPECT_GT(first.u("kv committed", "host_bytes"), 0u) << "the first start has a deficit";
    EXPECT_NE(first.run.err.find("(the end of the one KV allocation: "), std::string::npos) << first.run.err;

    const Start second = start(*argv, profiles);
    expect_fits_on_device(second, first);
    EXPECT_EQ(second.u("kv deferred", "regions"), 1u);
    EXPECT_NE(second.run.out.find("KV verified"), std::string::npos) << second.run.out;
  }
}

// vLLM Model Runner V2 (ENGINES-2026.md sequence A, finding 11): one KV allocation; after autotuning, one
// graph_capture() stream where PIECEWISE graphs are warmed up and captured, and FULL graphs warmed up and then
// captured on PyTorch's default capture stream; warmup_kernels on the main stream. With FULL graphs alone the
// warm-up stream never captures: its warm-ups between captures stay start-up work, the commit comes after the
// last capture (at warmup_kernels), so every capture is measured, and the second start holds its KV cache on
// the device.
TEST(LearnedSizing, ModelRunnerV2CommitsAfterItsLastCaptureAndTheSecondStartFits) {
  for (const char* mode : {"FULL", "FULL_AND_PIECEWISE"}) {
    SCOPED_TRACE(mode);
    std::vector<std::string> argv = vllm_argv("0.95");
    argv.insert(argv.begin() + 1, "serve");
    argv.insert(argv.end(), {"--kv-layout", "one-allocation", std::string("-cc.cudagraph_mode=") + mode});
    const std::vector<std::string> v2 = {"VLLM_USE_V2_MODEL_RUNNER=1"};
    std::vector<std::string> stock_env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
    stock_env.insert(stock_env.end(), v2.begin(), v2.end());
    const RunResult stock = run_program(argv, stock_env, {"LD_PRELOAD"}, 120);
    EXPECT_EQ(stock.exit_code, 5) << "stock runs out of memory: " << stock.out << stock.err;

    const std::string profiles = make_temp_dir();
    const Start first = start(argv, profiles, v2);
    ASSERT_EQ(first.run.exit_code, 0) << first.run.out << first.run.err;
    EXPECT_NE(first.run.out.find("KV verified"), std::string::npos) << first.run.out;
    EXPECT_EQ(first.u("kv deferred", "regions"), 1u);
    const auto* committed = first.event("kv committed");
    ASSERT_NE(committed, nullptr);
    EXPECT_EQ(committed->args.at("trigger"), "kernel launch off the capture streams");
    const auto& captures = first.traces[0].captures;
    ASSERT_GE(captures.size(), 2u);
    std::set<std::string> capture_streams;
    for (const auto& c : captures) {
      capture_streams.insert(c.stream);
      EXPECT_LT(c.event.ts_us + c.dur_us, committed->event.ts_us) << "a capture after the commit: unmeasured";
    }
    EXPECT_EQ(capture_streams.size(), std::string_view(mode) == "FULL" ? 1u : 2u)
        << "FULL graphs on the default capture stream, PIECEWISE ones on graph_capture()'s";

    const Start second = start(argv, profiles, v2);
    expect_fits_on_device(second, first);
    EXPECT_NE(second.run.out.find("KV verified"), std::string::npos) << second.run.out;
  }
}

// vLLM V1 with graph-memory profiling (ENGINES-2026.md sequence B, findings 3 and 7): its sizing snapshot,
// then a minimal KV cache and probe captures between memory queries, then the real KV cache. The KV
// cache is deferred whatever the probes did, the profile records the snapshot as the sizing query (not
// the last probe query), and the second start, shifted there, holds its whole KV cache on the device.
TEST(LearnedSizing, VllmV1GraphProfilingIsSizedAtItsSnapshot) {
  std::vector<std::string> argv = vllm_argv("0.98");
  argv[2] = GRAPH_ESTIMATE_SCENARIO;
  const std::string profiles = make_temp_dir();
  const Start first = start(argv, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  EXPECT_EQ(first.u("kv deferred", "regions"), 48u);
  ASSERT_GT(first.u("kv committed", "host_bytes"), 0u) << "the first start has a deficit";
  // The queries of the graph-memory probes come after the snapshot: the profile's sizing query is the
  // first one taken after the profiling forward.
  const auto profile_files = [&] {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(profiles))
      if (entry.path().extension() == ".json") out.push_back(entry.path());
    return out;
  }();
  ASSERT_EQ(profile_files.size(), 1u);
  const nlohmann::json profile = nlohmann::json::parse(slurp(profile_files[0]));
  const std::size_t sizing = profile.at("sizing_query").at("index").get<std::size_t>();
  const auto& queries = first.traces[0].checkpoints;
  ASSERT_LT(sizing + 4, queries.size());
  for (std::size_t probe = sizing + 1; probe <= sizing + 4; ++probe) {
    EXPECT_NE(queries.at(probe).phase, "kv_allocation") << "two probes, each between two queries, precede the KV";
    EXPECT_LT(queries.at(probe).returned_free, queries.at(sizing).returned_free) << "the minimal KV cache is live";
  }

  const Start second = start(argv, profiles);
  expect_fits_on_device(second, first);
  const auto* adjusted = second.event("kv sizing adjusted");
  ASSERT_NE(adjusted, nullptr) << second.run.err;
  EXPECT_EQ(adjusted->args.at("query_index").get<std::size_t>(), sizing);
  EXPECT_EQ(second.event("kv sizing missed"), nullptr) << second.run.err;
}

// The same with a minimal KV cache large enough to be recognised as a KV burst (an MHA model: 128 MiB per
// layer, ENGINES-2026.md finding 7): it is deferred, freed before its commit, and the burst is looked for
// again, so the real KV cache after it is deferred and committed, and the engine serves from it.
TEST(LearnedSizing, AProfilingKvCacheFreedBeforeItsCommitRearmsRecognition) {
  const std::string scenario = make_temp_dir() + "/mha.json";
  std::string text = slurp(GRAPH_ESTIMATE_SCENARIO);
  const std::string from = "\"graph_profiling_kv_per_layer\": \"4MiB\"";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"graph_profiling_kv_per_layer\": \"128MiB\"");
  std::ofstream(scenario) << text;
  std::vector<std::string> argv = vllm_argv("0.95");
  argv[2] = scenario;
  const Start first = start(argv, make_temp_dir(), {"KVREMAP_LOG_LEVEL=info"});
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  EXPECT_NE(first.run.out.find("KV verified"), std::string::npos) << first.run.out;
  ASSERT_EQ(first.traces.size(), 1u);
  std::vector<std::uint64_t> deferred_tensors;
  for (const auto& e : first.traces[0].other_events)
    if (e.name == "kv deferred") deferred_tensors.push_back(e.args.at("tensor_bytes").get<std::uint64_t>());
  ASSERT_EQ(deferred_tensors.size(), 2u) << first.run.err;
  EXPECT_EQ(deferred_tensors[0], 128ull << 20) << "the profiling KV cache";
  EXPECT_GT(deferred_tensors[1], 128ull << 20) << "the real one";
  EXPECT_EQ(first.u("kv deferred", "regions"), 48u);
  EXPECT_NE(first.run.err.find("the KV burst is looked for again"), std::string::npos) << first.run.err;
  ASSERT_NE(first.event("kv committed"), nullptr);
  EXPECT_EQ(first.u("kv committed", "kv_bytes"), 48 * deferred_tensors[1]);
}

// An SGLang start at --mem-fraction-static 0.93 (issue 30): stock runs out of memory in capture. Its
// reserve, less what graphs and autotuning keep, is below its serving prefill's activations, so a commit
// that kept only the reserve would run out of memory on the first request. Before any start has measured
// serving, the commit keeps SGLang's own prefill estimate (12 GiB for its default 8192-token chunks on an
// 80 GiB device): the first start serves with its KV cache's tail on host memory, and the starts after it,
// sized from the serving need the first one measured, hold all of their KV on the device and serve.
TEST(LearnedSizing, TheSglangStartThatWouldRunOutInServingServesFromItsFirstStart) {
  EXPECT_EQ(run_program(sglang_argv("0.93"), kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO),
                        {"LD_PRELOAD"}, 120)
                .exit_code,
            5)
      << "stock runs out of memory";
  const std::string profiles = make_temp_dir();
  std::vector<Start> starts;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("start " + std::to_string(i + 1));
    starts.push_back(start(sglang_argv("0.93"), profiles));
    const Start& s = starts.back();
    ASSERT_NE(s.event("kv commit plan"), nullptr) << s.run.err;
    EXPECT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
    EXPECT_NE(s.run.out.find("vllm_like: started"), std::string::npos) << s.run.out;
    EXPECT_EQ(s.run.err.find("ran out of"), std::string::npos) << s.run.err;
    EXPECT_EQ(s.event("kv serving overflow"), nullptr);
    const std::string source = s.event("kv commit plan")->args.at("headroom_source").get<std::string>();
    if (i == 0) {
      EXPECT_EQ(source.rfind("SGLang's prefill estimate", 0), 0u) << source;
      EXPECT_GT(s.u("kv committed", "host_bytes"), 0u);
    } else {
      EXPECT_EQ(source.find("estimate"), std::string::npos) << source;
      expect_fits_on_device(s, starts[0]);
      ASSERT_NE(s.event("kv sizing adjusted"), nullptr) << s.run.err;
    }
  }
  // Measured, the serving need is below the estimate: the second start holds more KV on the device
  // than the first one did, and the third the same as the second.
  EXPECT_GT(starts[1].u("kv committed", "device_bytes"), starts[0].u("kv committed", "device_bytes"));
  EXPECT_EQ(starts[2].u("kv committed", "kv_bytes"), starts[1].u("kv committed", "kv_bytes"));
}

// Serving that needs more than the commit kept (a prefill larger than the profiled forward; SGLang with
// short chunks, whose estimate is below what its prefill takes): the first start's allocations the device
// refuses after the commit, and refuses again when the allocator asks once more, are backed by host memory
// (`kv serving overflow`), so it serves rather than
// failing, and its profile keeps what serving needed; the second start keeps that much free, holds all of
// its KV on the device and serves without overflow. No start fails in serving.
TEST(LearnedSizing, AServingNeedBeyondTheHeadroomIsCarriedOnceThenLearned) {
  SeedCopy seed;
  std::string text = seed.text;
  const std::string steps = "\"steps\": 3";
  ASSERT_NE(text.find(steps), std::string::npos);
  text.replace(text.find(steps), steps.size(), steps + ", \"activation_peak\": \"6GiB\"");
  seed.write(text);
  std::vector<std::string> sglang = {link_as(VLLM_LIKE, "sglang"), "serve", "--scenario", seed.path, "--engine",
                                     "sglang", "--mem-fraction-static", "0.93", "--chunked-prefill-size", "2048"};
  for (const std::vector<std::string>& argv : {seed.argv, sglang}) {
    SCOPED_TRACE(argv[0]);
    const std::string profiles = make_temp_dir();
    const Start first = start(argv, profiles);
    EXPECT_EQ(first.run.exit_code, 0) << first.run.out << first.run.err;
    EXPECT_NE(first.run.out.find("vllm_like: started"), std::string::npos) << first.run.out;
    const auto* overflow = first.event("kv serving overflow");
    ASSERT_NE(overflow, nullptr) << first.run.err;
    EXPECT_GT(overflow->args.at("host_bytes").get<std::uint64_t>(), 0u);
    EXPECT_NE(first.run.err.find("kvremap backs it with host memory"), std::string::npos)
        << first.run.err;
    const DirContents dir = contents(profiles);
    ASSERT_EQ(dir.profiles.size(), 1u);
    const auto learned = read_back(dir.profiles[0]);
    ASSERT_TRUE(learned.profile) << learned.problem;
    ASSERT_TRUE(learned.profile->serving_peak_bytes);
    // Beyond the headroom the commit kept (the 6 GiB prefill partly reuses blocks its allocator cached).
    EXPECT_GT(*learned.profile->serving_peak_bytes, first.u("kv commit plan", "headroom_bytes") + kGiB);

    const Start second = start(argv, profiles);
    EXPECT_EQ(second.event("kv serving overflow"), nullptr) << second.run.err;
    expect_fits_on_device(second, first);
    EXPECT_EQ(second.event("kv commit plan")->args.at("headroom_source").get<std::string>(),
              "serving need learned by the profile");
    EXPECT_EQ(second.u("kv commit plan", "headroom_bytes"), *learned.profile->serving_peak_bytes);
  }
}

namespace {

// The seed scenario at 0.95, whose commit keeps room for its profiled 3 GiB forward, serving with
// --first-request eager-prefill: a first prompt whose prefill holds `first_prompt` of activations (left in the
// allocator's cache, in segments too small for the next prefill's tensors), graph replays, then a prefill at
// `serving_peak`.
Start serve_after_a_short_prompt(const std::string& first_prompt, const std::string& serving_peak,
                                 std::vector<std::string> extra_env = {}) {
  SeedCopy seed;
  std::string text = seed.text;
  const std::string steps = "\"steps\": 3";
  EXPECT_NE(text.find(steps), std::string::npos);
  text.replace(text.find(steps), steps.size(),
               steps + ", \"activation_peak\": \"" + serving_peak + "\", \"first_prompt_activation_peak\": \"" +
                   first_prompt + "\"");
  seed.write(text);
  std::vector<std::string> argv = seed.argv;
  argv.insert(argv.end(), {"--first-request", "eager-prefill"});
  return start(argv, make_temp_dir(), std::move(extra_env));
}

// The first out-of-memory snapshot of the serving phase: the first serving refusal the engine was told of.
const kvremap::trace::OtherEvent* serving_refusal(const kvremap::trace::Trace& t) {
  for (const auto& e : t.other_events)
    if (e.cat == "oom" && e.args.value("phase", "") == "serving") return &e;
  return nullptr;
}

// The value of the metrics file's only sample of `family` ("NAME{labels} VALUE"), or "" when there is not one.
std::string metric_value(const std::string& file, const std::string& family) {
  std::istringstream lines(slurp(file));
  std::string found;
  std::size_t samples = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(family + "{", 0) == 0) {
      ++samples;
      found = line.substr(line.rfind(' ') + 1);
    }
  return samples == 1 ? found : std::string();
}

std::size_t cuda_frees_between(const kvremap::trace::Trace& t, double from_us, double to_us) {
  return static_cast<std::size_t>(std::count_if(t.frees.begin(), t.frees.end(), [&](const auto& f) {
    return f.api == "cudaFree" && f.event.ts_us >= from_us && f.event.ts_us <= to_us;
  }));
}

}  // namespace

// A serving prefill larger than the commit left room for (6 GiB of activations beside room for 3 GiB), after a
// short first prompt left 0.1 GiB of segments in the allocator's cache. The replica's allocator meets a refused cudaMalloc as PyTorch's malloc does (alloc_block, release_cached_blocks,
// alloc_block: c10/cuda/CUDACachingAllocator.cpp): the first refusal reaches it as the out-of-memory error (the
// serving phase's oom snapshot, for the size later carried), it frees its cached segments (cudaFree after the
// snapshot), and only its retry of that size is backed by host memory, the frees reported with it.
TEST(ServingOverflow, OnlyTheAllocatorsRetryAfterItFreedItsCacheGetsHostMemory) {
  const std::string metrics = make_temp_dir() + "/kvremap.prom";
  const Start s = serve_after_a_short_prompt("0.1GiB", "6GiB", {"KVREMAP_METRICS_FILE=" + metrics});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
  EXPECT_NE(s.run.out.find("vllm_like: started"), std::string::npos) << s.run.out;
  ASSERT_EQ(s.traces.size(), 1u);
  const kvremap::trace::Trace& t = s.traces[0];
  const auto* overflow = s.event("kv serving overflow");
  ASSERT_NE(overflow, nullptr) << s.run.err;
  const auto* refusal = serving_refusal(t);
  ASSERT_NE(refusal, nullptr) << "the first refusal reached the engine's allocator";
  EXPECT_LT(refusal->event.ts_us, overflow->event.ts_us);
  EXPECT_LT(refusal->event.index, overflow->event.index);
  const std::uint64_t bytes = overflow->args.at("bytes").get<std::uint64_t>();
  EXPECT_EQ(refusal->args.at("requested_bytes").get<std::uint64_t>(), bytes) << "the retry asked what was refused";
  EXPECT_GT(cuda_frees_between(t, refusal->event.ts_us, overflow->event.ts_us), 0u)
      << "the allocator freed its cached segments before its retry";
  EXPECT_GT(overflow->args.at("frees_since_refusal").get<std::uint64_t>(), 0u);
  EXPECT_GT(overflow->args.at("freed_bytes_since_refusal").get<std::uint64_t>(), 0u);
  EXPECT_NE(s.run.err.find("was refused again after the engine's allocator freed"), std::string::npos) << s.run.err;
  EXPECT_NE(s.run.err.find("restart it when you can"), std::string::npos) << s.run.err;
  // Nothing was carried on host memory before that retry: the first refusal got the error, not an overflow.
  std::size_t overflows = 0;
  std::uint64_t overflow_bytes = 0;
  for (const auto& e : t.other_events)
    if (e.name == "kv serving overflow") {
      ++overflows;
      overflow_bytes += e.args.at("bytes").get<std::uint64_t>();
      EXPECT_GE(e.event.index, overflow->event.index);
    }
  EXPECT_GE(overflows, 1u);
  // Counted where an operator looks: the metrics file's counters.
  EXPECT_EQ(metric_value(metrics, "kvremap_serving_overflows_total"), std::to_string(overflows)) << slurp(metrics);
  EXPECT_EQ(metric_value(metrics, "kvremap_serving_overflow_bytes_total"), std::to_string(overflow_bytes));
}

// A serving prefill of the profiled 3 GiB after a first prompt left 0.25 GiB of small segments in the allocator's
// cache: beside them the device refuses the prefill's last segment, the allocator frees its cached segments and
// its retry fits on the device. The first refusal is never given host memory, so nothing is carried there at all.
TEST(ServingOverflow, ARetryThatFitsOnceTheCacheIsFreedGetsNoHostMemory) {
  const Start s = serve_after_a_short_prompt("0.25GiB", "3GiB");
  ASSERT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
  EXPECT_NE(s.run.out.find("vllm_like: started"), std::string::npos) << s.run.out;
  ASSERT_EQ(s.traces.size(), 1u);
  EXPECT_EQ(s.event("kv serving overflow"), nullptr) << s.run.err;
  EXPECT_EQ(s.run.err.find("host memory (slower)"), std::string::npos) << s.run.err;
  const kvremap::trace::Trace& t = s.traces[0];
  const auto* refusal = serving_refusal(t);
  ASSERT_NE(refusal, nullptr) << "the device refused a serving allocation" << s.run.err;
  EXPECT_GT(cuda_frees_between(t, refusal->event.ts_us, 1e300), 0u) << "the allocator freed its cache";
}

// At 0.9 the first start fits with GiBs to spare. `learned` never gives more KV than the engine asks
// for; `fit` grows the KV cache into the surplus: more KV than stock at 0.9, still all on the device.
// PyTorch's allocator configuration and vLLM's model runner decide what a start allocates: a start with
// another PYTORCH_CUDA_ALLOC_CONF writes its own profile and is not sized from the first one's, while a
// variable that decides nothing keeps the key (and the start is sized from the profile).
TEST(LearnedSizing, TheAllocatorConfigurationIsPartOfTheKey) {
  const std::string profiles = make_temp_dir();
  const Start first = start(vllm_argv("0.95"), profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_EQ(contents(profiles).profiles.size(), 1u);
  const Start unrelated = start(vllm_argv("0.95"), profiles, {"SOME_TOOL_SETTING=1"});
  ASSERT_EQ(unrelated.run.exit_code, 0) << unrelated.run.err;
  EXPECT_NE(unrelated.event("kv sizing adjusted"), nullptr) << "the same key: sized from the profile";
  EXPECT_EQ(contents(profiles).profiles.size(), 1u);
  // max_split_size_mb, not expandable_segments: with those the KV cache is PyTorch's own pages and kvremap
  // only observes (docs/kv-deferral.md, "KV the engine maps itself"), writing no profile.
  const Start expandable = start(vllm_argv("0.95"), profiles, {"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512"});
  ASSERT_EQ(expandable.run.exit_code, 0) << expandable.run.err;
  EXPECT_EQ(expandable.event("kv sizing adjusted"), nullptr) << "another key: not sized from the first profile";
  const DirContents after = contents(profiles);
  ASSERT_EQ(after.profiles.size(), 2u);
  std::size_t with_env = 0;
  for (const std::string& file : after.profiles) {
    const auto read = read_back(file);
    ASSERT_TRUE(read.profile) << read.problem;
    if (read.profile->key.find("; env: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512") != std::string::npos)
      ++with_env;
  }
  EXPECT_EQ(with_env, 1u);
}

// The engine's build is part of the key: the same command line over another build of its native extension
// (another build id, the same install layout) is another start, while the same build moved to another
// prefix is the same one. Flags in a `--config` file count as flags on the line do.
TEST(LearnedSizing, TheEngineBuildAndItsConfigFileArePartOfTheKey) {
  const std::string profiles = make_temp_dir();
  const std::string a = FAKE_VLLM_EXTENSION_A, b = FAKE_VLLM_EXTENSION_B;
  const Start first = start(vllm_argv("0.95"), profiles, {"VLLM_LIKE_EXTENSIONS=" + a});
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_EQ(contents(profiles).profiles.size(), 1u);
  const auto key = read_back(contents(profiles).profiles[0]);
  ASSERT_TRUE(key.profile) << key.problem;
  EXPECT_NE(key.profile->key.find("; software: \"vllm/_C.abi3.so 0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a\""),
            std::string::npos)
      << key.profile->key;
  // The same build under another prefix.
  const std::string moved = make_temp_dir() + "/venv/lib/python3.12/site-packages/vllm";
  fs::create_directories(moved);
  fs::copy_file(a, moved + "/_C.abi3.so");
  const Start again = start(vllm_argv("0.95"), profiles, {"VLLM_LIKE_EXTENSIONS=" + moved + "/_C.abi3.so"});
  ASSERT_EQ(again.run.exit_code, 0) << again.run.err;
  EXPECT_NE(again.event("kv sizing adjusted"), nullptr) << "the same build: sized from the profile";
  EXPECT_EQ(contents(profiles).profiles.size(), 1u);
  const Start other = start(vllm_argv("0.95"), profiles, {"VLLM_LIKE_EXTENSIONS=" + b});
  ASSERT_EQ(other.run.exit_code, 0) << other.run.err;
  EXPECT_EQ(other.event("kv sizing adjusted"), nullptr) << "another build: not sized from the first profile";
  EXPECT_EQ(contents(profiles).profiles.size(), 2u);

  // vLLM reads flags from --config (utils/argparse_utils.py:477): another file content, another key.
  const std::string config = make_temp_dir() + "/engine.yaml";
  std::ofstream(config) << "max-num-seqs: 256\n";
  // Flags kvremap cannot read mean no graphs expected: a share where stock starts.
  std::vector<std::string> with_config = vllm_argv("0.8");
  with_config.insert(with_config.end(), {"--config", config});
  ASSERT_EQ(start(with_config, profiles).run.exit_code, 0);
  ASSERT_EQ(contents(profiles).profiles.size(), 3u);
  ASSERT_EQ(start(with_config, profiles).run.exit_code, 0);
  EXPECT_EQ(contents(profiles).profiles.size(), 3u) << "the same file: the same key";
  std::ofstream(config) << "max-num-seqs: 1024\n";
  ASSERT_EQ(start(with_config, profiles).run.exit_code, 0);
  EXPECT_EQ(contents(profiles).profiles.size(), 4u) << "the file changed: another key";
}

TEST(LearnedSizing, FitGrowsTheKvCacheIntoTheMeasuredSurplus) {
  const std::string profiles = make_temp_dir();
  const Start first = start(vllm_argv("0.9"), profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_GT(first.i("kv committed", "margin_bytes"), 0);
  const std::uint64_t stock_kv = first.u("kv committed", "kv_bytes");
  EXPECT_EQ(first.u("kv committed", "host_bytes"), 0u);

  const Start learned = start(vllm_argv("0.9"), profiles);
  EXPECT_EQ(learned.run.exit_code, 0);
  EXPECT_EQ(learned.u("kv committed", "kv_bytes"), stock_kv);
  EXPECT_EQ(learned.event("kv sizing adjusted"), nullptr);
  ASSERT_NE(learned.event("kv sizing unchanged"), nullptr);

  const Start fit = start(vllm_argv("0.9"), profiles, {"KVREMAP_SIZING=fit"});
  expect_fits_on_device(fit, first);
  EXPECT_GT(fit.u("kv committed", "kv_bytes"), stock_kv + (2ULL << 30)) << "more KV than stock at 0.9";
  EXPECT_LT(fit.i("kv sizing adjusted", "shift_bytes"), 0);
}

// A profile written at another --gpu-memory-utilization sizes this start too: the engine asks for
// the difference times the device more KV, and the shift takes it away, so the first start at 0.95
// after one at 0.9 already fits.
TEST(LearnedSizing, AProfileFromAnotherUtilisationSizesThisOne) {
  const std::string profiles = make_temp_dir();
  const Start at_09 = start(vllm_argv("0.9"), profiles);
  ASSERT_EQ(at_09.run.exit_code, 0);
  const Start reference = start(vllm_argv("0.95"), make_temp_dir());
  const Start at_095 = start(vllm_argv("0.95"), profiles);
  expect_fits_on_device(at_095, reference);
  ASSERT_NE(at_095.event("kv sizing adjusted"), nullptr);
}

// The SGLang-like start-up at 0.9 (its reserve is what --mem-fraction-static leaves): the first
// start lacks a little on the device; the second fits.
TEST(LearnedSizing, TheSecondSglangStartFitsOnTheDevice) {
  const std::string profiles = make_temp_dir();
  const Start first = start(sglang_argv("0.9"), profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_GT(first.u("kv committed", "deficit_bytes"), 0u);
  const Start second = start(sglang_argv("0.9"), profiles);
  expect_fits_on_device(second, first);
  ASSERT_NE(second.event("kv sizing adjusted"), nullptr);
  EXPECT_EQ(
      second.event("kv committed")->args.at("same_start_flags").get<std::string>().rfind("--mem-fraction-static 0.", 0),
      0u);
}

// Two ranks, each its own process and profile: both second starts fit.
TEST(LearnedSizing, EveryRankOfAMultiRankLaunchIsSizedFromItsOwnProfile) {
  const std::string profiles = make_temp_dir();
  std::vector<std::string> argv = vllm_argv("0.95");
  argv.insert(argv.end(), {"--ranks", "2"});
  const Start first = start(argv, profiles, {}, 2);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_EQ(first.traces.size(), 2u);
  const Start second = start(argv, profiles, {}, 2);
  ASSERT_EQ(second.traces.size(), 2u);
  for (std::size_t rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_GT(first.u("kv committed", "host_bytes", rank), 0u);
    expect_fits_on_device(second, first, rank);
    ASSERT_NE(second.event("kv sizing adjusted", rank), nullptr);
    EXPECT_NE(second.event("kv sizing adjusted", rank)
                  ->args.at("profile")
                  .get<std::string>()
                  .find("-rank" + std::to_string(rank) + ".json"),
              std::string::npos);
  }
}

// KVREMAP_DEFICIT=restart: the first start writes its profile and exits with status 75 before
// serving; the next start is sized from it and serves. A start that was sized from a profile never
// asks for a restart again.
TEST(LearnedSizing, RestartExitsWithTheProfileWrittenBeforeServing) {
  const std::string profiles = make_temp_dir();
  const Start first = start(vllm_argv("0.95"), profiles, {"KVREMAP_DEFICIT=restart"});
  EXPECT_EQ(first.run.exit_code, kvremap::policy::kExitRestartForProfile) << first.run.err;
  EXPECT_EQ(first.run.out.find("KV verified"), std::string::npos) << "stopped before serving";
  EXPECT_NE(first.run.err.find("exiting with status 75"), std::string::npos) << first.run.err;
  ASSERT_NE(first.event("kv restart"), nullptr);
  EXPECT_EQ(first.event("kv committed"), nullptr);
  ASSERT_EQ(contents(profiles).profiles.size(), 1u);
  const auto profile = read_back(contents(profiles).profiles[0]);
  ASSERT_TRUE(profile.profile) << profile.problem;
  EXPECT_LT(profile.profile->margin_bytes, 0);

  const Start second = start(vllm_argv("0.95"), profiles, {"KVREMAP_DEFICIT=restart"});
  EXPECT_EQ(second.run.exit_code, 0) << second.run.err;
  EXPECT_EQ(second.event("kv restart"), nullptr);
  EXPECT_EQ(second.u("kv committed", "host_bytes"), 0u);
}

// A profile the next start contradicts (its post-KV work grew): that start is shifted by the old
// profile, still commits correctly (the rest on host memory), and rewrites the profile, so the start
// after it fits again.
TEST(LearnedSizing, AStaleProfileIsUpdatedByTheStartItMisjudged) {
  const std::string profiles = make_temp_dir();
  const SeedCopy seed;
  const std::vector<std::string>& argv = seed.argv;
  const Start first = start(argv, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  const Start second = start(argv, profiles);
  ASSERT_EQ(second.u("kv committed", "host_bytes"), 0u);

  // Autotuning now keeps 1 GiB more resident: the same command line, a larger post-KV need.
  const std::string grown =
      std::regex_replace(seed.text, std::regex(R"("resident": "0.7GiB")"), R"("resident": "1.7GiB")");
  ASSERT_NE(grown, seed.text);
  seed.write(grown);
  const Start stale = start(argv, profiles);
  EXPECT_EQ(stale.run.exit_code, 0) << stale.run.err;
  ASSERT_NE(stale.event("kv sizing adjusted"), nullptr) << "the old profile sized it";
  EXPECT_GT(stale.u("kv committed", "host_bytes"), 0u) << "and the KV cache did not fit";
  const auto updated = read_back(contents(profiles).profiles.at(0));
  ASSERT_TRUE(updated.profile) << updated.problem;
  EXPECT_LT(updated.profile->margin_bytes, 0) << "the profile now holds the stale start's figures";
  EXPECT_EQ(updated.profile->sizing_shift_bytes, stale.i("kv sizing adjusted", "shift_bytes"));

  const Start fourth = start(argv, profiles);
  const Start reference = start(argv, make_temp_dir());
  expect_fits_on_device(fourth, reference);
}

// A corrupt profile, or one of another schema version, under the configuration's name: one warning
// naming it, the engine sizes the start alone, and the commit writes a good profile over it.
TEST(LearnedSizing, ACorruptOrForeignProfileIsIgnoredWithOneWarning) {
  const std::string reference_dir = make_temp_dir();
  const Start reference = start(vllm_argv("0.95"), reference_dir);
  ASSERT_EQ(reference.run.exit_code, 0);
  const std::string name = fs::path(contents(reference_dir).profiles.at(0)).filename().string();
  const std::string good = slurp(contents(reference_dir).profiles.at(0));
  std::string foreign = good;
  foreign.replace(foreign.find("\"schema_version\": 2"), 19, "\"schema_version\": 9");
  for (const auto& [what, text] : std::vector<std::pair<std::string, std::string>>{
           {"corrupt", good.substr(0, good.size() / 3)}, {"foreign", foreign}, {"not JSON", "\x01\x02garbage"}}) {
    SCOPED_TRACE(what);
    const std::string profiles = make_temp_dir();
    std::ofstream(profiles + "/" + name) << text;
    const Start s = start(vllm_argv("0.95"), profiles);
    EXPECT_EQ(s.run.exit_code, 0) << s.run.err;
    EXPECT_EQ(s.u("kv committed", "kv_bytes"), reference.u("kv committed", "kv_bytes")) << "sized by the engine";
    std::size_t warnings = 0;
    std::istringstream lines(s.run.err);
    for (std::string line; std::getline(lines, line);) warnings += line.find("profile ignored") != std::string::npos;
    EXPECT_EQ(warnings, 1u) << s.run.err;
    ASSERT_NE(s.event("kv profile ignored"), nullptr);
    EXPECT_TRUE(read_back(profiles + "/" + name).profile) << "rewritten whole by the commit";
  }
}

// Two starts of one configuration at once, writing the same profile: the file is always one whole
// profile, and no temporary file is left.
TEST(LearnedSizing, ConcurrentStartsNeverTearTheProfile) {
  const std::string profiles = make_temp_dir();
  const std::vector<std::string> env = defer_env(make_temp_dir(), profiles);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const std::vector<std::string> argv = vllm_argv("0.95");
    const pid_t pid = fork();
    if (pid == 0) _exit(run_program(argv, env, {}, 120).exit_code);
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  const DirContents c = contents(profiles);
  ASSERT_EQ(c.profiles.size(), 1u);
  EXPECT_EQ(c.others, std::vector<std::string>{});
  EXPECT_TRUE(read_back(c.profiles[0]).profile);
}

// `engine` leaves the sizing query alone whatever the profile says; a KV size given on the command
// line is not sized from a query, so no profile moves it.
TEST(LearnedSizing, EngineModeAndAGivenKvSizeAreNeverMoved) {
  const std::string profiles = make_temp_dir();
  ASSERT_EQ(start(vllm_argv("0.95"), profiles).run.exit_code, 0);
  const Start engine = start(vllm_argv("0.95"), profiles, {"KVREMAP_SIZING=engine"});
  EXPECT_EQ(engine.event("kv sizing adjusted"), nullptr);
  EXPECT_GT(engine.u("kv committed", "host_bytes"), 0u);

  // With a given KV size vLLM takes no memory query after its weights (gpu_worker.py:489-510): nothing is
  // sized, deferred or written, and the start runs as stock does.
  std::vector<std::string> given = vllm_argv("0.95");
  given.insert(given.end(), {"--kv-cache-memory", "8GiB"});
  const std::string given_profiles = make_temp_dir();
  ASSERT_EQ(start(given, given_profiles).run.exit_code, 0);
  const Start again = start(given, given_profiles);
  ASSERT_EQ(again.run.exit_code, 0) << again.run.err;
  EXPECT_EQ(again.event("kv sizing adjusted"), nullptr);
  EXPECT_EQ(again.event("kv deferred"), nullptr);
  EXPECT_EQ(contents(given_profiles).profiles.size(), 0u);
}

// Defer is the default: LD_PRELOAD alone starts the seed at 0.95, where stock runs out of memory.
TEST(LearnedSizing, APlainPreloadStartsTheSeedWhereStockRunsOutOfMemory) {
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
  const RunResult stock = run_program(vllm_argv("0.95"), env, {"LD_PRELOAD", "KVREMAP_MODE"}, 120);
  EXPECT_EQ(stock.exit_code, 5) << stock.err;
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + make_temp_dir()});
  const RunResult r = run_program(vllm_argv("0.95"), env, {"KVREMAP_MODE"}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("started, KV"), std::string::npos);
}

// ---- Profile trust: files and directories another user could have planted ------------------------

namespace {

// A first start's profile in its own directory: its name (the configuration's) and its text.
struct Reference {
  Start start;
  std::string name;
  std::string text;
};
Reference reference_profile() {
  const std::string dir = make_temp_dir();
  Reference r{start(vllm_argv("0.95"), dir), "", ""};
  EXPECT_EQ(r.start.run.exit_code, 0) << r.start.run.err;
  const DirContents c = contents(dir);
  EXPECT_EQ(c.profiles.size(), 1u);
  if (c.profiles.empty()) return r;
  r.name = fs::path(c.profiles[0]).filename().string();
  r.text = slurp(c.profiles[0]);
  return r;
}

std::string trace_text(const std::string& traces) {
  std::string all;
  for (const std::string& f : trace_files(traces)) all += slurp(f);
  return all;
}

}  // namespace

// The old writer used `<name>.tmp.<pid>`: links planted at that name for every pid the engine could
// get are never written through; the victim file stays as it was and the profile is written whole.
TEST(ProfileTrust, LinksPlantedAtTemporaryNamesNeverRedirectTheWrite) {
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const std::string profiles = make_temp_dir(), elsewhere = make_temp_dir();
  const std::string victim = elsewhere + "/victim";
  std::ofstream(victim) << "the victim's own data\n";
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  // The pids the next processes get: from the last one handed out, upwards.
  long last = getpid();
  std::ifstream("/proc/sys/kernel/ns_last_pid") >> last;
  for (long pid = last + 1; pid <= last + 400; ++pid)
    ASSERT_EQ(symlink(victim.c_str(), (profiles + "/" + ref.name + ".tmp." + std::to_string(pid)).c_str()), 0);
  const Start s = start(vllm_argv("0.95"), profiles);
  EXPECT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_EQ(slurp(victim), "the victim's own data\n");
  const auto read = read_back(profiles + "/" + ref.name);
  EXPECT_TRUE(read.profile) << read.problem;
  std::size_t links = 0;
  for (const auto& e : fs::directory_iterator(profiles)) links += fs::is_symlink(e.symlink_status());
  EXPECT_EQ(links, 400u) << "every planted link left as it was";
}

// A FIFO at the profile's name: the start neither hangs on it nor reads it; one line names it.
TEST(ProfileTrust, AFifoAtTheProfilesNameNeverHangsTheStart) {
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const std::string profiles = make_temp_dir();
  ASSERT_EQ(mkfifo((profiles + "/" + ref.name).c_str(), 0600), 0);
  const std::string traces = make_temp_dir();
  std::vector<std::string> env = defer_env(traces, profiles);
  // Well past a whole start-up, well short of for ever.
  const RunResult r = run_program(vllm_argv("0.95"), env, {}, 90);
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.signal << "\n" << r.err;
  EXPECT_EQ(lines_with(r.err, "profile ignored"), 1u) << r.err;
  EXPECT_EQ(lines_with(r.err, profiles + "/" + ref.name + ": it is a FIFO"), 1u) << r.err;
}

// A link at the profile's name is never followed: nothing of the file it names reaches the log or
// the trace, and the commit's rewrite replaces the link, not its target.
TEST(ProfileTrust, ALinkAtTheProfilesNameIsNeverFollowed) {
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const std::string profiles = make_temp_dir(), elsewhere = make_temp_dir();
  const std::string secret = elsewhere + "/secret";
  // An unterminated string: a JSON parser's message quotes what it read of it.
  const std::string private_text = "\"TOPSECRET-0123456789 and more of a private file";
  std::ofstream(secret) << private_text;
  ASSERT_EQ(symlink(secret.c_str(), (profiles + "/" + ref.name).c_str()), 0);
  const std::string traces = make_temp_dir();
  const RunResult r = run_program(vllm_argv("0.95"), defer_env(traces, profiles), {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("TOPSEC"), std::string::npos) << r.err;
  EXPECT_EQ(trace_text(traces).find("TOPSEC"), std::string::npos);
  EXPECT_EQ(lines_with(r.err, "symbolic link"), 1u) << r.err;
  EXPECT_EQ(slurp(secret), private_text);
  EXPECT_FALSE(fs::is_symlink(profiles + "/" + ref.name));
  EXPECT_TRUE(read_back(profiles + "/" + ref.name).profile);
}

namespace {

// A start in a profile directory kvremap must refuse: one warning naming it, the engine sized alone
// (the reference's KV cache), nothing written there, the engine serves.
void expect_directory_refused(const Reference& ref, const std::string& profiles, const std::string& why) {
  const Start s = start(vllm_argv("0.95"), profiles);
  EXPECT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_EQ(lines_with(s.run.err, "the profile directory " + profiles + " " + why), 1u) << s.run.err;
  EXPECT_EQ(lines_with(s.run.err, "profiles are off for this process"), 1u) << s.run.err;
  EXPECT_EQ(s.event("kv sizing adjusted"), nullptr) << "not sized from the planted profile";
  EXPECT_EQ(s.u("kv committed", "kv_bytes"), ref.start.u("kv committed", "kv_bytes"));
  EXPECT_EQ(s.event("kv profile written"), nullptr);
  EXPECT_EQ(slurp(profiles + "/" + ref.name), ref.text) << "left as it was";
}

// The reference's profile, as a second start would find it, planted in `profiles`.
void plant(const Reference& ref, const std::string& profiles) { std::ofstream(profiles + "/" + ref.name) << ref.text; }

}  // namespace

TEST(ProfileTrust, AWorldWritableProfileDirectoryIsRefused) {
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const std::string profiles = make_temp_dir();
  plant(ref, profiles);
  ASSERT_EQ(chmod(profiles.c_str(), 0777), 0);
  expect_directory_refused(ref, profiles, "is writable by group or others (mode 0777)");
}

TEST(ProfileTrust, AnotherUsersProfileDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "making a directory another user's needs root";
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const std::string profiles = make_temp_dir();
  plant(ref, profiles);
  ASSERT_EQ(chmod(profiles.c_str(), 0755), 0);
  ASSERT_EQ(chown(profiles.c_str(), 65534, 65534), 0);  // nobody: another user, whose directory root could write
  expect_directory_refused(ref, profiles, "is owned by uid 65534");
}

// A directory KVREMAP_PROFILE_DIR names that does not exist yet is created the user's alone, with
// every missing parent.
TEST(ProfileTrust, AProfileDirectoryIsCreated0700WithItsParents) {
  const std::string root = make_temp_dir();
  const std::string profiles = root + "/a/b/profiles";
  ASSERT_EQ(start(vllm_argv("0.95"), profiles).run.exit_code, 0);
  for (const std::string& dir : {root + "/a", root + "/a/b", profiles}) {
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << dir;
  }
  ASSERT_EQ(contents(profiles).profiles.size(), 1u);
  struct stat st {};
  ASSERT_EQ(stat(contents(profiles).profiles[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Figures no start on the seed's 79.19 GiB device could have measured, each of which would make the
// start fail or shrink its KV cache: the profile is ignored with one line naming the file and the
// field, the engine sizes the start alone, and the commit rewrites the profile from its own figures.
TEST(ProfileTrust, OutOfRangeProfilesAreIgnoredWithOneLine) {
  const Reference ref = reference_profile();
  ASSERT_FALSE(ref.name.empty());
  const nlohmann::json good = nlohmann::json::parse(ref.text);
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"sizing_shift_bytes", std::int64_t{1} << 61},
                                                           {"serving_peak_bytes", std::uint64_t{100} << 30},
                                                           {"memory_share", 0.0001},
                                                           {"margin_bytes", -(std::int64_t{20} << 30)}}) {
    SCOPED_TRACE(field);
    const std::string profiles = make_temp_dir();
    nlohmann::json planted = good;
    planted[field] = value;
    std::ofstream(profiles + "/" + ref.name) << planted.dump(2);
    const Start s = start(vllm_argv("0.95"), profiles);
    EXPECT_EQ(s.run.exit_code, 0) << s.run.err;
    EXPECT_EQ(lines_with(s.run.err, "profile ignored"), 1u) << s.run.err;
    EXPECT_EQ(lines_with(s.run.err, profiles + "/" + ref.name + ": out of range for this device: " + field), 1u)
        << s.run.err;
    EXPECT_EQ(s.event("kv sizing adjusted"), nullptr);
    ASSERT_NE(s.event("kv profile ignored"), nullptr);
    EXPECT_EQ(s.u("kv committed", "kv_bytes"), ref.start.u("kv committed", "kv_bytes")) << "sized by the engine";
    const auto rewritten = read_back(profiles + "/" + ref.name);
    ASSERT_TRUE(rewritten.profile) << rewritten.problem;
    EXPECT_EQ(rewritten.profile->margin_bytes, s.i("kv committed", "margin_bytes"));
  }
}

// A start a profile sized that died before its commit (here the engine itself runs out of memory: its
// autotuning grew past anything the deferral frees) leaves the profile marked; the next start is not
// sized from it (one line names it), commits, rewrites the profile and clears the mark, and the start
// after that is sized from the new profile. The line naming the profile that sized a start is logged
// at the default level.
TEST(ProfileTrust, AStartThatDiedBeforeItsCommitMarksItsProfile) {
  const std::string profiles = make_temp_dir();
  const SeedCopy seed;
  const std::vector<std::string>& argv = seed.argv;
  const Start first = start(argv, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  const std::string profile = contents(profiles).profiles.at(0);
  // This start's marker beside the profile (one per start: `<profile>.unconfirmed.<host>.<pid>.<start>`).
  const auto marked = [&] {
    for (const auto& e : fs::directory_iterator(profiles))
      if (e.path().string().starts_with(profile + ".unconfirmed.")) return true;
    return false;
  };

  const std::string grown = std::regex_replace(seed.text, std::regex(R"("peak": "11GiB")"), R"("peak": "70GiB")");
  ASSERT_NE(grown, seed.text);
  seed.write(grown);
  const Start failed = start(argv, profiles);
  EXPECT_EQ(failed.run.exit_code, 5) << "the engine's own out-of-memory exit: " << failed.run.err;
  ASSERT_NE(failed.event("kv sizing adjusted"), nullptr) << "the profile sized it";
  EXPECT_EQ(failed.event("kv committed"), nullptr);
  EXPECT_EQ(lines_with(failed.run.err, "sizing this start from profile "), 0u) << "an info line: " << failed.run.err;
  EXPECT_EQ(lines_with(failed.run.err, "this start was sized from profile " + profile + " (shift "), 1u)
      << "named at the default level as it exits before its commit: " << failed.run.err;
  EXPECT_TRUE(marked());

  seed.write(seed.text);
  const Start next = start(argv, profiles);
  EXPECT_EQ(next.run.exit_code, 0) << next.run.err;
  EXPECT_EQ(next.event("kv sizing adjusted"), nullptr) << "not sized from the profile again";
  EXPECT_EQ(lines_with(next.run.err,
                       "profile " + profile + " not used for sizing: a start it sized (pid "),
            1u)
      << next.run.err;
  ASSERT_NE(next.event("kv sizing unchanged"), nullptr);
  EXPECT_FALSE(marked()) << "cleared by the commit";
  const auto rewritten = read_back(profile);
  ASSERT_TRUE(rewritten.profile) << rewritten.problem;
  EXPECT_EQ(rewritten.profile->sizing_shift_bytes, 0) << "the unsized start's own figures";

  const Start after = start(argv, profiles);
  EXPECT_EQ(after.run.exit_code, 0) << after.run.err;
  EXPECT_NE(after.event("kv sizing adjusted"), nullptr) << "sized from the rewritten profile";
  EXPECT_EQ(after.u("kv committed", "host_bytes"), 0u);
  EXPECT_FALSE(marked());
}

// A `fail` stop writes its profile before it exits, also when a profile sized it (its post-KV work
// grew, so the old profile's shift was not enough): the same command started again, without `kvremap
// run`, is sized from the newer figures and fits on the device.
TEST(ProfileTrust, AFailStopRewritesTheProfileSoTheSameCommandFitsNextTime) {
  const std::string profiles = make_temp_dir();
  const SeedCopy seed;
  const std::vector<std::string>& argv = seed.argv;
  const Start first = start(argv, profiles);
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  const std::string profile = contents(profiles).profiles.at(0);
  const auto before = read_back(profile);
  ASSERT_TRUE(before.profile) << before.problem;

  const std::string grown =
      std::regex_replace(seed.text, std::regex(R"("resident": "0.7GiB")"), R"("resident": "1.7GiB")");
  ASSERT_NE(grown, seed.text);
  seed.write(grown);
  const Start failed = start(argv, profiles, {"KVREMAP_DEFICIT=fail"});
  EXPECT_EQ(failed.run.exit_code, 78) << failed.run.err;
  ASSERT_NE(failed.event("kv sizing adjusted"), nullptr) << "the profile sized it";
  EXPECT_EQ(failed.event("kv committed"), nullptr);
  ASSERT_NE(failed.event("kv profile written"), nullptr);
  EXPECT_EQ(lines_with(failed.run.err,
                       "; this start's profile is written, so the same command started again is "
                       "sized from it"),
            1u)
      << failed.run.err;
  for (const auto& e : fs::directory_iterator(profiles))
    EXPECT_EQ(e.path().string().find(".unconfirmed"), std::string::npos) << "a written profile is confirmed";
  const auto rewritten = read_back(profile);
  ASSERT_TRUE(rewritten.profile) << rewritten.problem;
  EXPECT_NE(rewritten.profile->sizing_shift_bytes, before.profile->sizing_shift_bytes) << "the failed start's figures";

  const Start next = start(argv, profiles, {"KVREMAP_DEFICIT=fail"});
  EXPECT_EQ(next.run.exit_code, 0) << next.run.err;
  EXPECT_NE(next.event("kv sizing adjusted"), nullptr) << "sized from the rewritten profile";
  EXPECT_EQ(next.u("kv committed", "host_bytes"), 0u);
  EXPECT_NE(next.run.out.find("KV verified"), std::string::npos) << next.run.out;
}
