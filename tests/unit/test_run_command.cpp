// `kvremap run` without processes: the LD_PRELOAD it composes and its summary of synthetic traces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tools/run_command.h"
#include "tools/run_summary.h"
#include "tools/trace/trace_reader.h"

namespace {

namespace fs = std::filesystem;
using kvremap::run::compose_ld_preload;
using kvremap::run::ProcessTrace;
using kvremap::run::render_run_summary;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1ULL << 20;
constexpr std::uint64_t kGiB = 1ULL << 30;

// Real files: the composition compares entries with the library by real path.
class LdPreload : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "kvremap-run-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    fs::create_directories(dir_ + "/lib");
    fs::create_directories(dir_ + "/other");
    for (const char* file : {"/lib/libkvremap.so", "/other/libkvremap.so", "/libasan.so.8", "/libfoo.so"})
      std::ofstream(dir_ + file) << "x";
    library_ = dir_ + "/lib/libkvremap.so";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  std::string library_;
};

TEST_F(LdPreload, EmptyIsTheLibraryAlone) {
  EXPECT_EQ(compose_ld_preload("", library_), library_);
  EXPECT_EQ(compose_ld_preload(" : ", library_), library_);
}

TEST_F(LdPreload, ExistingEntriesStayFirstInTheirOrder) {
  const std::string asan = dir_ + "/libasan.so.8", foo = dir_ + "/libfoo.so";
  EXPECT_EQ(compose_ld_preload(asan, library_), asan + ":" + library_);
  EXPECT_EQ(compose_ld_preload(asan + " " + foo, library_), asan + ":" + foo + ":" + library_);
  EXPECT_EQ(compose_ld_preload(asan + ":" + foo, library_), asan + ":" + foo + ":" + library_);
  EXPECT_EQ(compose_ld_preload("  " + asan + " :: " + foo + ": ", library_), asan + ":" + foo + ":" + library_);
  // Entries the loader finds by name, or that do not exist, are kept as written.
  EXPECT_EQ(compose_ld_preload("libjemalloc.so.2 /no/such.so", library_), "libjemalloc.so.2:/no/such.so:" + library_);
}

TEST_F(LdPreload, TheSameFileAlreadyThereLeavesItUnchanged) {
  const std::string asan = dir_ + "/libasan.so.8";
  const std::string same = asan + " " + library_;
  EXPECT_EQ(compose_ld_preload(same, library_), same);
  // Another spelling of the same file: a symbolic link, a path through "..".
  const std::string link = dir_ + "/link.so";
  fs::create_symlink(library_, link);
  EXPECT_EQ(compose_ld_preload(link, library_), link);
  const std::string dotted = dir_ + "/other/../lib/libkvremap.so";
  EXPECT_EQ(compose_ld_preload(asan + ":" + dotted, library_), asan + ":" + dotted);
  EXPECT_EQ(compose_ld_preload(library_, link), library_);
}

// torch_memory_saver's preload library interposes cudaMalloc: it must come before kvremap (its pause
// frees nothing otherwise), whichever order the environment listed them in.
TEST_F(LdPreload, AnInterposerOfCudaMallocComesBeforeTheLibrary) {
  const std::string asan = dir_ + "/libasan.so.8", tms = dir_ + "/torch_memory_saver_hook_mode_preload.abi3.so";
  // SGLang's own LD_PRELOAD (TMS prepended), kvremap appended.
  EXPECT_EQ(compose_ld_preload(tms, library_), tms + ":" + library_);
  // kvremap listed ahead of it moves behind it.
  EXPECT_EQ(compose_ld_preload(library_ + ":" + tms, library_), tms + ":" + library_);
  EXPECT_EQ(compose_ld_preload(asan + " " + library_ + " " + tms, library_), asan + ":" + tms + ":" + library_);
  // Its spelling in the list is kept; listed twice, it is loaded once.
  const std::string dotted = dir_ + "/other/../lib/libkvremap.so";
  EXPECT_EQ(compose_ld_preload(dotted + ":" + tms, library_), tms + ":" + dotted);
  EXPECT_EQ(compose_ld_preload(library_ + ":" + tms + ":" + library_, library_), tms + ":" + library_);
}

TEST_F(LdPreload, AnotherFileOfTheSameNameIsNotTheLibrary) {
  const std::string other = dir_ + "/other/libkvremap.so";
  EXPECT_EQ(compose_ld_preload(other, library_), other + ":" + library_);
}

