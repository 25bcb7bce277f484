// Integration tests: real programs under LD_PRELOAD=libkvremap.so on the simulated driver, checked through their
// traces.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::repetitions;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20;
const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0",
                                             "SIMCUDA_GRAPH_EXEC_BYTES=6MiB", "SIMCUDA_GRAPH_NODE_BYTES=0",
                                             "SIMCUDA_MODULE_BYTES=0"};

struct Traced {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Traced run_traced(const std::string& mode, std::vector<std::string> env = {}, int timeout_s = 60,
                  int timeout_signal = SIGKILL) {
  const std::string dir = make_temp_dir();
  env = with(with(kSimulator, env), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir});
  Traced t;
  // The working directory is the trace directory too: where traces go when options fall back to defaults.
  t.run = run_program({CUDA_PROGRAM, mode}, env, {}, timeout_s, timeout_signal, dir);
  for (const std::string& file : trace_files(dir)) t.traces.push_back(kvremap::trace::read_trace(file));
  return t;
}

// The KV tensors the trace's `kv deferred` event put on scratch; 0 without one.
std::size_t deferred_regions(const kvremap::trace::Trace& trace) {
  std::size_t regions = 0;
  for (const auto& e : trace.other_events)
    if (e.name == "kv deferred") regions = e.args.at("regions").get<std::size_t>();
  return regions;
}

RunResult run_plain(const std::string& mode, const std::vector<std::string>& env = {}) {
  return run_program({CUDA_PROGRAM, mode}, with(kSimulator, env), {"LD_PRELOAD"});
}

const kvremap::trace::CategoryStats& category(const kvremap::trace::Trace& t, const std::string& name) {
  static const kvremap::trace::CategoryStats none;
  if (!t.summary || t.summary->devices.empty()) return none;
  const auto& cats = t.summary->devices.front().categories;
  auto it = cats.find(name);
  return it == cats.end() ? none : it->second;
}

}  // namespace

TEST(Interposer, EveryRouteToTheDriverIsSeenOnceWithExactBytes) {
  Traced t = run_traced("routes");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces[0];
  ASSERT_TRUE(trace.summary) << "clean exit writes a summary";
  EXPECT_TRUE(trace.complete);
  // cudaMalloc 3 + direct 5 + dlsym 7 + cuGetProcAddress 9/11/13 + entry points 15/17 MiB.
  const auto& other = category(trace, "other");
  EXPECT_EQ(other.allocated_bytes, 80 * kMiB);
  EXPECT_EQ(other.allocations, 8u) << "no allocation may be counted twice (runtime and driver level)";
  EXPECT_EQ(other.frees, 1u);
  EXPECT_EQ(other.live_bytes, 77 * kMiB);
  EXPECT_EQ(category(trace, "async_pool").allocated_bytes, 19 * kMiB);
  EXPECT_EQ(category(trace, "async_pool").live_bytes, 0u);
  EXPECT_EQ(category(trace, "vmm").live_bytes, 2 * kMiB);
  EXPECT_EQ(category(trace, "graph_pool").allocated_bytes, 0u);

  std::vector<std::uint64_t> sizes;
  for (const auto& a : trace.allocs)
    if (a.category == "other") sizes.push_back(a.bytes / kMiB);
  EXPECT_EQ(sizes, (std::vector<std::uint64_t>{3, 5, 7, 9, 11, 13, 15, 17}));
  EXPECT_EQ(trace.allocs.front().api, "cudaMalloc");
  EXPECT_EQ(trace.allocs[1].api, "cuMemAlloc");
  // cudart's start-up resolution plus the program's own lookups went through the wrappers.
  EXPECT_GE(trace.summary->counts.at("routed_lookups"), 10u);
  ASSERT_EQ(trace.checkpoints.size(), 1u);
  EXPECT_EQ(trace.checkpoints[0].api, "cudaMemGetInfo");
  EXPECT_EQ(trace.checkpoints[0].driver_free, trace.checkpoints[0].returned_free) << "observe mode changes nothing";
  EXPECT_EQ(trace.checkpoints[0].driver_total, 4096 * kMiB);
}

TEST(Interposer, TraceConformsToTheDocumentedSchema) {
  for (const char* mode : {"routes", "captures"}) {
    Traced t = run_traced(mode);
    ASSERT_EQ(t.traces.size(), 1u) << mode;
    EXPECT_EQ(kvremap::trace::validate(t.traces[0]), std::vector<std::string>{}) << mode;
    EXPECT_EQ(t.traces[0].header.schema_version, kvremap::trace::kSchemaVersion);
    EXPECT_EQ(t.traces[0].header.options.at("KVREMAP_MODE"), "defer") << "the default";
  }
}

TEST(Interposer, CapturesOnTwoThreadsFeedGraphPoolsAndInstantiationFeedsGraphExec) {
  Traced t = run_traced("captures");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces[0];
  EXPECT_EQ(category(trace, "graph_pool").allocated_bytes, 12 * kMiB) << "4 MiB and 8 MiB inside the windows";
  EXPECT_EQ(category(trace, "other").allocated_bytes, 3 * kMiB) << "1 MiB before and 2 MiB after";
  EXPECT_EQ(category(trace, "graph_exec").allocated_bytes, 12 * kMiB) << "two instantiations of 6 MiB";
  EXPECT_EQ(category(trace, "graph_exec").live_bytes, 6 * kMiB) << "one exec destroyed";
  EXPECT_EQ(category(trace, "module").live_bytes, 10 * kMiB);
  ASSERT_EQ(trace.captures.size(), 2u);
  EXPECT_EQ(trace.captures[0].mode, "global");
  EXPECT_EQ(trace.captures[0].allocated_bytes, 4 * kMiB);
  EXPECT_EQ(trace.captures[1].mode, "relaxed");
  EXPECT_EQ(trace.captures[1].allocated_bytes, 8 * kMiB);
  EXPECT_NE(trace.captures[0].event.tid, trace.captures[1].event.tid);
  EXPECT_EQ(trace.summary->counts.at("captures"), 2u);
  EXPECT_EQ(trace.summary->counts.at("graph_launches"), 2u);
  // cudaLaunchKernel reaches cuLaunchKernel through the table cudart resolved via our wrapper.
  EXPECT_EQ(trace.summary->counts.at("kernel_launches"), 2u);
}

