// `kvremap report` rendering: byte formatting, clean and killed traces, summary cross-checks, notes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tools/report.h"
#include "tools/trace/trace_reader.h"

namespace {

using kvremap::report::format_bytes;
using kvremap::report::format_signed_bytes;
using kvremap::report::render_report;
using kvremap::trace::read_trace;
using ::testing::HasSubstr;
using ::testing::Not;

std::string data_path(const std::string& name) {
  return std::string(KVREMAP_SOURCE_DIR) + "/tests/data/traces/" + name;
}

TEST(Report, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(80ULL << 30), "80.00 GiB");
  EXPECT_EQ(format_bytes(3ULL << 40), "3.00 TiB");
  EXPECT_EQ(format_signed_bytes(0), "0 B");
  EXPECT_EQ(format_signed_bytes(-(40LL << 30)), "-40.00 GiB");
  EXPECT_EQ(format_signed_bytes(512), "+512 B");
  EXPECT_EQ(format_signed_bytes(INT64_MIN), "-8.00 EiB");  // no overflow negating the most negative value
}

TEST(Report, CleanExitShowsSummaryTableCheckpointsAndCaptures) {
  const std::string report = render_report(read_trace(data_path("complete.json")));
  EXPECT_THAT(report, HasSubstr("process   4242 (parent 4200) on gpu-node-1: python3 -m vllm"));
  EXPECT_THAT(report, HasSubstr("options: KVREMAP_MODE=observe KVREMAP_TRACE_DIR=/tmp"));
  EXPECT_THAT(report, HasSubstr("ended     cleanly (atexit) after 0.019 s\n"));
  EXPECT_THAT(report, HasSubstr("device 0: 80.00 GiB total; categories from the summary (events agree)"));
  // category, live, peak, peak at, allocated, allocs, frees
  EXPECT_THAT(report, ::testing::ContainsRegex("  kv +40\\.00 GiB +40\\.00 GiB +0\\.009 s +40\\.00 GiB +1 +0\n"));
  EXPECT_THAT(report, ::testing::ContainsRegex("  other +2\\.00 GiB +3\\.00 GiB +0\\.005 s +3\\.00 GiB +2 +1\n"));
  EXPECT_THAT(report, ::testing::ContainsRegex("  vmm +0 B +0 B +- +0 B +0 +0\n"));
  EXPECT_THAT(report, ::testing::ContainsRegex("all live +42\\.00 GiB\n"));
  EXPECT_THAT(report, HasSubstr("checkpoints: 3 memory queries"));
  EXPECT_THAT(report, ::testing::ContainsRegex(
                          "2 +0\\.015 s cudaMemGetInfo +capture +0 +77\\.75 GiB +37\\.75 GiB +-40\\.00 GiB\n"));
  EXPECT_THAT(report, HasSubstr("0.016 s  capture -> serving (first launch after capture)"));
  EXPECT_THAT(report,
              HasSubstr("captures:   1 windows, 2.000 ms in total (ok 1), 256.00 MiB allocated while capturing"));
  EXPECT_THAT(report, HasSubstr("graph exec: 1 instantiated (2.00 MiB), 1 destroyed (2.00 MiB)"));
  EXPECT_THAT(report, HasSubstr("modules:    1 loaded (1.00 MiB), 0 unloaded (0 B)"));
  EXPECT_THAT(report, HasSubstr("counts:     captures 1, graph_launches 12, kernel_launches 3400, module_loads 1"));
  EXPECT_THAT(report, Not(HasSubstr("!")));
}

TEST(Report, KilledProcessIsReplayedFromEvents) {
  const std::string report = render_report(read_trace(data_path("killed_mid_line.json")));
  EXPECT_THAT(report, HasSubstr("ended     without a summary (killed or crashed?); last memory event at 0.011 s; "
                                "an incomplete last line was ignored"));
  EXPECT_THAT(report, HasSubstr("device 0: 80.00 GiB total; categories replayed from events (no summary)"));
  EXPECT_THAT(report, ::testing::ContainsRegex("  graph_pool +256\\.00 MiB +256\\.00 MiB +0\\.011 s"));
  EXPECT_THAT(report, HasSubstr("captures:   0 windows"));
  EXPECT_THAT(report, Not(HasSubstr("counts:")));
}

TEST(Report, SummaryThatDisagreesWithEventsIsFlagged) {
  kvremap::trace::Trace trace = read_trace(data_path("complete.json"));
  trace.summary->devices[0].categories["kv"].peak_bytes = 39ULL << 30;
  trace.summary->devices[0].categories["other"].frees = 0;
  const std::string report = render_report(trace);
  EXPECT_THAT(report, HasSubstr("categories from the summary (events disagree)"));
  EXPECT_THAT(report, HasSubstr("  ! kv peak 40.00 GiB in events, 39.00 GiB in summary\n"));
  EXPECT_THAT(report, HasSubstr("  ! other 2 allocations/1 frees in events, 2/0 in summary\n"));
}

