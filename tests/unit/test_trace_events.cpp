// Every typed trace event of interpose/trace writes what tools/trace reads back, with the figures it was given, and validates.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "interpose/base/library.h"
#include "interpose/base/process_id.h"
#include "interpose/base/tick_clock.h"
#include "interpose/trace/events.h"
#include "interpose/trace/hot_format.h"
#include "interpose/trace/kv_events.h"
#include "interpose/trace/trace_writer.h"
#include "tools/trace/kv_events.h"
#include "tools/trace/trace_reader.h"

namespace kvremap::interpose {
namespace {

namespace fs = std::filesystem;
using policy::Category;
using policy::Phase;

constexpr std::uint64_t kMiB = 1ULL << 20;

// The trace file this process's open_trace() created: kvremap-HOST-PID[.N].json in KVREMAP_TRACE_DIR.
std::string this_process_trace() {
  const std::string pid = "-" + std::to_string(getpid());
  std::string found;
  for (const auto& entry : fs::directory_iterator(options().trace_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kvremap-", 0) == 0 && name.find(pid + ".") != std::string::npos &&
        (found.empty() || fs::last_write_time(entry.path()) > fs::last_write_time(found)))
      found = entry.path().string();
  }
  return found;
}

const trace::OtherEvent* other_event(const trace::Trace& t, std::string_view name) {
  for (const trace::OtherEvent& e : t.other_events)
    if (e.name == name) return &e;
  return nullptr;
}

const trace::KvEvent* kv_event_named(const std::vector<trace::KvEvent>& events, std::string_view name) {
  for (const trace::KvEvent& e : events)
    if (e.name == name) return &e;
  return nullptr;
}

// Writes one of every event through the typed functions, closes the trace with a summary and reads it back.
class TraceEvents : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(options().trace) << "run with KVREMAP_TRACE_DIR set and KVREMAP_TRACE on (tests/unit/CMakeLists.txt)";
    fs::create_directories(options().trace_dir);
    trace_events::open_trace();
    ASSERT_TRUE(trace().is_open());
    write_events();
    path_ = new std::string(this_process_trace());
    trace_ = new trace::Trace(trace::read_trace(*path_));
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove(*path_, ignored);
  }

  static void write_events();
  static void write_kv_events();
  static std::string* path_;
  static trace::Trace* trace_;
};
std::string* TraceEvents::path_ = nullptr;
trace::Trace* TraceEvents::trace_ = nullptr;