// A trace as read_trace fills it, with "kv" events carrying `args`.
kvremap::trace::Trace make_trace(std::int64_t pid, const std::string& mode,
                                 const std::vector<std::pair<std::string, json>>& kv_events, bool complete = true,
                                 std::int64_t start_unix_ns = 0) {
  kvremap::trace::Trace trace;
  trace.source = "kvremap-host-" + std::to_string(pid) + ".json";
  trace.header.pid = pid;
  trace.header.start_unix_ns = start_unix_ns;
  trace.header.options["KVREMAP_MODE"] = mode;
  trace.complete = complete;
  for (const auto& [name, args] : kv_events) {
    kvremap::trace::OtherEvent event;
    event.ph = "i";
    event.cat = "kv";
    event.name = name;
    event.args = args;
    trace.other_events.push_back(std::move(event));
  }
  return trace;
}

ProcessTrace process(kvremap::trace::Trace trace, int attempt = 1) {
  ProcessTrace p;
  p.attempt = attempt;
  p.path = trace.source;
  p.trace = std::move(trace);
  return p;
}

json deferred(int device, std::uint64_t bytes) { return {{"device", device}, {"deferred_bytes", bytes}}; }

json committed(int device, std::uint64_t device_bytes, std::uint64_t host_bytes, std::int64_t margin) {
  return {{"device", device},
          {"kv_bytes", device_bytes + host_bytes},
          {"device_bytes", device_bytes},
          {"host_bytes", host_bytes},
          {"margin_bytes", margin},
          {"post_kv_peaks",
           {{"kv", {{"at_kv_end", 2 * kGiB}, {"peak", 2 * kGiB}, {"peak_above", 0}}},
            {"graph_pool", {{"at_kv_end", 0}, {"peak", 1 * kGiB}, {"peak_above", 1 * kGiB}}},
            {"module", {{"at_kv_end", 0}, {"peak", 64 * kMiB}, {"peak_above", 64 * kMiB}}},
            {"other", {{"at_kv_end", 5 * kGiB}, {"peak", 8 * kGiB}, {"peak_above", 3 * kGiB}}}}}};
}

TEST(RunSummary, ACommittedDeviceIsOneLineOfItsFigures) {
  json commit = committed(0, 1536 * kMiB, 512 * kMiB, -static_cast<std::int64_t>(256 * kMiB));
  commit["same_start_flags"] = "--gpu-memory-utilization 0.81 or --kv-cache-memory 13247457550";
  const auto trace = make_trace(4242, "defer",
                                {{"kv deferred", deferred(0, 2 * kGiB)},
                                 {"kv committed", commit},
                                 {"kv profile written", {{"device", 0}, {"path", "/p/vllm-1-rank0.json"}}}});
  EXPECT_EQ(render_run_summary({process(trace)}),
            "kvremap run: attempt 1, pid 4242, device 0: KV requested 2.00 GiB, committed 1.50 GiB on device + "
            "512.00 MiB on host, margin -256.00 MiB; post-KV peaks: other +3.00 GiB, graph_pool +1.00 GiB; profile "
            "written: /p/vllm-1-rank0.json; same start without kvremap: --gpu-memory-utilization 0.81 or "
            "--kv-cache-memory 13247457550\n");
}

TEST(RunSummary, WithoutSameStartFlagsThatItemIsLeftOut) {
  const auto trace = make_trace(
      7, "defer", {{"kv deferred", deferred(0, 2 * kGiB)}, {"kv committed", committed(0, 2 * kGiB, 0, 4096)}});
  const std::string summary = render_run_summary({process(trace)});
  EXPECT_THAT(summary, HasSubstr("committed 2.00 GiB on device + 0 B on host, margin +4.00 KiB;"));
  EXPECT_THAT(summary, Not(HasSubstr("without kvremap")));
  EXPECT_THAT(summary, Not(HasSubstr("profile")));
}

TEST(RunSummary, EachDeviceOfAProcessHasItsOwnLine) {
  const auto trace = make_trace(9, "defer",
                                {{"kv deferred", deferred(1, 4 * kGiB)},
                                 {"kv deferred", deferred(0, 2 * kGiB)},
                                 {"kv committed", committed(1, 4 * kGiB, 0, 0)},
                                 {"kv committed", committed(0, 2 * kGiB, 0, 0)}});
  const std::string summary = render_run_summary({process(trace)});
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 2);
  const auto zero = summary.find("pid 9, device 0: KV requested 2.00 GiB, committed 2.00 GiB on device");
  const auto one = summary.find("pid 9, device 1: KV requested 4.00 GiB, committed 4.00 GiB on device");
  ASSERT_NE(zero, std::string::npos) << summary;
  ASSERT_NE(one, std::string::npos) << summary;
  EXPECT_LT(zero, one);
  EXPECT_THAT(summary, HasSubstr("margin 0 B;"));
}