TEST(Interposer, ObserveModeIsTransparent) {
  struct Case {
    const char* mode;
    std::vector<std::string> env;
  };
  const std::vector<Case> cases = {
      {"routes", {}},
      {"captures", {}},
      {"oom", {}},
      {"faults", {"SIMCUDA_FAIL=cuMemAlloc_v2:1:CUDA_ERROR_OUT_OF_MEMORY,cuMemGetInfo_v2:1:CUDA_ERROR_INVALID_VALUE"}},
  };
  for (const Case& c : cases) {
    const RunResult plain = run_plain(c.mode, c.env);
    const Traced traced = run_traced(c.mode, c.env);
    EXPECT_EQ(plain.exit_code, traced.run.exit_code) << c.mode;
    EXPECT_EQ(plain.out, traced.run.out) << c.mode;
  }
  const RunResult oom = run_plain("oom");
  EXPECT_NE(oom.out.find("huge cudaMalloc: 2 (cudaErrorMemoryAllocation)"), std::string::npos) << oom.out;
}

TEST(Interposer, ForkedChildLeavesItsOwnCompleteTrace) {
  Traced t = run_traced("fork");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 2u);
  std::sort(t.traces.begin(), t.traces.end(), [](const auto& a, const auto& b) { return a.header.pid < b.header.pid; });
  const auto& parent = t.traces[0].header.ppid == t.traces[1].header.pid ? t.traces[1] : t.traces[0];
  const auto& child = &parent == &t.traces[0] ? t.traces[1] : t.traces[0];
  EXPECT_EQ(child.header.ppid, parent.header.pid);
  for (const auto* trace : {&parent, &child}) {
    EXPECT_TRUE(trace->complete);
    EXPECT_TRUE(trace->summary.has_value());
  }
  EXPECT_EQ(category(parent, "other").allocated_bytes, 6 * kMiB);
  EXPECT_EQ(category(child, "other").allocated_bytes, 12 * kMiB) << "the child's trace holds only its own work";
}