void TraceEvents::write_events() {
  trace_events::device_seen(0, 80 * 1024 * kMiB);
  trace_events::phase_changed(0, Phase::init, Phase::loading, "first \"allocation\"");
  const std::uint64_t ptr = 0x7f0000200000;
  const HotRecord alloc{ticks(), ptr, "cudaMalloc",
                        HotRecord::pack(2 * kMiB, 0, kHotAlloc, static_cast<std::uint8_t>(Category::other),
                                        static_cast<std::uint8_t>(Phase::loading))};
  trace_events::hot_line(alloc, "libc10_cuda.so");
  trace_events::reclassified(ptr, 2 * kMiB, 0, Category::other, Category::kv, Phase::kv_allocation);
  std::uint64_t live[kCounterWords] = {};
  live[static_cast<std::size_t>(Category::kv)] = 2 * kMiB;
  trace().hot_counter(ticks(), 0, live);
  // A later sample where kvremap placed a KV cache of 64 MiB, 48 MiB of it deferred onto a 2 MiB scratch.
  std::uint64_t placed[kCounterWords] = {};
  placed[static_cast<std::size_t>(Category::kv)] = 18 * kMiB;
  placed[kCounterKvReserved] = 64 * kMiB;
  placed[kCounterKvDevice] = 16 * kMiB;
  placed[kCounterKvScratch] = 48 * kMiB;
  placed[kCounterKvPlaced] = 1;
  trace().hot_counter(ticks(), 0, placed);
  trace_events::MemoryQuery query{0, "cudaMemGetInfo", 0, 70 * 1024 * kMiB, 80 * 1024 * kMiB, 60 * 1024 * kMiB,
                                  80 * 1024 * kMiB, Phase::profiling, trace_now_ns()};
  trace_events::memory_query(query);
  trace_events::held_object_created(trace_events::HeldObject::graph_exec, "cuGraphInstantiate", 0xe1, 4096, 0);
  trace_events::held_object_destroyed(trace_events::HeldObject::graph_exec, "cuGraphExecDestroy", 0xe1, 4096, 0);
  trace_events::held_object_created(trace_events::HeldObject::module, "cuModuleLoadData", 0xa1, 8192, 0);
  const std::uint64_t begin = trace_now_ns();
  trace_events::capture_ended({7, 0x5000, 1, true, 3 * kMiB, current_tid(), begin, begin + 1500, false});
  trace_events::capture_ended({8, 0x6000, 2, false, 0, current_tid(), begin, begin + 2500, true});
  trace_events::OomSnapshot oom;
  oom.device = 0;
  oom.phase = Phase::capture;
  oom.api = "cudaMalloc";
  oom.requested_bytes = 4 * kMiB;
  oom.caller = "libtorch_cuda.so";
  oom.device_free_bytes = 1 * kMiB;
  oom.live_bytes[static_cast<std::size_t>(Category::kv)] = 2 * kMiB;
  oom.live_bytes[static_cast<std::size_t>(Category::module)] = 8192;
  oom.top_callers = {{"libc10_cuda.so", 2 * kMiB, 1}, {"", 8192, 1}};
  trace_events::oom_snapshot(oom);
  write_kv_events();
  trace_events::tracking_disabled("a test's reason");

  trace_events::Summary s;
  s.exit = "atexit";
  trace_events::DeviceSummary& d = s.devices.emplace_back();
  d.device = 0;
  d.total_bytes = 80 * 1024 * kMiB;
  d.categories[static_cast<std::size_t>(Category::kv)] = {2 * kMiB, 2 * kMiB, 1500, 2 * kMiB, 1, 0};
  d.categories[static_cast<std::size_t>(Category::module)] = {8192, 8192, 2500, 8192, 1, 0};
  s.checkpoints.push_back(query);
  s.captures = 2;
  s.graph_launches = 3;
  s.kernel_launches = 4;
  s.module_loads = 1;
  s.routed_lookups = 5;
  trace().close(trace_events::summary(s));
}