TEST(RunSummary, AProcessWithoutACommitSaysWhatItReached) {
  EXPECT_EQ(render_run_summary({process(make_trace(1, "observe", {}))}),
            "kvremap run: attempt 1, pid 1: no KV commit: observe mode\n");
  EXPECT_EQ(render_run_summary({process(make_trace(2, "defer", {{"kv deferred", deferred(0, 2 * kGiB)}}, false))}),
            "kvremap run: attempt 1, pid 2, device 0: KV requested 2.00 GiB, stopped before its commit; trace "
            "incomplete (the process did not exit cleanly)\n");
  EXPECT_EQ(render_run_summary({process(
                make_trace(3, "defer", {{"kv deferred", deferred(0, 2 * kGiB)}, {"kv restart", {{"device", 0}}}}))}),
            "kvremap run: attempt 1, pid 3, device 0: KV requested 2.00 GiB; restart requested\n");
  EXPECT_EQ(render_run_summary({process(make_trace(4, "defer", {{"kv restart", json::object()}}))}),
            "kvremap run: attempt 1, pid 4: restart requested\n");
  EXPECT_EQ(render_run_summary(
                {process(make_trace(5, "defer", {{"kv nothing deferred", {{"reason", "no KV burst was seen"}}}}))}),
            "kvremap run: attempt 1, pid 5: no KV commit: nothing deferred (no KV burst was seen)\n");
  EXPECT_EQ(render_run_summary({process(make_trace(
                6, "defer", {{"kv arena refused", {{"device", 0}, {"reason", "chunk below the granularity"}}}}))}),
            "kvremap run: attempt 1, pid 6, device 0: no KV commit: KV arena refused (chunk below the granularity)\n");
}

TEST(RunSummary, AStartSizedFromAProfileSaysWhichAndHow) {
  const auto shifted = [](std::int64_t shift) {
    return make_trace(11, "defer",
                      {{"kv sizing adjusted", {{"device", 0}, {"shift_bytes", shift}, {"profile", "/p/a.json"}}},
                       {"kv deferred", deferred(0, kGiB)},
                       {"kv committed", committed(0, kGiB, 0, 0)}});
  };
  EXPECT_THAT(render_run_summary({process(shifted(512 * kMiB))}),
              HasSubstr("; sized from profile /p/a.json (free memory reported 512.00 MiB lower)"));
  EXPECT_THAT(render_run_summary({process(shifted(-static_cast<std::int64_t>(2 * kGiB)))}),
              HasSubstr("; sized from profile /p/a.json (free memory reported 2.00 GiB higher)"));
}

// Serving allocations carried on host memory (`kv serving overflow`) are counted and summed on their device's
// line, with what to do about them; a device without any says nothing of them.
TEST(RunSummary, ServingOverflowsShowTheirCountAndBytes) {
  const auto overflow = [](int device, std::uint64_t bytes) {
    return std::pair<std::string, json>{"kv serving overflow", {{"device", device}, {"api", "cudaMalloc"},
                                                                {"bytes", bytes}, {"host_bytes", bytes}}};
  };
  const auto trace = make_trace(12, "defer",
                                {{"kv deferred", deferred(0, kGiB)},
                                 {"kv deferred", deferred(1, kGiB)},
                                 {"kv committed", committed(0, kGiB, 0, 0)},
                                 {"kv committed", committed(1, kGiB, 0, 0)},
                                 overflow(0, 1536 * kMiB),
                                 overflow(0, 512 * kMiB)});
  const std::string summary = render_run_summary({process(trace)});
  EXPECT_THAT(summary, HasSubstr("device 0: KV requested 1.00 GiB, committed 1.00 GiB on device + 0 B on host, "
                                 "margin 0 B; post-KV peaks: other +3.00 GiB, graph_pool +1.00 GiB; serving "
                                 "overflows: 2.00 GiB in 2 allocations on host memory (restart to hold them on the "
                                 "device)\n"));
  const auto one = summary.find("device 1:");
  ASSERT_NE(one, std::string::npos) << summary;
  EXPECT_EQ(summary.find("serving overflows", one), std::string::npos) << summary;
}