// A child forked from a traced process inherits its exit handlers; one that exits without a CUDA call
// writes no trace and says nothing (it used to open a trace at exit, to say it deferred nothing).
TEST(Interposer, AForkedChildThatNeverCallsCudaWritesNoTraceAndSaysNothing) {
  Traced t = run_traced("fork-without-cuda", {"KVREMAP_MODE=defer", "KVREMAP_LOG_LEVEL=info"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("child exits without CUDA"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.traces.size(), 1u) << t.run.err;
  const std::int64_t parent = t.traces[0].header.pid;
  std::istringstream err(t.run.err);
  for (std::string line; std::getline(err, line);) {
    // LeakSanitizer's own note in a child forked from a threaded parent (the sanitizer stage), not the child's.
    if (line.starts_with("==") && line.ends_with("was not suspended. False leaks are possible.")) continue;
    EXPECT_EQ(line.find("kvremap: [pid " + std::to_string(parent) + "]"), 0u) << "a line of the child: " << line;
  }
}

// A fork while another thread of the parent is placing a KV tensor (its slow mapping inside kvremap's KV
// state): the child starts with a fresh KV state, so its own KV-sized allocation never waits for the lock
// that thread held at the fork (it used to: a forked child hung in its first allocation or free).
TEST(Interposer, AForkWhileAnotherThreadPlacesKvLeavesTheChildFree) {
  const Traced t =
      run_traced("fork-while-kv-busy", {"KVREMAP_MODE=defer", "SIMCUDA_LATENCY_US=cuMemMap=2000000"}, 120);
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("child KV-sized allocation: ok"), std::string::npos) << t.run.out;
  EXPECT_NE(t.run.out.find("tagged KV tensor: ok"), std::string::npos) << t.run.out;
}

// A free is taken out of tracking before the driver releases the address: another thread that gets
// the address back at once must not have its own record taken in place of the freed one.
TEST(Interposer, ConcurrentAllocationsReusingAddressesLoseNoFree) {
  const Traced t = run_traced("churn");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  constexpr std::uint64_t kPairs = 8 * 1500;
  ASSERT_EQ(trace.allocs.size(), kPairs);
  ASSERT_EQ(trace.frees.size(), kPairs);
  // Each thread's events pair up: an allocation, then the free of that very allocation.
  std::map<std::int64_t, std::vector<const kvremap::trace::MemoryEvent*>> by_thread;
  std::vector<const kvremap::trace::MemoryEvent*> all;
  for (const auto& e : trace.allocs) all.push_back(&e);
  for (const auto& e : trace.frees) all.push_back(&e);
  // File order: each thread's events are written in the order it made them.
  std::sort(all.begin(), all.end(), [](const auto* a, const auto* b) { return a->event.index < b->event.index; });
  for (const auto* e : all) by_thread[e->event.tid].push_back(e);
  ASSERT_EQ(by_thread.size(), 8u);
  for (const auto& [tid, events] : by_thread) {
    ASSERT_EQ(events.size(), 2 * 1500u) << "thread " << tid;
    for (std::size_t i = 0; i + 1 < events.size(); i += 2) {
      ASSERT_EQ(events[i]->ptr, events[i + 1]->ptr) << "thread " << tid << " event " << i;
      ASSERT_EQ(events[i]->bytes, events[i + 1]->bytes) << "thread " << tid << " event " << i;
    }
  }
  // Slices (capture windows, allocation lifetimes) nest on every thread's track.
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  const auto& other = category(trace, "other");
  EXPECT_EQ(other.allocations, kPairs);
  EXPECT_EQ(other.frees, kPairs);
  EXPECT_EQ(other.live_bytes, 0u);
  EXPECT_EQ(other.allocated_bytes, 4 * 1500 * (256 + 512) * 1024ULL);
  // Every instantiation (6 MiB each in this simulator) is released again, by its own thread.
  constexpr std::uint64_t kExecs = 8 * 150;
  std::map<std::int64_t, std::vector<const kvremap::trace::GraphExecEvent*>> execs;
  for (const auto& e : trace.graph_execs) execs[e.event.tid].push_back(&e);
  std::size_t exec_events = 0;
  for (auto& [tid, events] : execs) {
    std::sort(events.begin(), events.end(),
              [](const auto* a, const auto* b) { return a->event.index < b->event.index; });
    exec_events += events.size();
    for (std::size_t i = 0; i + 1 < events.size(); i += 2) {
      ASSERT_FALSE(events[i]->destroyed) << "thread " << tid << " event " << i;
      ASSERT_TRUE(events[i + 1]->destroyed) << "thread " << tid << " event " << i;
      ASSERT_EQ(events[i]->exec, events[i + 1]->exec) << "thread " << tid << " event " << i;
    }
  }
  EXPECT_EQ(exec_events, 2 * kExecs);
  const auto& graph_exec = category(trace, "graph_exec");
  EXPECT_EQ(graph_exec.allocations, kExecs);
  EXPECT_EQ(graph_exec.frees, kExecs);
  EXPECT_EQ(graph_exec.live_bytes, 0u);
}

// A pair written as one lifetime event must be exactly an allocation the thread freed before it did
// anything else; the trace must still add up, and its slices nest with the capture windows.
TEST(Interposer, OnlyBackToBackPairsBecomeLifetimesAndTheTraceStillAddsUp) {
  const Traced t = run_traced("lifetimes");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  constexpr std::uint64_t kRounds = 2000, kCaptures = 20;
  ASSERT_EQ(trace.allocs.size(), 3 * kRounds + 2 * kCaptures);
  ASSERT_EQ(trace.frees.size(), trace.allocs.size());
  std::size_t lifetimes = 0;
  for (const auto& a : trace.allocs) {
    if (!a.lifetime) continue;
    ++lifetimes;
    EXPECT_EQ(a.bytes, 256 * 1024u) << "only the back-to-back allocation may be a lifetime: " << a.ptr;
  }
  std::size_t lifetime_frees = 0;
  for (const auto& f : trace.frees) lifetime_frees += f.lifetime ? 1 : 0;
  EXPECT_EQ(lifetime_frees, lifetimes);
  // Each back-to-back pair is one lifetime or, where the background writer drained the ring between its
  // two records, two events: how many of each depends on the writer's timing, the total never does.
  std::size_t back_to_back = 0;
  for (const auto& a : trace.allocs) back_to_back += a.bytes == 256 * 1024u;
  EXPECT_EQ(back_to_back, kRounds);
  EXPECT_LE(lifetimes, kRounds);
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  EXPECT_EQ(replay.frees_exceeding_live, 0u);
  ASSERT_TRUE(trace.summary.has_value());
  for (const auto& [name, stats] : trace.summary->devices.at(0).categories) {
    kvremap::trace::CategoryStats replayed = replay.devices.at(0).at(name);
    // The summary times a peak when the hook runs, the event when the writer converts its ticks:
    // the two agree to the conversion's accuracy, not to the nanosecond.
    EXPECT_NEAR(replayed.peak_ts_us, stats.peak_ts_us, 2.0) << name;
    replayed.peak_ts_us = stats.peak_ts_us;
    EXPECT_EQ(replayed, stats) << name;
  }
  EXPECT_EQ(category(trace, "graph_pool").allocated_bytes, kCaptures * 512 * 1024);
  EXPECT_EQ(category(trace, "other").allocated_bytes, kRounds * (64 + 128 + 256) * 1024 + kCaptures * 384 * 1024);
}

// 20000 pairs in a few milliseconds (no host backing): the thread's ring fills between two drains of
// the background writer, so the thread writes its own records; none may be lost or duplicated.
TEST(Interposer, AThreadThatOutrunsTheTraceWriterLosesNoRecord) {
  const Traced t = run_traced("burst", {"SIMCUDA_HOST_BACKING=0"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  constexpr std::uint64_t kPairs = 20000;
  EXPECT_EQ(trace.allocs.size(), kPairs);
  EXPECT_EQ(trace.frees.size(), kPairs);
  const auto& other = category(trace, "other");
  EXPECT_EQ(other.allocations, kPairs);
  EXPECT_EQ(other.frees, kPairs);
  EXPECT_EQ(other.allocated_bytes, kPairs * 64 * 1024);
  EXPECT_EQ(other.live_bytes, 0u);
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  EXPECT_EQ(replay.frees_exceeding_live, 0u);
  EXPECT_EQ(replay.devices.at(0).at("other").allocated_bytes, other.allocated_bytes);
}

// Under a file-size limit with SIGXFSZ at its default action (Slurm, `docker --ulimit fsize`, systemd
// LimitFSIZE) of zero — a trace directory already full — the trace's first write, on the program's own
// thread at its first CUDA call, cannot take the header: no file is left (never an empty one, which no
// reader loads), one line says so, and the program never gets the signal.
TEST(Interposer, AFileSizeLimitStopsTracingNeverTheProgram) {
  const std::string dir = make_temp_dir();
  const std::vector<std::string> env =
      with(with(kSimulator, {"SIMCUDA_HOST_BACKING=0"}), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir});
  const RunResult r = run_program({"/bin/sh", "-c", "ulimit -f 0; exec \"$0\" burst", CUDA_PROGRAM}, env, {}, 60);
  EXPECT_EQ(r.signal, 0) << "signal " << r.signal;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, run_plain("burst", {"SIMCUDA_HOST_BACKING=0"}).out);
  const std::string line = ": File too large; tracing off (no file is left), tracking goes on";
  ASSERT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << "one line: " << r.err;
  EXPECT_NE(r.err.find("warning: cannot create trace file " + dir + "/kvremap-"), std::string::npos) << r.err;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 0)
      << "a file is left in the trace directory";
}

TEST(Interposer, EachOfSuccessiveThreadsKeepsItsOwnThreadId) {
  const Traced t = run_traced("successive-threads");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  std::map<std::int64_t, std::size_t> allocs_by_thread;
  for (const auto& a : trace.allocs) ++allocs_by_thread[a.event.tid];
  EXPECT_EQ(allocs_by_thread.size(), 20u);
  for (const auto& [tid, count] : allocs_by_thread) EXPECT_EQ(count, 50u) << "thread " << tid;
  EXPECT_EQ(allocs_by_thread.count(t.traces.front().header.pid), 0u) << "the main thread allocated nothing";
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
}

TEST(Interposer, ACaptureEndedByAnotherThreadClosesForTheThreadThatBeganIt) {
  const Traced t = run_traced("capture-ended-elsewhere");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  // The windows sit on the beginning thread's track and nest with its allocation lifetimes.
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  ASSERT_EQ(trace.captures.size(), 20u);
  std::size_t during = 0, after = 0;
  for (const auto& a : trace.allocs) {
    EXPECT_EQ(a.event.tid, trace.captures.front().event.tid) << "only the beginning thread allocates";
    if (a.bytes == 64 * 1024u) during += a.category == "graph_pool" ? 1 : 0;
    if (a.bytes == 128 * 1024u) {
      ++after;
      EXPECT_EQ(a.category, "other") << "allocated after every capture ended";
    }
  }
  EXPECT_EQ(after, 100u);
  EXPECT_GE(during, 20u * 10u) << "each capture saw at least ten allocations";
}