void TraceEvents::write_kv_events() {
  trace_events::kv_arena_refused(1, "KVREMAP_CHUNK_BYTES=3MiB is not a multiple of \"2MiB\"");
  trace_events::kv_arena_reserved({0, 0x7e0000000000, 160 * 1024 * kMiB, 2 * kMiB, true, 2 * kMiB});
  trace_events::kv_deferred({0, 2, 64 * kMiB, 128 * kMiB, 2 * kMiB, policy::EngineKind::vllm, true,
                             policy::TriggerMode::automatic});
  trace_events::kv_nothing_deferred("no KV burst on device 1");
  trace_events::kv_free_below_zero(0, 3 * kMiB);
  trace_events::PostKvPeaks peaks{};
  peaks[static_cast<std::size_t>(Category::other)] = {static_cast<std::int64_t>(10 * kMiB),
                                                       static_cast<std::int64_t>(40 * kMiB)};
  trace_events::KvCommitPlanEvent plan;
  plan.device = 0;
  plan.kv_bytes = 128 * kMiB;
  plan.device_bytes = 120 * kMiB;
  plan.host_bytes = 8 * kMiB;
  plan.tensors = 2;
  plan.host_bytes_per_tensor = 4 * kMiB;
  plan.granularity = 2 * kMiB;
  plan.chunk_bytes = 2 * kMiB;
  plan.device_free_bytes = 130 * kMiB;
  plan.headroom_bytes = 10 * kMiB;
  plan.headroom_source = "option";
  plan.margin_bytes = -8 * static_cast<std::int64_t>(kMiB);
  plan.deficit_bytes = 8 * kMiB;
  plan.verdict = policy::CommitVerdict::host_tail;
  trace_events::kv_commit_plan(plan);
  trace_events::KvCommittedEvent committed;
  committed.device = 0;
  committed.trigger = policy::CommitReason::graph_launch;
  committed.call = "cudaGraphLaunch";
  committed.kv_bytes = 128 * kMiB;
  committed.device_bytes = 120 * kMiB;
  committed.host_bytes = 8 * kMiB;
  committed.tensors = 2;
  committed.margin_bytes = -8 * static_cast<std::int64_t>(kMiB);
  committed.scratch_released = true;
  committed.same_start_flags = "--gpu-memory-utilization 0.85";
  committed.post_kv_peaks = peaks;
  trace_events::kv_committed(committed);
  trace_events::kv_profile_written(0, "/profiles/a b.json", 0xfeed);
  trace_events::kv_profile_ignored(0, "/profiles/c.json", "schema version 2, expected 1");
  trace_events::kv_sizing_unchanged(0, "/profiles/c.json", "no shift needed");
  trace_events::kv_sizing_missed(0, "/profiles/c.json", "no memory query 3 in phase profiling came");
  trace_events::kv_restart(0, 8 * kMiB, 75);
  trace_events::KvSizingAdjustedEvent adjusted;
  adjusted.device = 0;
  adjusted.query_index = 3;
  adjusted.phase = "profiling";
  adjusted.driver_free = 70 * 1024 * kMiB;
  adjusted.reported_free = 69 * 1024 * kMiB;
  adjusted.shift_bytes = 1024 * static_cast<std::int64_t>(kMiB);
  adjusted.profile = "/profiles/c.json";
  adjusted.reason = "the last start lacked 1 GiB";
  trace_events::kv_sizing_adjusted(adjusted);
  trace_events::kv_serving_peaks(0, peaks);
}