TEST(RunSummary, PostKvPeaksShowTheTwoLargestRises) {
  json commit = committed(0, kGiB, 0, 0);
  commit["post_kv_peaks"] = {{"graph_pool", {{"peak_above", 1}}}, {"other", {{"peak_above", 0}}}};
  const auto one = make_trace(1, "defer", {{"kv committed", commit}});
  EXPECT_THAT(render_run_summary({process(one)}), HasSubstr("; post-KV peaks: graph_pool +1 B\n"));
  commit["post_kv_peaks"] = {{"other", {{"peak_above", 0}}}};
  const auto none = make_trace(1, "defer", {{"kv committed", commit}});
  EXPECT_THAT(render_run_summary({process(none)}), HasSubstr("; post-KV peaks: none\n"));
}

// A field a killed process or another library version left out or typed differently prints as "?".
TEST(RunSummary, MissingOrMistypedFieldsPrintAsQuestionMarks) {
  const auto trace =
      make_trace(12, "defer",
                 {{"kv committed", {{"device", 0}, {"device_bytes", "many"}, {"host_bytes", -1}, {"post_kv_peaks", 3}}},
                  {"kv sizing adjusted", {{"device", 0}}},
                  {"kv deferred", json::array()}});
  EXPECT_EQ(render_run_summary({process(trace)}),
            "kvremap run: attempt 1, pid 12, device 0: KV requested ?, committed ? on device + ? on host, margin ?; "
            "sized from profile ? (free memory reported ?)\n");
}

TEST(RunSummary, UnreadableTracesAreOneLineEachAfterTheReadableOnes) {
  ProcessTrace unreadable;
  unreadable.attempt = 1;
  unreadable.path = "/t/kvremap-h-1.json";
  unreadable.read_error = "/t/kvremap-h-1.json: line 3: not a JSON event: garbage";
  const std::string summary = render_run_summary({unreadable, process(make_trace(2, "observe", {}))});
  EXPECT_EQ(summary,
            "kvremap run: attempt 1, pid 2: no KV commit: observe mode\n"
            "kvremap run: attempt 1: /t/kvremap-h-1.json: line 3: not a JSON event: garbage\n");
}

TEST(RunSummary, OrderedByAttemptThenByStart) {
  const std::string summary = render_run_summary({process(make_trace(30, "observe", {}, true, 100), 2),
                                                  process(make_trace(20, "observe", {}, true, 300), 1),
                                                  process(make_trace(21, "observe", {}, true, 200), 1)});
  EXPECT_EQ(summary,
            "kvremap run: attempt 1, pid 21: no KV commit: observe mode\n"
            "kvremap run: attempt 1, pid 20: no KV commit: observe mode\n"
            "kvremap run: attempt 2, pid 30: no KV commit: observe mode\n");
}

TEST(RunSummary, NoTracesNoLines) { EXPECT_EQ(render_run_summary({}), ""); }

// Strings from a trace (a refusal's reason, a profile's path, a read error naming a file) are shown
// with their control bytes as \xNN: none can start a line that looks like kvremap's own.
TEST(RunSummary, ControlCharactersFromTheTraceAreEscaped) {
  json refused = {{"device", 0}, {"reason", "no VMM\nkvremap run: attempt 1, pid 1: forged"}};
  json written = {{"device", 1}, {"path", "/p/\x1b[31mred.json"}};
  ProcessTrace unreadable;
  unreadable.attempt = 1;
  unreadable.path = "bad\r.json";
  unreadable.read_error = "bad\r.json: line 1: not\x07 a trace";
  const std::string summary = render_run_summary(
      {process(make_trace(5, "defer", {{"kv arena refused", refused}, {"kv profile written", written}})),
       std::move(unreadable)});
  EXPECT_EQ(summary,
            "kvremap run: attempt 1, pid 5, device 0: no KV commit: KV arena refused (no VMM\\x0akvremap run: "
            "attempt 1, pid 1: forged)\n"
            "kvremap run: attempt 1, pid 5, device 1: no KV commit: no KV cache deferred; profile written: "
            "/p/\\x1b[31mred.json\n"
            "kvremap run: attempt 1: bad\\x0d.json: line 1: not\\x07 a trace\n");
}

}  // namespace