// Slices on a thread's track must nest; a window that would end inside a later one on the same
// thread is written as an async pair instead, and read back as the same kind of window.
TEST(Interposer, InterleavedCaptureWindowsOnOneThreadStillFormAValidTrace) {
  const Traced t = run_traced("interleaved-captures");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces.front();
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  std::map<std::string, int> capture_phs;
  for (const auto& e : trace.events)
    if (e.value("cat", "") == "capture") ++capture_phs[e.value("ph", "")];
  EXPECT_EQ(capture_phs, (std::map<std::string, int>{{"X", 3}, {"b", 1}, {"e", 1}}));
  ASSERT_EQ(trace.captures.size(), 4u);
  std::map<std::uint64_t, const kvremap::trace::CaptureWindow*> by_id;
  for (const auto& c : trace.captures) by_id[c.capture_id] = &c;
  ASSERT_EQ(by_id.size(), 4u);
  const auto first = by_id.begin()->second, second = std::next(by_id.begin())->second;
  // The interleaved pair: the first ends after the second began and before the second ended.
  EXPECT_LT(second->event.ts_us, first->event.ts_us + first->dur_us);
  EXPECT_LT(first->event.ts_us + first->dur_us, second->event.ts_us + second->dur_us);
  for (const auto& c : trace.captures) EXPECT_EQ(c.status, "ok");
}

TEST(Interposer, AKilledProcessLeavesAReadableTrace) {
  Traced t = run_traced("wait", {}, 3, SIGKILL);
  EXPECT_EQ(t.run.signal, SIGKILL);
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces[0];
  EXPECT_FALSE(trace.complete);
  EXPECT_FALSE(trace.summary.has_value());
  ASSERT_EQ(trace.checkpoints.size(), 1u) << "checkpoints are written out at once";
  ASSERT_FALSE(trace.allocs.empty());
  EXPECT_EQ(trace.allocs[0].bytes, 5 * kMiB);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
}

TEST(Interposer, SigtermWritesTheSummaryAndStillTerminates) {
  Traced t = run_traced("wait", {}, 3, SIGTERM);
  EXPECT_EQ(t.run.signal, SIGTERM) << "the program's default disposition is kept; exit code " << t.run.exit_code
                                   << ", stderr: " << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  ASSERT_TRUE(t.traces[0].summary.has_value());
  EXPECT_EQ(t.traces[0].summary->exit, "SIGTERM");
  EXPECT_TRUE(t.traces[0].complete);
}

TEST(Interposer, AProgramsOwnSignalHandlerStillRunsAndDecides) {
  Traced t = run_traced("interrupt", {}, 3, SIGINT);
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("interrupted, exiting cleanly"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.traces.size(), 1u);
  ASSERT_TRUE(t.traces[0].summary.has_value());
  EXPECT_EQ(t.traces[0].summary->exit, "atexit") << "kvremap did not end tracking behind the program's back";
}

TEST(Interposer, BadOptionsAreReportedInOneLineAndFallBackToDefaults) {
  Traced t = run_traced("routes", {"KVREMAP_STACK_MIN_BYTES=lots", "KVREMAP_TRACEDIR=/tmp"});
  EXPECT_EQ(t.run.exit_code, 0);
  EXPECT_NE(t.run.err.find("kvremap: KVREMAP_STACK_MIN_BYTES='lots' is invalid: expected a size such as 4096, 64KiB, "
                           "512MiB, 1.5G or 2GiB; KVREMAP_STACK_MIN_BYTES stays 1MiB\n"),
            std::string::npos)
      << t.run.err;
  EXPECT_NE(t.run.err.find("kvremap: unknown variable KVREMAP_TRACEDIR (did you mean KVREMAP_TRACE_DIR?)\n"),
            std::string::npos)
      << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u) << "observe-only with defaults still traces";
  EXPECT_EQ(t.traces[0].header.options.at("KVREMAP_STACK_MIN_BYTES"), "1MiB");
  EXPECT_EQ(t.run.out, run_plain("routes").out);
}

TEST(Interposer, StrictModeExitsOnABadValue) {
  Traced t = run_traced("routes", {"KVREMAP_STRICT=1", "KVREMAP_MODE=turbo"});
  EXPECT_EQ(t.run.exit_code, 1);
  EXPECT_NE(t.run.err.find("kvremap: KVREMAP_MODE='turbo' is invalid: expected one of observe, defer"),
            std::string::npos)
      << t.run.err;
  EXPECT_TRUE(t.run.out.empty()) << "the program never ran";
}

TEST(Interposer, CallerAttributionNamesTheCallingObject) {
  Traced t = run_traced("routes", {"KVREMAP_STACK_MIN_BYTES=4MiB"});
  ASSERT_EQ(t.traces.size(), 1u);
  for (const auto& a : t.traces[0].allocs) {
    if (a.bytes >= 4 * kMiB) {
      EXPECT_EQ(a.caller, "cuda_program") << a.bytes;
    } else {
      EXPECT_TRUE(a.caller.empty()) << a.bytes;
    }
  }
}