TEST_F(TraceEvents, TheTraceValidates) {
  EXPECT_TRUE(trace_->complete);
  const std::vector<std::string> problems = trace::validate(*trace_);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST_F(TraceEvents, TheHeaderNamesThisProcessAndItsOptions) {
  EXPECT_EQ(trace_->header.schema_version, policy::kTraceSchemaVersion);
  EXPECT_EQ(trace_->header.pid, process_id());
  EXPECT_EQ(trace_->header.options.at("KVREMAP_TRACE_DIR"), options().trace_dir);
  EXPECT_EQ(trace_->device_total_bytes.at(0), 80 * 1024 * kMiB);
}

TEST_F(TraceEvents, MemoryEventsCarryTheirFigures) {
  ASSERT_EQ(trace_->phase_changes.size(), 1u);
  EXPECT_EQ(trace_->phase_changes[0].phase, "loading");
  EXPECT_EQ(trace_->phase_changes[0].previous, "init");
  EXPECT_EQ(trace_->phase_changes[0].reason, "first \"allocation\"");
  // The hot allocation, then the reclassification: a free as `other`, an allocation as `kv`.
  ASSERT_EQ(trace_->allocs.size(), 2u);
  EXPECT_EQ(trace_->allocs[0].caller, "libc10_cuda.so");
  EXPECT_EQ(trace_->allocs[0].bytes, 2 * kMiB);
  EXPECT_EQ(trace_->allocs[1].api, "kvremap reclassify");
  EXPECT_EQ(trace_->allocs[1].category, "kv");
  EXPECT_EQ(trace_->allocs[1].phase, "kv_allocation");
  ASSERT_EQ(trace_->frees.size(), 1u);
  EXPECT_EQ(trace_->frees[0].category, "other");
  EXPECT_EQ(trace_->frees[0].ptr, "0x7f0000200000");
  ASSERT_EQ(trace_->checkpoints.size(), 1u);
  EXPECT_EQ(trace_->checkpoints[0].api, "cudaMemGetInfo");
  EXPECT_EQ(trace_->checkpoints[0].returned_free, 60 * 1024 * kMiB);
  EXPECT_EQ(trace_->checkpoints[0].phase, "profiling");
  ASSERT_EQ(trace_->graph_execs.size(), 2u);
  EXPECT_FALSE(trace_->graph_execs[0].destroyed);
  EXPECT_TRUE(trace_->graph_execs[1].destroyed);
  EXPECT_EQ(trace_->graph_execs[1].exec, "0xe1");
  ASSERT_EQ(trace_->modules.size(), 1u);
  EXPECT_EQ(trace_->modules[0].handle, "0xa1");
  EXPECT_EQ(trace_->modules[0].bytes, 8192u);
}

TEST_F(TraceEvents, ACounterSampleHasEveryCategory) {
  ASSERT_EQ(trace_->counters.size(), 2u);
  EXPECT_EQ(trace_->counters[0].bytes_by_category.size(), policy::kCategoryNames.size());
  EXPECT_EQ(trace_->counters[0].bytes_by_category.at("kv"), 2 * kMiB);
  EXPECT_EQ(trace_->counters[1].bytes_by_category.at("kv"), 18 * kMiB) << "what the device holds of the KV cache";
}

TEST_F(TraceEvents, ASampleWhereKvremapPlacedTheKvCacheSaysWhereItLies) {
  ASSERT_EQ(trace_->kv_counters.size(), 1u);
  const auto& k = trace_->kv_counters[0];
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(k.event.ts_us, trace_->counters[1].event.ts_us) << "the same time as the device's sample";
  EXPECT_EQ(k.bytes_by_category, (std::map<std::string, std::uint64_t>{
                                     {"reserved", 64 * kMiB}, {"device", 16 * kMiB}, {"scratch", 48 * kMiB}, {"host", 0}}));
}

TEST_F(TraceEvents, ACaptureIsASliceOrAnAsyncPair) {
  ASSERT_EQ(trace_->captures.size(), 2u);
  EXPECT_EQ(trace_->captures[0].capture_id, 7u);
  EXPECT_EQ(trace_->captures[0].mode, "thread_local");
  EXPECT_EQ(trace_->captures[0].status, "ok");
  EXPECT_EQ(trace_->captures[0].allocated_bytes, 3 * kMiB);
  EXPECT_DOUBLE_EQ(trace_->captures[0].dur_us, 1.5);
  // The interleaved window: an async begin/end pair, read as one window.
  EXPECT_EQ(trace_->captures[1].capture_id, 8u);
  EXPECT_EQ(trace_->captures[1].mode, "relaxed");
  EXPECT_EQ(trace_->captures[1].status, "invalidated");
  EXPECT_DOUBLE_EQ(trace_->captures[1].dur_us, 2.5);
  int pair = 0;
  for (const nlohmann::json& e : trace_->events)
    if (e.value("cat", "") == "capture" && (e.value("ph", "") == "b" || e.value("ph", "") == "e")) {
      EXPECT_EQ(e.value("id", ""), "0x8");
      ++pair;
    }
  EXPECT_EQ(pair, 2);
}

TEST_F(TraceEvents, TheOutOfMemorySnapshotSumsItsCallers) {
  const trace::OtherEvent* oom = other_event(*trace_, "oom snapshot");
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->args.at("phase"), "capture");
  EXPECT_EQ(oom->args.at("device_free_bytes"), kMiB);
  EXPECT_EQ(oom->args.at("live_total_bytes"), 2 * kMiB + 8192);
  EXPECT_EQ(oom->args.at("top_callers").size(), 2u);
  EXPECT_EQ(oom->args.at("top_callers")[1].at("caller"), "unknown");
  EXPECT_EQ(oom->args.at("other_bytes"), 0u);
  const trace::OtherEvent* disabled = other_event(*trace_, "tracking disabled");
  ASSERT_NE(disabled, nullptr);
  EXPECT_EQ(disabled->args.at("reason"), "a test's reason");
}

