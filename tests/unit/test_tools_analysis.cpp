// The analyses behind plot, report --json, diff, merge and what-if on small hand-written traces, and the reader's
// progress hook.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/analysis.h"
#include "tools/diff.h"
#include "tools/merge.h"
#include "tools/plot.h"
#include "tools/report.h"
#include "tools/report_json.h"
#include "tools/start_up_work.h"
#include "tools/trace/trace_reader.h"
#include "tools/what_if.h"

namespace {

using kvremap::analysis::analyse;
using kvremap::analysis::ProcessFigures;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::string header(const std::string& cmdline = "python3 -m vllm.entrypoints.openai.api_server",
                   long long start_unix_ns = 1735689600000000000LL, int pid = 7) {
  return "[\n{\"ph\":\"M\",\"cat\":\"kvremap\",\"name\":\"kvremap_trace\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":1,\"ts\":0,\"args\":{\"schema_version\":2,\"library_version\":\"0.1.0\",\"hostname\":\"h\","
         "\"pid\":" +
         std::to_string(pid) + ",\"ppid\":1,\"cmdline\":\"" + cmdline +
         "\",\"start_unix_ns\":" + std::to_string(start_unix_ns) +
         ",\"options\":{}}}\n,{\"ph\":\"M\",\"cat\":\"kvremap\",\"name\":\"kvremap_device\",\"pid\":7,\"tid\":1,\"ts\":"
         "0,"
         "\"args\":{\"device\":0,\"total_bytes\":" +
         std::to_string(1024 * kMiB) + "}}\n";
}

std::string phase(double ts, const std::string& to, const std::string& from) {
  return ",{\"ph\":\"i\",\"cat\":\"phase\",\"name\":\"phase: " + to +
         "\",\"pid\":7,\"tid\":1,\"ts\":" + std::to_string(ts) + ",\"s\":\"g\",\"args\":{\"phase\":\"" + to +
         "\",\"previous\":\"" + from + "\",\"reason\":\"test\"}}\n";
}

std::string alloc(double ts, const std::string& ptr, std::uint64_t bytes, const std::string& category,
                  const std::string& caller = "") {
  return ",{\"ph\":\"i\",\"cat\":\"alloc\",\"name\":\"alloc\",\"pid\":7,\"tid\":1,\"ts\":" + std::to_string(ts) +
         ",\"s\":\"t\",\"args\":{\"api\":\"cudaMalloc\",\"ptr\":\"" + ptr + "\",\"bytes\":" + std::to_string(bytes) +
         ",\"device\":0,\"category\":\"" + category + "\",\"phase\":\"loading\"" +
         (caller.empty() ? std::string() : ",\"caller\":\"" + caller + "\"") + "}}\n";
}

std::string release(double ts, const std::string& ptr, std::uint64_t bytes, const std::string& category) {
  return ",{\"ph\":\"i\",\"cat\":\"alloc\",\"name\":\"free\",\"pid\":7,\"tid\":1,\"ts\":" + std::to_string(ts) +
         ",\"s\":\"t\",\"args\":{\"api\":\"cudaFree\",\"ptr\":\"" + ptr + "\",\"bytes\":" + std::to_string(bytes) +
         ",\"device\":0,\"category\":\"" + category + "\"}}\n";
}

// loading: 100 MiB of weights (kept) and 30 MiB freed again; profiling: a 50 MiB activation peak;
// a KV burst of 2 x 200 MiB whose phase marker comes after its first tensor; the events out of
// time order, as threads' chunks leave them.
std::string startup() {
  return header() + phase(10, "loading", "init") + alloc(20, "0x1", 100 * kMiB, "other", "libweights.so") +
         alloc(30, "0x2", 30 * kMiB, "other") + release(40, "0x2", 30 * kMiB, "other") +
         phase(50, "profiling", "loading") + alloc(60, "0x3", 50 * kMiB, "other", "libtorch.so") +
         release(70, "0x3", 50 * kMiB, "other") + alloc(80, "0x4", 200 * kMiB, "kv", "libtorch.so") +
         phase(85, "kv_allocation", "profiling") + alloc(90, "0x5", 200 * kMiB, "kv", "libtorch.so") +
         phase(100, "post_kv_warmup", "kv_allocation") + alloc(110, "0x6", 20 * kMiB, "other") +
         alloc(105, "0x7", 10 * kMiB, "other") + "]\n";
}

const kvremap::analysis::PhaseFigures& phase_of(const ProcessFigures& p, const std::string& name) {
  for (const auto& ph : p.devices.at(0).phases)
    if (ph.phase == name) return ph;
  throw std::runtime_error("no phase " + name);
}

TEST(Analysis, AttributesBytesToThePhaseThatAllocatedThemAndStillHoldsThem) {
  const ProcessFigures p = analyse(kvremap::trace::parse_trace(startup(), "startup"));
  ASSERT_EQ(p.devices.size(), 1u);
  const auto& loading = phase_of(p, "loading");
  EXPECT_EQ(loading.allocated_live_at_end.at("other"), 100 * kMiB);
  EXPECT_EQ(loading.allocated.at("other"), 130 * kMiB);
  EXPECT_EQ(loading.peak_bytes, 130 * kMiB);
  const auto& profiling = phase_of(p, "profiling");
  EXPECT_EQ(profiling.peak_bytes, 150 * kMiB);
  EXPECT_EQ(profiling.allocated_live_at_end.count("other"), 0u);
  // The KV burst's phase starts at its first KV tensor, before the library marked it.
  const auto& kv = phase_of(p, "kv_allocation");
  EXPECT_EQ(kv.start_us, 80);
  EXPECT_EQ(kv.allocated_live_at_end.at("kv"), 400 * kMiB);
  EXPECT_EQ(profiling.allocated_live_at_end.count("kv"), 0u);
  const auto& warmup = phase_of(p, "post_kv_warmup");
  EXPECT_EQ(warmup.allocated_live_at_end.at("other"), 30 * kMiB);
  EXPECT_EQ(warmup.peak_bytes, 530 * kMiB);
  EXPECT_EQ(warmup.peak_ts_us, 110);  // the events sorted by time: 0x7 at 105 came before 0x6 at 110
}

// The warm-up after the KV burst and the captures after it, named: their peaks beside the KV cache (never the
// KV cache's own bytes), what each left, the modules, the graph pool and executables.
TEST(StartUpWork, NamesWhatTheWarmUpAndTheCaptureNeededBesideTheKvCache) {
  const std::string text = header() + phase(10, "loading", "init") + alloc(20, "0x1", 100 * kMiB, "other") +
                           phase(30, "kv_allocation", "loading") + alloc(40, "0x2", 400 * kMiB, "kv") +
                           phase(50, "post_kv_warmup", "kv_allocation") + alloc(60, "0x3", 300 * kMiB, "other") +
                           alloc(65, "0x4", 8 * kMiB, "module") + release(70, "0x3", 300 * kMiB, "other") +
                           alloc(80, "0x5", 20 * kMiB, "other") + phase(1000050, "capture", "post_kv_warmup") +
                           alloc(1000060, "0x6", 64 * kMiB, "graph_pool") + alloc(1000070, "0x7", 50 * kMiB, "other") +
                           release(1000080, "0x7", 50 * kMiB, "other") + alloc(1000090, "0x8", 4 * kMiB, "graph_exec") +
                           phase(1500050, "serving", "capture") + "]\n";
  const ProcessFigures p = analyse(kvremap::trace::parse_trace(text, "work.json"));
  const kvremap::analysis::StartUpWork w = kvremap::analysis::start_up_work(p.devices.at(0));
  ASSERT_TRUE(w.warmup.seen);
  EXPECT_EQ(w.warmup.peak_above_bytes, 308 * kMiB) << "300 MiB of autotuning and a module at once";
  EXPECT_EQ(w.warmup.resident_bytes, 28 * kMiB);
  EXPECT_EQ(w.warmup.modules_bytes, 8 * kMiB);
  EXPECT_DOUBLE_EQ(w.warmup.seconds, 1.0);
  ASSERT_TRUE(w.capture.seen);
  EXPECT_EQ(w.capture.graph_pool_bytes, 64 * kMiB);
  EXPECT_EQ(w.capture.graph_exec_bytes, 4 * kMiB);
  EXPECT_EQ(w.capture.peak_above_bytes, 114 * kMiB);
  EXPECT_DOUBLE_EQ(w.capture.seconds, 0.5);
  const auto lines = kvremap::analysis::start_up_work_lines(w);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "post-KV warm-up (compilation, autotuning): peak 308.00 MiB beside the KV cache, 28.00 MiB left resident, "
            "8.00 MiB of modules, 1.00 s");
  EXPECT_EQ(lines[1], "CUDA-graph capture: graph pool 64.00 MiB, graph executables 4.00 MiB, peak 114.00 MiB, 0.50 s");
  // A trace without those phases names nothing.
  const ProcessFigures none = analyse(kvremap::trace::parse_trace(header() + alloc(5, "0x1", kMiB, "other") + "]\n", "n.json"));
  EXPECT_TRUE(kvremap::analysis::start_up_work_lines(kvremap::analysis::start_up_work(none.devices.at(0))).empty());
}