// A thread still inside a hook when the exit's wait ended (counts.hooks_in_flight) explains a
// disagreement of its last operations: the report says so rather than leaving it unexplained.
TEST(Report, ADisagreementWithThreadsStillInAHookSaysWhy) {
  kvremap::trace::Trace trace = read_trace(data_path("complete.json"));
  trace.summary->devices[0].categories["other"].frees = 2;
  trace.summary->counts["hooks_in_flight"] = 1;
  const std::string report = render_report(trace);
  EXPECT_THAT(report, HasSubstr("categories from the summary (events disagree: 1 thread was still inside a hook at "
                                "exit, whose last operations the summary counts and the events may lack)"));
  EXPECT_THAT(report, HasSubstr("  ! other 2 allocations/1 frees in events, 2/2 in summary\n"));
}

TEST(Report, InternalEventsBecomeNotes) {
  const std::string text =
      "[\n"
      R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,)"
      R"("library_version":"0.2.0","hostname":"h","pid":7,"ppid":1,"cmdline":"engine","start_unix_ns":1,"options":{}}})"
      "\n"
      R"(,{"ph":"i","s":"g","cat":"kvremap","name":"option error","pid":7,"tid":7,"ts":1,)"
      R"("args":{"variable":"KVREMAP_HEADROOM","value":"lots","message":"expected a size like 512MiB"}})"
      "\n"
      R"(,{"ph":"i","s":"t","cat":"alloc","name":"alloc","pid":7,"tid":7,"ts":2,)"
      R"("args":{"api":"cudaMalloc","ptr":"0x1","bytes":4096,"device":0,"category":"other","phase":"serving"}})"
      "\n"
      R"(,{"ph":"i","s":"g","cat":"kvremap","name":"tracking disabled","pid":7,"tid":7,"ts":2500000,"args":{"reason":"trace write failed"}})"
      "\n";
  const std::string report = render_report(kvremap::trace::parse_trace(text, "t.json"));
  EXPECT_THAT(report, HasSubstr("note: option error: KVREMAP_HEADROOM=lots: expected a size like 512MiB\n"));
  EXPECT_THAT(report, HasSubstr("note: tracking disabled at 2.500 s: trace write failed\n"));
  EXPECT_THAT(report, HasSubstr("device 0: ? total"));
  EXPECT_THAT(report, HasSubstr("options: (none)"));
  EXPECT_THAT(report, HasSubstr("  other "));
}

TEST(Report, TraceWithoutMemoryEventsSaysSo) {
  const std::string text =
      "[\n"
      R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,)"
      R"("library_version":"0.1.0","hostname":"h","pid":7,"ppid":1,"cmdline":"engine","start_unix_ns":1,"options":{}}})"
      "\n]\n";
  const std::string report = render_report(kvremap::trace::parse_trace(text, "idle.json"));
  EXPECT_THAT(report, HasSubstr("no device memory recorded"));
  EXPECT_THAT(report, HasSubstr("checkpoints: 0 memory queries"));
  EXPECT_THAT(report, HasSubstr("phases: no phase changes recorded"));
}