TEST(Interposer, AnUnwritableTraceDirectoryCostsTheTraceNotTheProgram) {
  const RunResult plain = run_plain("routes");
  const RunResult r =
      run_program({CUDA_PROGRAM, "routes"},
                  with(kSimulator, {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=/proc/no-such-dir"}));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, plain.out);
  EXPECT_NE(r.err.find("cannot create trace file /proc/no-such-dir/kvremap-"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

// KVREMAP_MODE=defer with the explicit tagging API, under each commit mode: the program's results
// are unchanged, KV is deferred after the tag closes and committed where the mode says.
TEST(Interposer, TaggedKvIsDeferredAndCommittedWhereEachModeSays) {
  const RunResult plain = run_plain("tagged");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  struct Case {
    const char* mode;
    bool call_commit;
    const char* trigger;  // the decision point the trace names
  };
  for (const Case& c : {Case{"auto", false, "graph launch"}, Case{"first-launch", false, "graph launch"},
                        Case{"manual", true, "kvremap_commit"}}) {
    SCOPED_TRACE(c.mode);
    std::vector<std::string> env = {"KVREMAP_MODE=defer", std::string("KVREMAP_COMMIT=") + c.mode};
    if (c.call_commit) env.push_back("TAGGED_CALL_COMMIT=1");
    Traced t = run_traced("tagged", env);
    EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    if (!c.call_commit) {
      EXPECT_EQ(t.run.out, plain.out);
    }
    ASSERT_EQ(t.traces.size(), 1u);
    const auto& trace = t.traces[0];
    double deferred_ts = -1, committed_ts = -1;
    for (const auto& e : trace.other_events) {
      if (e.name == "kv deferred") deferred_ts = e.event.ts_us;
      if (e.name == "kv committed") {
        committed_ts = e.event.ts_us;
        EXPECT_EQ(e.args.at("trigger"), c.trigger);
      }
    }
    ASSERT_GE(deferred_ts, 0) << "the KV cache was deferred";
    ASSERT_GT(committed_ts, deferred_ts) << "and committed";
    ASSERT_EQ(trace.checkpoints.size(), 1u);
    const auto& query = trace.checkpoints[0];
    EXPECT_GT(committed_ts, query.event.ts_us) << "a memory query never commits";
    EXPECT_EQ(query.driver_free - query.returned_free, 96 * kMiB - 64 * kMiB)
        << "deferred: free memory as if the 96 MiB of KV were backed (less the 64 MiB scratch)";
    EXPECT_EQ(category(trace, "kv").allocated_bytes, 96 * kMiB);
  }
}

// A copy into deferred KV, or an export or query of its address (IPC handle, VMM handle, dma-buf,
// pointer attributes), is serving work or hands the cache to someone who may do it (a KV connector
// loading a prefix, an RDMA registration): the KV cache is committed before the call, and the copy
// reads back.
// A range query on a KV tensor that the arena maps in several chunks answers the tensor's whole range,
// as for the cudaMalloc the engine made, before the commit (the query commits first) and after it.
TEST(Interposer, RangeQueriesOnKvAnswerTheWholeTensor) {
  const RunResult plain = run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {"TOUCH=ranges"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  Traced t = run_traced(
      "kv-copy", {"KVREMAP_MODE=defer", "TOUCH=ranges", "KVREMAP_CHUNK_BYTES=8MiB", "KVREMAP_SCRATCH_BYTES=2MiB"});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("range of KV (round 1): +0, 33554432 bytes"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.traces.size(), 1u);
  const std::size_t regions = deferred_regions(t.traces[0]);
  EXPECT_EQ(regions, 2u) << "both tensors were in the arena, in 8 MiB chunks";
}

TEST(Interposer, CopiesAndExportsOfDeferredKvCommitFirst) {
  struct Touch {
    const char* name;
    const char* call;  // the driver function the commit came before
  };
  for (const Touch& c :
       {Touch{"copy", "cuMemcpy"}, Touch{"ipc", "cuIpcGetMemHandle"}, Touch{"retain", "cuMemRetainAllocationHandle"},
        Touch{"dmabuf", "cuMemGetHandleForAddressRange"}, Touch{"attributes", "cuPointerGetAttributes"},
        Touch{"memset32", "cuMemsetD32"}, Touch{"memset2d", "cuMemsetD2D8"}, Touch{"copy2d", "cuMemcpy2D"},
        Touch{"peer", "cuMemcpyPeer"}, Touch{"rt-memset2d", "cuMemsetD2D8"}, Touch{"rt-copy2d", "cuMemcpy2D"},
        Touch{"rt-peer", "cuMemcpyPeer"}}) {
    const char* touch = c.name;
    SCOPED_TRACE(touch);
    const RunResult plain = run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {std::string("TOUCH=") + touch}));
    ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
    Traced t = run_traced("kv-copy", {"KVREMAP_MODE=defer", std::string("TOUCH=") + touch});
    EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_NE(t.run.out.find("kv-copy done"), std::string::npos);
    ASSERT_EQ(t.traces.size(), 1u);
    bool deferred = false, committed = false;
    for (const auto& e : t.traces[0].other_events) {
      if (e.name == "kv deferred") deferred = true;
      if (e.name != "kv committed") continue;
      committed = true;
      EXPECT_EQ(e.args.at("trigger"), "KV access");
      const std::string call = e.args.at("call").get<std::string>();
      EXPECT_EQ(call.rfind(c.call, 0), 0u) << call;
    }
    EXPECT_TRUE(deferred);
    EXPECT_TRUE(committed);
  }
}

// Triton queries every tensor argument's device pointer before every launch: attributes that say
// nothing of the backing leave the KV cache deferred; the range query or copy after them is the one
// that commits it.
TEST(Interposer, PointerQueriesThatRevealNoBackingLeaveKvDeferred) {
  for (const auto& [touches, call] : {std::pair<std::string, std::string>{"triton,copy", "cuMemcpy"},
                                      {"triton,attributes", "cuPointerGetAttributes"}}) {
    SCOPED_TRACE(touches);
    const RunResult plain = run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {"TOUCH=" + touches}));
    ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
    Traced t = run_traced("kv-copy", {"KVREMAP_MODE=defer", "TOUCH=" + touches});
    EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_EQ(t.run.out, plain.out);
    ASSERT_EQ(t.traces.size(), 1u);
    int deferred = 0, committed = 0;
    for (const auto& e : t.traces[0].other_events) {
      deferred += e.name == "kv deferred";
      if (e.name != "kv committed") continue;
      ++committed;
      EXPECT_EQ(e.args.at("trigger"), "KV access");
      const std::string by = e.args.at("call").get<std::string>();
      EXPECT_EQ(by.rfind(call, 0), 0u) << by;
    }
    EXPECT_EQ(deferred, 1);
    EXPECT_EQ(committed, 1);
  }
}

// vLLM >= 0.29's KV cache in one allocation (ENGINES-2026.md finding 2) is deferred as one tensor and
// committed before the engine serves from it; the run of equal activation buffers the compile warm-up
// allocates after it (>= 64 MiB, written while their forward runs) never goes into the arena and keeps
// its data. Too small a share of the free memory to be recognised, the allocation is named in the
// "deferred nothing" line and the activations stay out of the arena all the same.
TEST(Interposer, AOneAllocationKvCacheIsDeferredAndTheActivationsAfterItAreNot) {
  const RunResult plain = run_plain("activations-after-kv");
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  Traced t = run_traced("activations-after-kv", {"KVREMAP_MODE=defer"});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_EQ(t.run.out, plain.out);
  EXPECT_NE(t.run.out.find("the KV cache reads back what serving wrote, and zeros elsewhere: ok"), std::string::npos)
      << t.run.out;
  ASSERT_EQ(t.traces.size(), 1u);
  std::size_t deferred = 0, committed = 0;
  for (const auto& e : t.traces[0].other_events) {
    if (e.name == "kv deferred") {
      ++deferred;
      EXPECT_EQ(e.args.at("regions"), 1);
      EXPECT_EQ(e.args.at("tensor_bytes"), 1536ull << 20);
    }
    committed += e.name == "kv committed";
  }
  EXPECT_EQ(deferred, 1u);
  EXPECT_EQ(committed, 1u);
  for (const auto& a : t.traces[0].allocs) {
    if (a.bytes != 64ull << 20) continue;
    EXPECT_NE(a.category, "kv") << "an activation buffer went into the arena";
  }

  Traced small = run_traced("activations-after-kv", {"KVREMAP_MODE=defer", "KV_MIB=512"});
  EXPECT_EQ(small.run.exit_code, 0) << small.run.out << small.run.err;
  ASSERT_EQ(small.traces.size(), 1u);
  for (const auto& e : small.traces[0].other_events) EXPECT_NE(e.name, "kv deferred") << e.args.dump();
  EXPECT_NE(small.run.err.find("device 0 placed 1 allocations in the arena but no KV burst was recognised (a KV "
                               "cache in one allocation"),
            std::string::npos)
      << "only the KV cache went into the arena: " << small.run.err;
}

// Data the engine writes into a KV tensor during its burst (a memset of another value than zero, a
// copy) is never lost to scratch: that tensor stays backed (one line says so), the others are deferred,
// and after the commit the engine reads back what it wrote.
TEST(Interposer, WhatTheBurstWritesIntoKvSurvivesTheDeferral) {
  for (const std::string write : {"memset", "copy", "fill-kernel"}) {
    SCOPED_TRACE(write);
    const RunResult plain =
        run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {"BURST_WRITE=" + write, "KV_ZEROS=kernel"}));
    ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
    Traced t = run_traced("kv-copy", {"KVREMAP_MODE=defer", "BURST_WRITE=" + write, "KV_ZEROS=kernel"});
    EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_EQ(t.run.out, plain.out);
    EXPECT_NE(t.run.out.find("what the burst wrote is still there: ok"), std::string::npos) << t.run.out;
    ASSERT_EQ(t.traces.size(), 1u);
    const std::size_t regions = deferred_regions(t.traces[0]);
    EXPECT_EQ(regions, 1u) << "the tensor not written is deferred";
    const std::string line = "1 KV tensors stay backed, not deferred: the engine reached them before the deferral";
    EXPECT_NE(t.run.err.find(line), std::string::npos) << t.run.err;
    EXPECT_EQ(t.run.err.find(line), t.run.err.rfind(line)) << "one line";
  }
}

// A KV connector exports committed KV as it would the engine's own VMM allocation: the arena's device
// handles request POSIX file-descriptor export (and GPUDirect RDMA) where the device supports them, so the
// handle behind a KV tensor exports, and another process imports it and reads the engine's bytes.
TEST(Interposer, CommittedKvExportsAsAPosixFdAnotherProcessReads) {
  Traced t = run_traced("kv-export", {"KVREMAP_MODE=defer", "KVREMAP_KV_ONE_HANDLE=1"});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  for (const char* line : {"exported KV as a POSIX fd: ok", "imported the KV handle: ok",
                           "the importing process reads the engine's bytes: ok", "the importing process finished: ok"})
    EXPECT_NE(t.run.out.find(line), std::string::npos) << line << "\n" << t.run.out;
  EXPECT_EQ(t.run.out.find("FAILED"), std::string::npos) << t.run.out;
  bool reserved = false;
  for (const auto& trace : t.traces)
    for (const auto& e : trace.other_events)
      if (e.name == "kv arena reserved") {
        reserved = true;
        EXPECT_TRUE(e.args.at("posix_fd_handles").get<bool>());
        EXPECT_TRUE(e.args.at("rdma_capable").get<bool>());
      }
  EXPECT_TRUE(reserved);
}

// torch.zeros on a GPU is PyTorch's fill kernel with zero (ATen's zero_ is fill_(0)): the commit's
// zero-fill replays it, so both tensors are deferred and read back zero after the commit.
TEST(Interposer, PyTorchsZeroFillKernelLeavesKvDeferred) {
  const RunResult plain = run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {"KV_ZEROS=kernel"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  Traced t = run_traced("kv-copy", {"KVREMAP_MODE=defer", "KV_ZEROS=kernel"});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_EQ(t.run.out, plain.out);
  EXPECT_NE(t.run.out.find("the rest of the KV cache is zero: ok"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.traces.size(), 1u);
  const std::size_t regions = deferred_regions(t.traces[0]);
  EXPECT_EQ(regions, 2u) << t.run.err;
  EXPECT_EQ(t.run.err.find("stay backed"), std::string::npos) << t.run.err;
}

// Legacy IPC of a KV tensor: the engine's own cudaMalloc would be shared, the arena's VMM memory cannot
// be. Deferred or committed, the driver's error reaches the engine and kvremap says why, once; the
// VMM handle behind the same address is retained in both states.
TEST(Interposer, IpcOfKvFailsWithOneLineDeferredOrCommitted) {
  const RunResult plain = run_program({CUDA_PROGRAM, "kv-copy"}, with(kSimulator, {"TOUCH=ipc"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("ipc handle of KV: 0"), std::string::npos) << plain.out;
  for (const char* touches : {"TOUCH=ipc,ipc,retain", "TOUCH=copy,ipc,ipc,retain"}) {
    SCOPED_TRACE(touches);
    Traced t = run_traced("kv-copy", {"KVREMAP_MODE=defer", touches});
    EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_NE(t.run.out.find("ipc handle of KV: 1\nipc handle of KV: 1\n"), std::string::npos) << t.run.out;
    EXPECT_NE(t.run.out.find("retained the handle of KV: 0"), std::string::npos) << t.run.out;
    const std::string line = "cuIpcGetMemHandle of KV tensor";
    const std::size_t first = t.run.err.find(line);
    ASSERT_NE(first, std::string::npos) << t.run.err;
    EXPECT_EQ(t.run.err.find(line, first + 1), std::string::npos) << "said once: " << t.run.err;
    EXPECT_NE(t.run.err.find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << t.run.err;
    EXPECT_NE(t.run.err.find("cuMemExportToShareableHandle"), std::string::npos) << t.run.err;
    ASSERT_EQ(t.traces.size(), 1u);
    std::string call;
    for (const auto& e : t.traces[0].other_events)
      if (e.name == "kv committed") call = e.args.at("call").get<std::string>();
    EXPECT_EQ(call.rfind(std::string(touches).find("copy") != std::string::npos ? "cuMemcpy" : "cuIpcGetMemHandle", 0),
              0u)
        << call;
  }
}

// KVREMAP_KV_ONE_HANDLE=1 backs a KV tensor with one physical handle, as one cudaMalloc is one
// allocation (RDMA registrations refuse ranges over several); without it, 8 MiB chunks are separate
// handles. Both before the commit (the query commits first) and after it.
TEST(Interposer, OneHandlePerKvTensorOnRequest) {
  for (const char* touches : {"TOUCH=retain2", "TOUCH=copy,retain2"}) {
    for (const bool one : {false, true}) {
      SCOPED_TRACE(std::string(touches) + (one ? " one handle" : " chunks"));
      Traced t = run_traced("kv-copy",
                            {"KVREMAP_MODE=defer", touches, "KVREMAP_CHUNK_BYTES=8MiB", "KVREMAP_SCRATCH_BYTES=2MiB",
                             std::string("KVREMAP_KV_ONE_HANDLE=") + (one ? "1" : "0")});
      EXPECT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
      EXPECT_NE(t.run.out.find(std::string("one handle behind the tensor: ") + (one ? "1" : "0")), std::string::npos)
          << t.run.out;
      EXPECT_NE(t.run.out.find("kv-copy done"), std::string::npos) << t.run.out;
      ASSERT_EQ(t.traces.size(), 1u);
      bool reported = false;
      for (const auto& e : t.traces[0].other_events)
        if (e.name == "kv arena reserved") reported = e.args.at("one_handle").get<bool>() == one;
      EXPECT_TRUE(reported);
    }
  }
}

// cudaMalloc(0) allocated nothing: no allocation at address 0 that would stay live forever.
TEST(Interposer, AZeroByteMallocIsNoAllocation) {
  Traced t = run_traced("malloc-zero");
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  for (const auto& a : t.traces[0].allocs) EXPECT_NE(a.ptr, "0x0") << a.api;
  ASSERT_TRUE(t.traces[0].summary.has_value());
  EXPECT_EQ(t.traces[0].summary->devices.at(0).categories.at("other").live_bytes, 0u);
}

// A trace file that cannot grow (here a file-size limit; a full disk fails the same way) costs the
// trace, never the program: one line says so, the file keeps every whole event written before and
// names why it ends, and it still reads and validates.
TEST(Interposer, AFullTraceFilesystemCostsTheTraceNeverTheProgram) {
  const RunResult plain = run_plain("churn");
  ASSERT_EQ(plain.exit_code, 0);
  const std::string dir = make_temp_dir();
  const RunResult r = run_program({"/bin/sh", "-c", "ulimit -f 64; trap '' XFSZ; exec \"$0\" churn", CUDA_PROGRAM},
                                  with(kSimulator, {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, plain.out);
  const std::string line = "tracing stops here (the file keeps every event up to this point), the program goes on";
  EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << "said once";
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const auto trace = kvremap::trace::read_trace(files[0]);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  ASSERT_FALSE(trace.other_events.empty());
  EXPECT_EQ(trace.other_events.back().name, "trace stopped");
  EXPECT_EQ(trace.other_events.back().args.at("error"), "File too large");
  EXPECT_EQ(trace.stopped, "File too large") << "readers say why it ends";
}

// exit() from one thread while the others allocate: hooks already running finish before the
// summary is taken, so it and the events agree exactly. The exit's wait is bounded (a hook may be
// blocked for good); a thread still inside a hook when it ends — on a machine busy enough to keep
// one descheduled for a second — is counted in the summary, and each such thread may have one
// operation in the counts without its event: the invariant that holds however the threads run.
TEST(Interposer, ExitFromAWorkerThreadLeavesASummaryTheEventsAgreeWith) {
  const int runs = repetitions(20, 20, 2);
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE(run);
    Traced t = run_traced("exit-from-worker", {"SIMCUDA_DEVICE_MEMORY=1000GiB"});
    ASSERT_EQ(t.run.exit_code, 0) << t.run.err;
    ASSERT_EQ(t.traces.size(), 1u);
    const auto& trace = t.traces[0];
    ASSERT_TRUE(trace.summary.has_value());
    const auto& summary = trace.summary->devices.at(0).categories.at("other");
    ASSERT_TRUE(trace.summary->counts.contains("hooks_in_flight"));
    const std::uint64_t in_flight = trace.summary->counts.at("hooks_in_flight");
    EXPECT_LE(in_flight, 5u) << "at most the five other threads";
    const auto replay = kvremap::trace::replay_live_bytes(trace);
    std::uint64_t allocs = 0, frees = 0;
    for (const auto& a : trace.allocs) allocs += a.category == "other";
    for (const auto& f : trace.frees) frees += f.category == "other";
    if (in_flight == 0) {
      EXPECT_EQ(replay.devices.at(0).at("other").live_bytes, summary.live_bytes);
      EXPECT_EQ(allocs, summary.allocations);
      EXPECT_EQ(frees, summary.frees);
    } else {
      // Each thread still inside a hook: one allocation (or free) of at most 6 MiB counted, or not yet.
      const std::uint64_t replayed_live = replay.devices.at(0).at("other").live_bytes;
      const std::uint64_t difference =
          replayed_live > summary.live_bytes ? replayed_live - summary.live_bytes : summary.live_bytes - replayed_live;
      EXPECT_LE(difference, in_flight * 6 * kMiB);
      EXPECT_LE(allocs, summary.allocations);
      EXPECT_LE(frees, summary.frees);
      EXPECT_LE(summary.allocations - allocs + summary.frees - frees, in_flight);
    }
  }
}

// A driver failure at every call the deferral and commit paths make (each position of each
// function a clean run calls, counted by the simulator), through the real hook path: the engine
// never crashes; a replay that reports success always finds its data (never unbacked or
// scratch-backed KV); a run that completes leaves no VMM handle, mapping, reservation or host
// memory behind beyond the arena's own reservation and scratch; kvremap either absorbs the
// failure (rollback, host tier) or stops with one line.
TEST(Interposer, DriverFailuresDuringDeferralAndCommitNeverCorruptCrashOrLeak) {
  const std::vector<std::string> base = {"KVREMAP_MODE=defer", "KVREMAP_TRACE=off", "TAGGED_REPORT=1"};
  const RunResult clean =
      run_program({CUDA_PROGRAM, "tagged"}, with(with(kSimulator, base), {"LD_PRELOAD=" KVREMAP_PRELOAD}));
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  std::smatch live;
  const std::regex live_re(R"(live: handles=(\d+) reservations=(\d+) mappings=(\d+) host_bytes=(\d+))");
  ASSERT_TRUE(std::regex_search(clean.out, live, live_re)) << clean.out;
  const unsigned long clean_handles = std::stoul(live[1]);
  EXPECT_EQ(live[2], "1") << "the arena's reservation";
  EXPECT_EQ(live[3], "0") << "every KV region was freed";
  EXPECT_EQ(live[4], "0");
  const auto calls_at = clean.out.find("calls:");
  ASSERT_NE(calls_at, std::string::npos) << clean.out;
  const std::string calls_line = clean.out.substr(calls_at, clean.out.find('\n', calls_at) - calls_at);
  std::vector<std::pair<std::string, int>> calls;
  const std::regex call_re(R"(([A-Za-z0-9_]+)=(\d+))");
  for (auto it = std::sregex_iterator(calls_line.begin(), calls_line.end(), call_re); it != std::sregex_iterator();
       ++it)
    calls.emplace_back((*it)[1], std::stoi((*it)[2]));
  ASSERT_GE(calls.size(), 12u) << calls_line;

  int stopped = 0, completed = 0, runs = 0;
  for (const auto& [fn, count] : calls) {
    for (int nth = 1; nth <= count; ++nth) {
      const std::string fault = "SIMCUDA_FAIL=" + fn + ":" + std::to_string(nth) + ":CUDA_ERROR_OUT_OF_MEMORY";
      SCOPED_TRACE(fault);
      ++runs;
      const RunResult r =
          run_program({CUDA_PROGRAM, "tagged"}, with(with(kSimulator, base), {"LD_PRELOAD=" KVREMAP_PRELOAD, fault}));
      ASSERT_EQ(r.signal, 0) << r.out << r.err;
      const bool replay_ok = r.out.find("replay: ok") != std::string::npos &&
                             r.out.find("synchronize: ok") != std::string::npos &&
                             r.out.find("read back: ok") != std::string::npos;
      if (replay_ok) {
        EXPECT_NE(r.out.find("the replay wrote into the KV cache, the rest is zero: ok"), std::string::npos) << r.out;
      }
      if (r.exit_code == 1 && r.err.find("kvremap:") != std::string::npos) ++stopped;
      if (r.exit_code != 0) {
        EXPECT_EQ(r.out.find("the replay wrote into the KV cache, the rest is zero: FAILED"), std::string::npos)
            << r.out;
        continue;
      }
      ++completed;
      ASSERT_TRUE(std::regex_search(r.out, live, live_re)) << r.out;
      EXPECT_LE(std::stoul(live[1]), clean_handles) << "no handle leaked: " << r.out;
      EXPECT_LE(std::stoul(live[2]), 1u) << "no reservation leaked";
      EXPECT_EQ(live[3], "0") << "no mapping leaked";
      EXPECT_EQ(live[4], "0") << "no host memory leaked";
    }
  }
  EXPECT_GT(completed, 0);
  std::printf("fault runs: %d, %d completed, %d stopped by kvremap with a message\n", runs, completed, stopped);
}

// One arena per device: two devices in one process each reserve their own VA range, defer their
// own tagged KV cache and commit it before their own first replay.
TEST(Interposer, EachDeviceHasItsOwnArenaDeferralAndCommit) {
  Traced t = run_traced("two-devices", {"SIMCUDA_DEVICE_COUNT=2", "KVREMAP_MODE=defer"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.traces.size(), 1u);
  const auto& trace = t.traces[0];
  std::map<int, std::pair<std::uint64_t, std::uint64_t>> arena;  // device -> [base, end)
  std::map<int, std::vector<std::string>> kv_events;
  std::map<int, std::set<std::string>> profile_paths;
  for (const auto& e : trace.other_events) {
    if (e.cat != "kv") continue;
    const int device = e.args.at("device").get<int>();
    kv_events[device].push_back(e.name);
    if (e.name == "kv arena reserved") {
      const std::uint64_t b = std::stoull(e.args.at("base").get<std::string>(), nullptr, 16);
      arena[device] = {b, b + e.args.at("reserved_bytes").get<std::uint64_t>()};
      EXPECT_EQ(e.args.at("reserved_bytes").get<std::uint64_t>(), 2 * trace.device_total_bytes.at(device));
    }
    if (e.name == "kv deferred") {
      EXPECT_EQ(e.args.at("deferred_bytes").get<std::uint64_t>(), 96 * kMiB);
    }
    if (e.name == "kv committed") {
      EXPECT_EQ(e.args.at("kv_bytes").get<std::uint64_t>(), 96 * kMiB);
      EXPECT_EQ(e.args.at("trigger"), "graph launch");
    }
    if (e.name == "kv profile written") profile_paths[device].insert(e.args.at("path").get<std::string>());
  }
  // Each device's profile is its own file (the device is the key's rank), written after the commit
  // and again at exit.
  ASSERT_EQ(profile_paths.size(), 2u);
  EXPECT_EQ(profile_paths[0].size(), 1u);
  EXPECT_EQ(profile_paths[1].size(), 1u);
  EXPECT_NE(*profile_paths[0].begin(), *profile_paths[1].begin());
  const std::vector<std::string> expected = {"kv arena reserved", "kv deferred",        "kv commit plan",
                                             "kv committed",      "kv profile written", "kv serving peaks",
                                             "kv profile written"};
  EXPECT_EQ(kv_events[0], expected);
  EXPECT_EQ(kv_events[1], expected);
  ASSERT_EQ(arena.size(), 2u);
  EXPECT_TRUE(arena[0].second <= arena[1].first || arena[1].second <= arena[0].first) << "disjoint reservations";
  int kv_allocs = 0;
  for (const auto& a : trace.allocs) {
    if (a.category != "kv" || a.api == "kvremap reclassify") continue;
    ++kv_allocs;
    const std::uint64_t p = std::stoull(a.ptr, nullptr, 16);
    EXPECT_GE(p, arena[a.device].first) << "each device's KV lies in its own arena";
    EXPECT_LT(p, arena[a.device].second);
  }
  EXPECT_EQ(kv_allocs, 4);
  EXPECT_EQ(t.run.out.find("FAILED"), std::string::npos) << t.run.out;
  EXPECT_NE(t.run.out.find("the replay wrote into this device's KV cache, the rest is zero: ok"), std::string::npos);
}