TEST(Analysis, NamesTheCallersHoldingMemoryAtEachPhasesPeak) {
  const ProcessFigures p = analyse(kvremap::trace::parse_trace(startup(), "startup"));
  const auto& profiling = phase_of(p, "profiling");
  ASSERT_EQ(profiling.top_callers.size(), 2u);
  EXPECT_EQ(profiling.top_callers[0].caller, "libweights.so");
  EXPECT_EQ(profiling.top_callers[0].bytes, 100 * kMiB);
  EXPECT_EQ(profiling.top_callers[1].caller, "libtorch.so");
  EXPECT_EQ(profiling.top_callers[1].bytes, 50 * kMiB);
  const auto& warmup = phase_of(p, "post_kv_warmup");
  ASSERT_EQ(warmup.top_callers.size(), 3u);
  EXPECT_EQ(warmup.top_callers[0].caller, "libtorch.so");
  EXPECT_EQ(warmup.top_callers[2].caller, kvremap::analysis::kUnrecordedCaller);
  EXPECT_EQ(warmup.top_callers[2].bytes, 30 * kMiB);
}

TEST(Analysis, ReportJsonAndTheTextTableCarryTheSameAttribution) {
  const ProcessFigures p = analyse(kvremap::trace::parse_trace(startup(), "startup"));
  const nlohmann::json j = kvremap::report::report_json(p);
  EXPECT_EQ(j["devices"][0]["categories_source"], "events");
  EXPECT_EQ(j["devices"][0]["categories"]["kv"]["peak_bytes"], 400 * kMiB);
  const std::string text = kvremap::report::render_phase_attribution(p);
  EXPECT_NE(text.find("kv_allocation     500.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("kv 400.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("at the peak: libweights.so 100.00 MiB, libtorch.so 50.00 MiB"), std::string::npos) << text;
}

TEST(Diff, AStartAgainstItselfHasNoDifferenceAndOtherwiseTheLargestComesFirst) {
  const ProcessFigures a = analyse(kvremap::trace::parse_trace(startup(), "a"));
  for (const auto& row : kvremap::diff::compare(a.devices[0], a.devices[0])) EXPECT_EQ(row.delta(), 0) << row.what;
  std::string more = startup();
  more.insert(more.rfind(']'), alloc(120, "0x8", 300 * kMiB, "graph_pool"));
  const ProcessFigures b = analyse(kvremap::trace::parse_trace(more, "b"));
  const auto rows = kvremap::diff::compare(a.devices[0], b.devices[0]);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].delta(), static_cast<std::int64_t>(300 * kMiB));
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_LE(std::llabs(rows[i].delta()), std::llabs(rows[i - 1].delta()));
}