TEST(Report, KvDeferralShowsThePlanTheCommitAndThePostKvPeaks) {
  const std::string text =
      "[\n"
      R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":2,)"
      R"("library_version":"0.2.0","hostname":"h","pid":7,"ppid":1,"cmdline":"engine","start_unix_ns":1,"options":{}}})"
      "\n"
      R"(,{"ph":"i","cat":"kv","pid":7,"tid":7,"ts":1500,"name":"kv deferred","s":"g","args":{"device":0,"regions":4,)"
      R"("tensor_bytes":1073741824,"deferred_bytes":4294967296,"scratch_bytes":67108864}})"
      "\n"
      R"(,{"ph":"i","cat":"kv","pid":7,"tid":7,"ts":2000000,"name":"kv commit plan","s":"g","args":{"device":0,)"
      R"("kv_bytes":4294967296,"device_bytes":4261412864,"host_bytes":33554432,"tensors":4,)"
      R"("host_bytes_per_tensor":8388608,"granularity":2097152,"chunk_bytes":536870912,)"
      R"("device_free_bytes":5368709120,"headroom_bytes":1101004800,"post_kv_transient_bytes":3221225472,)"
      R"("margin_bytes":-27262976,"deficit_bytes":27262976,"verdict":"host_tail"}})"
      "\n"
      R"(,{"ph":"i","cat":"kv","pid":7,"tid":7,"ts":2001500,"name":"kv committed","s":"g","args":{"device":0,)"
      R"("trigger":"graph launch","kv_bytes":4294967296,"device_bytes":4261412864,"host_bytes":33554432,)"
      R"("tensors":4,"host_bytes_per_tensor":8388608,"granularity":2097152,"headroom_bytes":1101004800,)"
      R"("margin_bytes":-27262976,"deficit_bytes":27262976,"post_kv_peaks":{)"
      R"("other":{"at_kv_end":1073741824,"peak":4294967296,"peak_above":3221225472},)"
      R"("kv":{"at_kv_end":4294967296,"peak":4294967296,"peak_above":0},)"
      R"("graph_pool":{"at_kv_end":0,"peak":536870912,"peak_above":536870912}}}})"
      "\n";
  const std::string report = render_report(kvremap::trace::parse_trace(text, "kv.json"));
  EXPECT_THAT(report, HasSubstr("\nkv cache, device 0:\n"
                                "  deferred   at 0.002 s: 4 tensors of 1.00 GiB, 4.00 GiB on a 64.00 MiB scratch\n"));
  EXPECT_THAT(report, HasSubstr("  plan       at 2.000 s: 4.00 GiB of KV in 4 tensors; 5.00 GiB free, "
                                "1.03 GiB headroom, 3.00 GiB post-KV transient\n"
                                "             host_tail: margin -26.00 MiB, deficit 26.00 MiB; device 3.97 GiB, "
                                "host 32.00 MiB (8.00 MiB at the end of each tensor; granularity 2.00 MiB)\n"));
  EXPECT_THAT(report, HasSubstr("  committed  at 2.002 s by graph launch: device 3.97 GiB, host 32.00 MiB "
                                "(8.00 MiB per tensor), margin -26.00 MiB\n"));
  // Per category: live when the KV burst ended, the peak since, the difference; in category order.
  EXPECT_THAT(report, HasSubstr("  post-KV peaks: category        at KV end   peak since   difference\n"
                                "                 kv               4.00 GiB     4.00 GiB          0 B\n"
                                "                 graph_pool            0 B   512.00 MiB  +512.00 MiB\n"
                                "                 other            1.00 GiB     4.00 GiB    +3.00 GiB\n"));
  EXPECT_THAT(report, Not(HasSubstr("note: kv")));
}

TEST(Report, NoKvSectionWithoutKvEvents) {
  EXPECT_THAT(render_report(read_trace(data_path("complete.json"))), Not(HasSubstr("kv cache, device")));
}

// A trace's strings reach the terminal with their control bytes as \xNN: a cmdline, a hostname, an
// option's value or a reason cannot forge a line of the report or send an escape sequence.
TEST(Report, ControlCharactersInTheTracesStringsAreEscaped) {
  const std::string text =
      "[\n"
      R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,)"
      R"("library_version":"0.2.0","hostname":"h\u001b]0;title\u0007","pid":7,"ppid":1,)"
      R"("cmdline":"engine \u001b[31mred\nkvremap: forged","start_unix_ns":1,"options":{"KVREMAP_MODE":"ob\rserve"}}})"
      "\n"
      R"(,{"ph":"i","s":"g","cat":"phase","name":"phase: loading","pid":7,"tid":7,"ts":1,)"
      R"("args":{"phase":"loading","previous":"init","reason":"first\n! cudaMalloc"}})"
      "\n"
      R"(,{"ph":"i","s":"g","cat":"kvremap","name":"tracking disabled","pid":7,"tid":7,"ts":2,"args":{"reason":"full\u007f"}})"
      "\n";
  const std::string report = render_report(kvremap::trace::parse_trace(text, "t\x1b[2J.json"));
  EXPECT_THAT(report, HasSubstr("== t\\x1b[2J.json\n"));
  EXPECT_THAT(report, HasSubstr("on h\\x1b]0;title\\x07: engine \\x1b[31mred\\x0akvremap: forged\n"));
  EXPECT_THAT(report, HasSubstr("KVREMAP_MODE=ob\\x0dserve"));
  EXPECT_THAT(report, HasSubstr("init -> loading (first\\x0a! cudaMalloc)\n"));
  EXPECT_THAT(report, HasSubstr("tracking disabled at 0.000 s: full\\x7f\n"));
  for (const char c : report) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (byte >= 0x20 && byte != 0x7f)) << "byte " << static_cast<int>(byte);
  }
  EXPECT_THAT(report, Not(HasSubstr("\nkvremap: forged")));
}

}  // namespace