TEST_F(TraceEvents, KvEventsCarryTheirFigures) {
  const std::vector<trace::KvEvent> kv = trace::kv_events(*trace_);
  EXPECT_EQ(kv.size(), 14u);
  const trace::KvEvent* refused = kv_event_named(kv, "kv arena refused");
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->reason, "KVREMAP_CHUNK_BYTES=3MiB is not a multiple of \"2MiB\"");
  const trace::KvEvent* deferred = kv_event_named(kv, "kv deferred");
  ASSERT_NE(deferred, nullptr);
  EXPECT_EQ(deferred->deferred_bytes, 128 * kMiB);
  const trace::KvEvent* plan = kv_event_named(kv, "kv commit plan");
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->verdict, "host_tail");
  EXPECT_EQ(plan->margin_bytes, -8 * static_cast<std::int64_t>(kMiB));
  EXPECT_EQ(plan->headroom_source, "option");
  const trace::KvEvent* committed = kv_event_named(kv, "kv committed");
  ASSERT_NE(committed, nullptr);
  EXPECT_EQ(committed->trigger, policy::to_string(policy::CommitReason::graph_launch));
  EXPECT_EQ(committed->same_start_flags, "--gpu-memory-utilization 0.85");
  ASSERT_TRUE(committed->has_post_kv_peaks);
  ASSERT_EQ(committed->post_kv_peaks.size(), policy::kCategoryNames.size());
  const auto other = std::find_if(committed->post_kv_peaks.begin(), committed->post_kv_peaks.end(),
                                  [](const trace::KvPostKvPeak& p) { return p.category == "other"; });
  ASSERT_NE(other, committed->post_kv_peaks.end());
  EXPECT_EQ(other->peak_above, 30 * kMiB);
  const trace::KvEvent* written = kv_event_named(kv, "kv profile written");
  ASSERT_NE(written, nullptr);
  EXPECT_EQ(written->path, "/profiles/a b.json");
  const trace::KvEvent* adjusted = kv_event_named(kv, "kv sizing adjusted");
  ASSERT_NE(adjusted, nullptr);
  EXPECT_EQ(adjusted->shift_bytes, 1024 * static_cast<std::int64_t>(kMiB));
  EXPECT_EQ(adjusted->reason, "the last start lacked 1 GiB");
  for (const char* name : {"kv nothing deferred", "kv free below zero", "kv profile ignored", "kv sizing unchanged",
                           "kv sizing missed", "kv restart", "kv serving peaks", "kv arena reserved"})
    EXPECT_NE(kv_event_named(kv, name), nullptr) << name;
}

TEST_F(TraceEvents, TheSummaryCarriesItsFigures) {
  ASSERT_TRUE(trace_->summary.has_value());
  const trace::Summary& s = *trace_->summary;
  EXPECT_EQ(s.exit, "atexit");
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].categories.at("kv").live_bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(s.devices[0].categories.at("module").peak_ts_us, 2.5);
  EXPECT_EQ(s.devices[0].categories.at("other").allocations, 0u);
  ASSERT_EQ(s.checkpoints.size(), 1u);
  EXPECT_EQ(s.checkpoints[0].driver_free, 70 * 1024 * kMiB);
  EXPECT_EQ(s.counts.at("routed_lookups"), 5u);
  EXPECT_EQ(s.counts.at("kernel_launches"), 4u);
  EXPECT_EQ(s.options.at("KVREMAP_TRACE_DIR"), options().trace_dir);
}

}  // namespace
}  // namespace kvremap::interpose