TEST(Plot, EmbedsReportJsonAndCannotBeClosedEarlyByATracesText) {
  const ProcessFigures p =
      analyse(kvremap::trace::parse_trace(header("vllm </script><b>x") + alloc(5, "0x1", kMiB, "other") + "]\n", "p"));
  const std::string html = kvremap::plot::render_html({p, p});
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  const std::string open = "id=\"kvremap-figures\">";
  const auto begin = html.find(open) + open.size();
  const nlohmann::json embedded = nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
  EXPECT_EQ(embedded, nlohmann::json::array({kvremap::report::report_json(p), kvremap::report::report_json(p)}));
  std::size_t panels = 0;
  for (auto at = html.find("<svg class=\"panel\""); at != std::string::npos;
       at = html.find("<svg class=\"panel\"", at + 1))
    ++panels;
  EXPECT_EQ(panels, 2u);
}

// A defer-mode start's plan, as the library writes it (docs/trace-format.md, KV events).
std::string planned_start(double utilization) {
  const std::string cmdline = "vllm serve m --gpu-memory-utilization " + std::to_string(utilization);
  std::string t = header(cmdline) + phase(10, "loading", "init") + alloc(20, "0x1", 300 * kMiB, "other");
  t += ",{\"ph\":\"i\",\"cat\":\"kv\",\"name\":\"kv commit plan\",\"pid\":7,\"tid\":1,\"ts\":200,\"s\":\"g\",\"args\":"
       "{\"device\":0,\"kv_bytes\":" +
       std::to_string(400 * kMiB) + ",\"device_bytes\":" + std::to_string(400 * kMiB) +
       ",\"host_bytes\":0,\"tensors\":4,\"host_bytes_per_tensor\":0,\"granularity\":2097152,\"chunk_bytes\":0,"
       "\"device_free_bytes\":" +
       std::to_string(500 * kMiB) + ",\"headroom_bytes\":" + std::to_string(50 * kMiB) +
       ",\"headroom_source\":\"profiled activation peak\",\"post_kv_transient_bytes\":" + std::to_string(20 * kMiB) +
       ",\"margin_bytes\":" + std::to_string(50 * kMiB) + ",\"deficit_bytes\":0,\"verdict\":\"all_device\"}}\n";
  return t + "]\n";
}

// A replay at `share` (vLLM's flag unless named), with the traced start's headroom and chunk.
kvremap::what_if::Settings at_share(double share, kvremap::what_if::ShareFlag flag =
                                                        kvremap::what_if::ShareFlag::gpu_memory_utilization) {
  kvremap::what_if::Settings settings;
  settings.flag = flag;
  settings.share = share;
  return settings;
}

TEST(WhatIf, ReplaysTheTracedPlanAtItsOwnShareAndMovesTheKvLinearlyWithTheShare) {
  const ProcessFigures p = analyse(kvremap::trace::parse_trace(planned_start(0.5), "w"));
  const auto same = kvremap::what_if::replay(p, at_share(0.5));
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0].kv_bytes, 400 * kMiB);
  EXPECT_EQ(same[0].plan.margin_bytes, static_cast<std::int64_t>(50 * kMiB));
  EXPECT_TRUE(same[0].stock_oom_phase.empty());
  // 0.1 more of a 1 GiB device is 102.4 MiB more KV, rounded down to 4 tensors x 2 MiB; stock needs the
  // 20 MiB post-KV transient beside it, 516 MiB of the 500 MiB free.
  const auto more = kvremap::what_if::replay(p, at_share(0.6));
  EXPECT_EQ(more[0].kv_bytes, 496 * kMiB);
  EXPECT_EQ(more[0].plan.verdict, kvremap::policy::CommitVerdict::host_tail);
  EXPECT_EQ(more[0].plan.margin_bytes, -static_cast<std::int64_t>(46 * kMiB));
  EXPECT_EQ(more[0].stock_oom_phase, "post_kv_warmup");
  EXPECT_THROW(kvremap::what_if::replay(analyse(kvremap::trace::parse_trace(startup(), "s")), at_share(0.5)),
               std::invalid_argument);
  EXPECT_THROW(kvremap::what_if::replay(p, at_share(0.5, kvremap::what_if::ShareFlag::mem_fraction_static)),
               std::invalid_argument)
      << "a vLLM start replayed with SGLang's flag";
}

// The analysing commands read allocations and frees as compact steps and hot lines with the scanner;
// their report, report --json and plot must be what the full records give.
TEST(Analysis, CompactStepsGiveTheFiguresOfTheFullRecords) {
  std::ifstream file(std::string(KVREMAP_SOURCE_DIR) + "/tests/data/traces/complete.json");
  std::stringstream complete;
  complete << file.rdbuf();
  ASSERT_FALSE(complete.str().empty());
  const kvremap::trace::ReadOptions compact{
      .keep_raw_events = false, .keep_every_counter_sample = false, .memory_timeline_only = true};
  for (const std::string& text : std::vector<std::string>{startup(), planned_start(0.5), complete.str()}) {
    const kvremap::trace::Trace full = kvremap::trace::parse_trace(text, "t");
    const kvremap::trace::Trace steps = kvremap::trace::parse_trace(text, "t", compact);
    ASSERT_TRUE(steps.memory.has_value());
    EXPECT_TRUE(steps.allocs.empty());
    EXPECT_EQ(steps.memory->steps.size(), full.allocs.size() + full.frees.size() + full.graph_execs.size() +
                                              full.modules.size());
    const ProcessFigures a = analyse(full);
    const ProcessFigures b = analyse(steps);
    EXPECT_EQ(kvremap::report::report_json(a).dump(), kvremap::report::report_json(b).dump());
    EXPECT_EQ(kvremap::report::render_report(full), kvremap::report::render_report(steps));
    EXPECT_EQ(kvremap::report::render_phase_attribution(a), kvremap::report::render_phase_attribution(b));
    EXPECT_EQ(kvremap::plot::render_html({a}), kvremap::plot::render_html({b}));
  }
}

TEST(TraceReader, ReportsProgressByBytesReadUpToTheFilesSize) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("kvremap-progress-" + std::to_string(getpid()) + ".json");
  std::string text = header();
  for (int i = 0; text.size() < 3 * kMiB; ++i) text += alloc(i, "0x" + std::to_string(i), 1, "other");
  text += "]\n";
  std::ofstream(path) << text;
  std::vector<std::uint64_t> seen;
  kvremap::trace::ReadOptions options{.keep_raw_events = false, .keep_records = false};
  options.on_progress = [&](std::uint64_t done, std::uint64_t size) {
    EXPECT_EQ(size, text.size());
    seen.push_back(done);
  };
  kvremap::trace::read_trace(path, options);
  std::filesystem::remove(path);
  ASSERT_GE(seen.size(), 3u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_EQ(seen.back(), text.size());
}

std::string counter(double ts, int device, std::uint64_t other) {
  return ",{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"device " + std::to_string(device) +
         " bytes\",\"pid\":7,\"tid\":1,\"ts\":" + std::to_string(ts) + ",\"args\":{\"kv\":0,\"graph_pool\":0,\"graph_exec\":0,\"module\":0,"
         "\"async_pool\":0,\"vmm\":0,\"other\":" + std::to_string(other) + "}}\n";
}

TEST(TraceReader, KeepsOnlyEachDevicesLatestCounterSampleWhenAsked) {
  // Out of time order, as threads' chunks leave them: the latest is not the last written.
  const std::string text =
      header() + counter(10, 0, 1) + counter(30, 0, 3) + counter(20, 0, 2) + counter(5, 1, 9) + "]\n";
  const auto all = kvremap::trace::parse_trace(text, "t");
  EXPECT_EQ(all.counters.size(), 4u);
  const auto latest = kvremap::trace::parse_trace(text, "t", {.keep_every_counter_sample = false});
  ASSERT_EQ(latest.counters.size(), 2u);
  EXPECT_EQ(latest.counters[0].device, 0);
  EXPECT_EQ(latest.counters[0].event.ts_us, 30);
  EXPECT_EQ(latest.counters[0].bytes_by_category.at("other"), 3u);
  EXPECT_EQ(latest.counters[1].device, 1);
  EXPECT_EQ(latest.event_count, all.event_count);
}

TEST(Merge, OneHeaderNoSummaryAndEachTraceShiftedByItsWallClockStart) {
  const std::string dir = std::filesystem::temp_directory_path() / ("kvremap-merge-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/a.json") << header("a", 1'000'000'000, 7) + alloc(5, "0x1", kMiB, "other") + "]\n";
  std::ofstream(dir + "/b.json") << header("b", 1'002'000'000, 7) + alloc(5, "0x1", kMiB, "other") + "]\n";
  std::ostringstream out;
  const auto result = kvremap::merge::merge_traces({dir + "/a.json", dir + "/b.json"}, out, nullptr);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(result.aligned_on_wall_clock);
  ASSERT_EQ(result.inputs.size(), 2u);
  EXPECT_EQ(result.inputs[1].offset_us, 2000);
  EXPECT_NE(result.inputs[0].pid, result.inputs[1].pid);  // both were pid 7
  const auto merged = kvremap::trace::parse_trace(out.str(), "merged");
  const auto problems = kvremap::trace::validate(merged);
  EXPECT_TRUE(problems.empty()) << problems.front();
  ASSERT_EQ(merged.allocs.size(), 2u);
  EXPECT_EQ(merged.allocs[0].event.ts_us, 5);
  EXPECT_EQ(merged.allocs[1].event.ts_us, 2005);
  EXPECT_EQ(merged.header.start_unix_ns, 1'000'000'000);
}

}  // namespace
