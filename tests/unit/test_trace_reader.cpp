// Trace reader: complete, killed and malformed traces, schema validation and live-bytes replay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tools/trace/event_validator.h"
#include "tools/trace/hot_line.h"
#include "tools/trace/json_access.h"
#include "tools/trace/kv_events.h"
#include "tools/trace/trace_reader.h"

namespace {

using kvremap::trace::parse_trace;
using kvremap::trace::read_trace;
using kvremap::trace::Trace;
using kvremap::trace::TraceError;
using ::testing::HasSubstr;

constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

std::string data_path(const std::string& name) {
  return std::string(KVREMAP_SOURCE_DIR) + "/tests/data/traces/" + name;
}

// The smallest valid trace text: the header and nothing else; tests append event lines to it.
const std::string kHeaderLine =
    R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,)"
    R"("library_version":"0.1.0","hostname":"h","pid":7,"ppid":1,"cmdline":"engine","start_unix_ns":1,"options":{}}})";

std::string trace_text(const std::vector<std::string>& event_lines, bool closed = true, int schema = 1) {
  std::string header = kHeaderLine;
  header.replace(header.find(R"("schema_version":1)"), 18, R"("schema_version":)" + std::to_string(schema));
  std::string text = "[\n" + header + "\n";
  for (const std::string& line : event_lines) text += "," + line + "\n";
  return closed ? text + "]\n" : text;
}

// Every problem `kvremap validate` finds in trace text, in the order it prints them.
std::vector<std::string> problems_of(const std::string& text, const std::string& name) {
  return kvremap::trace::validate_text(text, name).problems;
}

std::string alloc_line(double ts, const std::string& ptr, std::uint64_t bytes, const std::string& category,
                       int device = 0) {
  return R"({"ph":"i","s":"t","cat":"alloc","name":"alloc","pid":7,"tid":7,"ts":)" + std::to_string(ts) +
         R"(,"args":{"api":"cudaMalloc","ptr":")" + ptr + R"(","bytes":)" + std::to_string(bytes) + R"(,"device":)" +
         std::to_string(device) + R"(,"category":")" + category + R"(","phase":"loading"}})";
}

std::string free_line(double ts, const std::string& ptr, std::uint64_t bytes, const std::string& category,
                      int device = 0) {
  return R"({"ph":"i","s":"t","cat":"alloc","name":"free","pid":7,"tid":7,"ts":)" + std::to_string(ts) +
         R"(,"args":{"api":"cudaFree","ptr":")" + ptr + R"(","bytes":)" + std::to_string(bytes) + R"(,"device":)" +
         std::to_string(device) + R"(,"category":")" + category + R"("}})";
}

// Schema 2: an allocation and its free as one complete event on thread `tid`.
std::string lifetime_line(double ts, double dur, const std::string& ptr, std::uint64_t bytes, int tid = 7) {
  return R"({"ph":"X","cat":"alloc","pid":7,"tid":)" + std::to_string(tid) + R"(,"name":"alloc","ts":)" +
         std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":{"api":"cuMemAlloc_v2","ptr":")" + ptr +
         R"(","bytes":)" + std::to_string(bytes) +
         R"(,"device":0,"category":"other","phase":"loading","free_api":"cuMemFree_v2"}})";
}

// A file under the test's temporary directory holding `text`, removed when it goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::path(::testing::TempDir()) / (std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Runs `parse` expecting a TraceError and returns its message.
template <typename Parse>
std::string trace_error_of(Parse parse) {
  try {
    parse();
  } catch (const TraceError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no TraceError thrown";
  return "";
}

TEST(TraceReader, CompleteTraceHasHeaderDevicesAndFlags) {
  const Trace trace = read_trace(data_path("complete.json"));
  EXPECT_TRUE(trace.complete);
  EXPECT_FALSE(trace.truncated);
  EXPECT_EQ(trace.header.schema_version, 1);
  EXPECT_EQ(trace.header.library_version, "0.1.0");
  EXPECT_EQ(trace.header.hostname, "gpu-node-1");
  EXPECT_EQ(trace.header.pid, 4242);
  EXPECT_EQ(trace.header.ppid, 4200);
  EXPECT_THAT(trace.header.cmdline, HasSubstr("vllm"));
  EXPECT_EQ(trace.header.start_unix_ns, 1735689600000000000);
  EXPECT_EQ(trace.header.options.at("KVREMAP_MODE"), "observe");
  EXPECT_EQ(trace.header.process_name, "kvremap: python3 (pid 4242)");
  EXPECT_EQ(trace.device_total_bytes.at(0), 80 * kGiB);
  EXPECT_EQ(trace.event_count, 32u);
  ASSERT_EQ(trace.events.size(), 32u);
  EXPECT_EQ(trace.event_lines.front(), 2u);  // line 1 is the '['
  EXPECT_EQ(trace.event_lines.back(), 33u);
}

TEST(TraceReader, CompleteTraceFillsEveryTypedRecord) {
  const Trace trace = read_trace(data_path("complete.json"));
  ASSERT_EQ(trace.allocs.size(), 4u);
  EXPECT_EQ(trace.allocs[0].api, "cudaMalloc");
  EXPECT_EQ(trace.allocs[0].ptr, "0x7f0000000000");
  EXPECT_EQ(trace.allocs[0].bytes, 2 * kGiB);
  EXPECT_EQ(trace.allocs[0].category, "other");
  EXPECT_EQ(trace.allocs[0].phase, "loading");
  EXPECT_EQ(trace.allocs[0].caller, "libc10_cuda.so");
  EXPECT_EQ(trace.allocs[2].category, "kv");
  ASSERT_EQ(trace.frees.size(), 2u);
  EXPECT_DOUBLE_EQ(trace.frees[0].event.ts_us, 6000.5);  // fractional microseconds survive
  EXPECT_EQ(trace.frees[1].api, "cudaFreeAsync");
  EXPECT_EQ(trace.counters.size(), 9u);
  EXPECT_EQ(trace.counters.back().bytes_by_category.at("kv"), 40 * kGiB);

  ASSERT_EQ(trace.checkpoints.size(), 3u);
  EXPECT_EQ(trace.checkpoints[2].index, 2);
  EXPECT_EQ(trace.checkpoints[2].phase, "capture");
  EXPECT_EQ(trace.checkpoints[2].driver_free - trace.checkpoints[2].returned_free, 40 * kGiB);

  ASSERT_EQ(trace.phase_changes.size(), 5u);
  EXPECT_EQ(trace.phase_changes[0].previous, "init");
  EXPECT_EQ(trace.phase_changes[4].phase, "serving");

  ASSERT_EQ(trace.captures.size(), 1u);
  EXPECT_DOUBLE_EQ(trace.captures[0].event.ts_us, 10500);
  EXPECT_DOUBLE_EQ(trace.captures[0].dur_us, 2000);
  EXPECT_EQ(trace.captures[0].mode, "thread_local");
  EXPECT_EQ(trace.captures[0].allocated_bytes, 256 * kMiB);

  ASSERT_EQ(trace.graph_execs.size(), 2u);
  EXPECT_FALSE(trace.graph_execs[0].destroyed);
  EXPECT_TRUE(trace.graph_execs[1].destroyed);
  ASSERT_EQ(trace.modules.size(), 1u);
  EXPECT_EQ(trace.modules[0].bytes, 1 * kMiB);

  // A name this reader does not know inside a known cat is kept, not dropped or rejected.
  ASSERT_EQ(trace.other_events.size(), 1u);
  EXPECT_EQ(trace.other_events[0].name, "graph launch batch");
  EXPECT_EQ(trace.other_events[0].args.at("launches"), 12);

  ASSERT_TRUE(trace.summary.has_value());
  EXPECT_EQ(trace.summary->exit, "atexit");
  EXPECT_DOUBLE_EQ(trace.summary->duration_us, 19000);
  ASSERT_EQ(trace.summary->devices.size(), 1u);
  EXPECT_EQ(trace.summary->devices[0].categories.at("other").peak_bytes, 3 * kGiB);
  EXPECT_EQ(trace.summary->checkpoints.size(), 3u);
  EXPECT_EQ(trace.summary->counts.at("kernel_launches"), 3400u);
}

TEST(TraceReader, CompleteAndUnclosedSamplesConformToTheSchema) {
  EXPECT_THAT(kvremap::trace::validate(read_trace(data_path("complete.json"))), ::testing::IsEmpty());
  const Trace unclosed = read_trace(data_path("missing_close_bracket.json"));
  EXPECT_FALSE(unclosed.complete);
  EXPECT_FALSE(unclosed.truncated);
  EXPECT_TRUE(unclosed.summary.has_value());
  EXPECT_THAT(kvremap::trace::validate(unclosed), ::testing::IsEmpty());
}

TEST(TraceReader, ReplayOfConsistentSampleMatchesItsSummary) {
  const Trace trace = read_trace(data_path("complete.json"));
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  EXPECT_EQ(replay.frees_exceeding_live, 0u);
  ASSERT_EQ(replay.devices.size(), 1u);
  const auto& replayed = replay.devices.at(0);
  const auto& written = trace.summary->devices[0].categories;
  ASSERT_EQ(replayed.size(), written.size());
  for (const auto& [category, stats] : written) {
    SCOPED_TRACE(category);
    EXPECT_EQ(replayed.at(category), stats);
  }
  // The counters agree with the replay too: the last sample is what was live at the end.
  for (const auto& [category, bytes] : trace.counters.back().bytes_by_category) {
    EXPECT_EQ(replayed.at(category).live_bytes, bytes) << category;
  }
}

TEST(TraceReader, KilledMidLineKeepsEveryCompleteEvent) {
  const Trace trace = read_trace(data_path("killed_mid_line.json"));
  EXPECT_TRUE(trace.truncated);
  EXPECT_FALSE(trace.complete);
  EXPECT_FALSE(trace.summary.has_value());
  EXPECT_EQ(trace.event_count, 19u);
  EXPECT_TRUE(trace.captures.empty());  // the capture window was the line being written
  EXPECT_EQ(trace.allocs.size(), 4u);
  EXPECT_THAT(kvremap::trace::validate(trace), ::testing::IsEmpty());
}

TEST(TraceReader, KilledAfterSeparatingCommaIsTruncatedNotAnError) {
  const Trace trace = read_trace(data_path("killed_after_comma.json"));
  EXPECT_TRUE(trace.truncated);
  EXPECT_FALSE(trace.complete);
  EXPECT_EQ(trace.event_count, 19u);
}

TEST(TraceReader, GarbageAndForeignTracesAreOneLineErrors) {
  const std::string garbage = trace_error_of([] { (void)read_trace(data_path("garbage.json")); });
  EXPECT_THAT(garbage, HasSubstr("garbage.json: line 1: not a kvremap trace: expected '['"));
  EXPECT_EQ(garbage.find('\n'), std::string::npos);

  const std::string foreign = trace_error_of([] { (void)read_trace(data_path("other_chrome_trace.json")); });
  EXPECT_THAT(foreign, HasSubstr("other_chrome_trace.json: line 3: not a kvremap trace: the first event must be"));

  EXPECT_THAT(trace_error_of([] { (void)parse_trace("", "empty.json"); }), HasSubstr("empty.json: line 0: "));
  EXPECT_THAT(trace_error_of([] { (void)parse_trace("[\n", "bare.json"); }),
              HasSubstr("bare.json: line 1: not a kvremap trace: the file ends before the kvremap_trace"));
  EXPECT_THAT(trace_error_of([] { (void)read_trace(data_path("does-not-exist.json")); }),
              HasSubstr("does-not-exist.json: line 0: cannot open: No such file or directory"));
}

TEST(TraceReader, OtherSchemaVersionIsRejected) {
  EXPECT_THAT(
      trace_error_of([] { (void)read_trace(data_path("wrong_schema_version.json")); }),
      HasSubstr("wrong_schema_version.json: line 2: unsupported schema_version 9 (this reader reads versions 1 to 3)"));
}

TEST(TraceReader, LifetimeEventIsReadAsItsAllocationAndItsFree) {
  const Trace trace = parse_trace(trace_text({lifetime_line(10.5, 2.25, "0x1", 4096)}, true, 2), "t");
  EXPECT_EQ(trace.header.schema_version, 2);
  ASSERT_EQ(trace.allocs.size(), 1u);
  ASSERT_EQ(trace.frees.size(), 1u);
  const auto& alloc = trace.allocs[0];
  const auto& free = trace.frees[0];
  EXPECT_TRUE(alloc.lifetime);
  EXPECT_TRUE(free.lifetime);
  EXPECT_EQ(alloc.api, "cuMemAlloc_v2");
  EXPECT_EQ(free.api, "cuMemFree_v2");
  EXPECT_DOUBLE_EQ(alloc.event.ts_us, 10.5);
  EXPECT_DOUBLE_EQ(free.event.ts_us, 12.75);  // ts + dur
  EXPECT_EQ(free.event.index, alloc.event.index);
  EXPECT_EQ(free.event.line, alloc.event.line);
  for (const auto* e : {&alloc, &free}) {
    EXPECT_EQ(e->ptr, "0x1");
    EXPECT_EQ(e->bytes, 4096u);
    EXPECT_EQ(e->category, "other");
  }
  EXPECT_EQ(alloc.phase, "loading");
  EXPECT_THAT(kvremap::trace::validate(trace), ::testing::IsEmpty());
}

TEST(TraceReplay, ZeroLengthLifetimesAllocateBeforeTheyFree) {
  // Each lifetime's allocation and free share a time and an index: the allocation must count first,
  // or the free would release more than was live. Enough of them that the sort is not an insertion
  // sort (which would keep the input order by itself).
  std::vector<std::string> lines = {alloc_line(1, "0x9", 10, "other")};
  for (int i = 0; i < 40; ++i) lines.push_back(lifetime_line(5, 0, "0x" + std::to_string(100 + i), 100));
  const Trace trace = parse_trace(trace_text(lines, true, 2), "t");
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  const kvremap::trace::CategoryStats& other = replay.devices.at(0).at("other");
  EXPECT_EQ(replay.frees_exceeding_live, 0u);
  EXPECT_EQ(other.live_bytes, 10u);
  EXPECT_EQ(other.peak_bytes, 110u);
  EXPECT_DOUBLE_EQ(other.peak_ts_us, 5);
  EXPECT_EQ(other.allocations, 41u);
  EXPECT_EQ(other.frees, 40u);
}

TEST(TraceReader, ALifetimesEndIsTheSameInstantAsAnEqualTimestamp) {
  // 0.1 + 0.2 is not 0.3 in binary floating point; the reader sums in nanoseconds.
  const Trace trace = parse_trace(trace_text({lifetime_line(0.1, 0.2, "0x1", 8)}, true, 2), "t");
  ASSERT_EQ(trace.frees.size(), 1u);
  EXPECT_EQ(trace.frees[0].event.ts_us, 0.3);
}

TEST(TraceReader, LifetimesNeedSchemaTwoAndADurationAndFreeApi) {
  EXPECT_THAT(problems_of(trace_text({lifetime_line(1, 1, "0x1", 8)}, true, 1), "t"),
              ::testing::ElementsAre("t: event 1: alloc: ph: expected \"i\", found \"X\" (line 3)"));
  std::string bare = lifetime_line(1, 1, "0x1", 8);
  bare.replace(bare.find(R"(,"dur":)"), bare.find(R"(,"args")") - bare.find(R"(,"dur":)"), "");
  bare.replace(bare.find(R"(,"free_api":"cuMemFree_v2")"), 26, "");
  EXPECT_THAT(problems_of(trace_text({bare}, true, 2), "t"),
              ::testing::ElementsAre("t: event 1: alloc: missing dur (line 3)",
                                     "t: event 1: alloc: missing args.free_api (line 3)"));
}

TEST(TraceReader, SlicesOnOneThreadMustNest) {
  const std::string capture =
      R"({"ph":"X","cat":"capture","name":"capture","pid":7,"tid":7,"ts":10,"dur":10,"args":{"capture_id":1,)"
      R"("stream":"0x5","mode":"global","status":"ok","allocated_bytes":0}})";
  // Inside the window, touching its ends, and on another thread: all fine.
  EXPECT_THAT(problems_of(trace_text({capture, lifetime_line(10, 1, "0x1", 8), lifetime_line(19, 1, "0x2", 8),
                                          lifetime_line(20, 3, "0x3", 8), lifetime_line(15, 30, "0x4", 8, 8)},
                                         true, 2),
                              "t"),
              ::testing::IsEmpty());
  // Starting inside and ending after it: Perfetto could not place it.
  EXPECT_THAT(
      problems_of(trace_text({capture, lifetime_line(19.5, 0.501, "0x1", 8)}, true, 2), "t"),
      ::testing::ElementsAre(
          "t: event 2: alloc: overlaps event 1 (capture) on thread 7 without nesting inside it (line 4)"));
}

TEST(TraceReader, AnAsyncCapturePairIsOneWindowAndAnUnendedOneIsLeftOut) {
  const std::string args =
      R"("args":{"capture_id":3,"stream":"0x5","mode":"relaxed","status":"ok","allocated_bytes":64})";
  const std::string begin3 =
      R"({"ph":"b","cat":"capture","name":"capture","id":"0x3","pid":7,"tid":7,"ts":10.5,)" + args + "}";
  const std::string end3 =
      R"({"ph":"e","cat":"capture","name":"capture","id":"0x3","pid":7,"tid":7,"ts":12.75,"args":{}})";
  std::string begin4 = begin3;
  begin4.replace(begin4.find(R"("id":"0x3")"), 10, R"("id":"0x4")");
  const Trace trace = parse_trace(trace_text({begin3, begin4, end3}, false, 2), "t");
  ASSERT_EQ(trace.captures.size(), 1u);
  EXPECT_EQ(trace.captures[0].capture_id, 3u);
  EXPECT_DOUBLE_EQ(trace.captures[0].event.ts_us, 10.5);
  EXPECT_DOUBLE_EQ(trace.captures[0].dur_us, 2.25);
  EXPECT_EQ(trace.captures[0].allocated_bytes, 64u);
  EXPECT_THAT(kvremap::trace::validate(trace), ::testing::IsEmpty());
  std::string no_id = end3;
  no_id.replace(no_id.find(R"("id":"0x3",)"), 11, "");
  EXPECT_THAT(problems_of(trace_text({begin3, no_id}, true, 2), "t"),
              ::testing::ElementsAre("t: event 2: capture: missing id (line 4)"));
}

TEST(TraceReader, UnparsableLineBeforeTheEndIsAnErrorNamingItsLine) {
  const std::string broken = R"({"ph":"i","cat":"alloc",)";
  // Followed by another event: not a truncated tail but a corrupt file.
  EXPECT_THAT(trace_error_of([&] {
                (void)parse_trace(trace_text({broken, alloc_line(1, "0x1", 8, "kv")}, false), "t");
              }),
              HasSubstr("t: line 3: not a JSON event: "));
  // Followed only by ']': the writer finished the file, so the line cannot be a cut-off tail either.
  EXPECT_THAT(trace_error_of([&] { (void)parse_trace(trace_text({broken}, true), "t"); }), HasSubstr("t: line 3: "));
  EXPECT_THAT(trace_error_of([] { (void)parse_trace(trace_text({}) + "{}\n", "t"); }),
              HasSubstr("t: line 4: data after the closing ']'"));
}

TEST(TraceReader, AcceptsHeaderFirstCrlfBlankLinesAndTrailingCommas) {
  std::string text = "[\r\n" + kHeaderLine + ",\r\n\r\n" + alloc_line(5, "0x1", 64, "kv") + "\r\n]\r\n";
  const Trace trace = parse_trace(text, "windows.json");
  EXPECT_TRUE(trace.complete);
  EXPECT_TRUE(trace.header.process_name.empty());
  ASSERT_EQ(trace.allocs.size(), 1u);
  EXPECT_EQ(trace.event_lines[1], 4u);
}

TEST(TraceReader, UnknownFieldsAndCategoriesOfEventsAreKeptWithoutComplaint) {
  const Trace trace = parse_trace(
      trace_text(
          {R"({"ph":"i","s":"t","cat":"alloc","name":"alloc","pid":7,"tid":7,"ts":1,"new_top_level":true,)"
           R"("args":{"api":"cudaMalloc","ptr":"0x1","bytes":8,"device":0,"category":"kv","phase":"loading","numa":3}})",
           R"({"ph":"i","cat":"policy","name":"commit plan","pid":7,"tid":7,"ts":2,"args":{"kv_bytes":8}})",
           R"({"ph":"i","s":"g","cat":"kvremap","name":"tracking disabled","pid":7,"tid":7,"ts":3,"args":{"reason":"write failed"}})"}),
      "t");
  EXPECT_EQ(trace.allocs.size(), 1u);
  ASSERT_EQ(trace.other_events.size(), 2u);
  EXPECT_EQ(trace.other_events[0].cat, "policy");
  EXPECT_EQ(trace.other_events[1].args.at("reason"), "write failed");
  EXPECT_THAT(kvremap::trace::validate(trace), ::testing::IsEmpty());
}

TEST(TraceReader, ValidateNamesEveryProblemWithEventAndLine) {
  const std::vector<std::string> problems = kvremap::trace::validate_file(data_path("schema_problems.json")).problems;
  const std::string file = data_path("schema_problems.json");
  EXPECT_THAT(problems,
              ::testing::ElementsAre(
                  file + ": event 1: alloc: missing args.bytes (line 3)",
                  file + ": event 2: alloc: args.category: expected one of kv, graph_pool, graph_exec, module, "
                         "async_pool, vmm, other, found \"weights\" (line 4)",
                  file + ": event 3: free: args.bytes: expected a non-negative integer, found \"4096\" (line 5)",
                  file + ": event 4: device 0 bytes: missing args.vmm (line 6)",
                  file + ": event 5: capture: args.mode: expected one of global, thread_local, relaxed, found "
                         "\"sideways\" (line 7)",
                  file + ": event 6: expected a JSON object, found 42 (line 8)",
                  file + ": event 7: phase: profiling: missing pid (line 9)"));
}

TEST(TraceReader, ValidateChecksSummaryPlacementAndRepeatedHeader) {
  const std::string summary_line =
      R"({"ph":"i","s":"g","cat":"summary","name":"summary","pid":7,"tid":7,"ts":9,"args":{"schema_version":1,)"
      R"("library_version":"0.1.0","exit":"SIGTERM","duration_us":9,"devices":[{"device":0,"total_bytes":1,)"
      R"("categories":{"kv":{"live_bytes":0,"peak_bytes":0,"peak_ts":0,"allocated_bytes":0,"allocations":0,"frees":0}}}],)"
      R"("checkpoints":[],"counts":{"captures":0,"graph_launches":0,"kernel_launches":0,"module_loads":0},"options":{}}})";
  const std::string text = trace_text({summary_line, kHeaderLine});
  const std::vector<std::string> problems = problems_of(text, "t");
  EXPECT_THAT(problems, ::testing::Contains(HasSubstr("t: event 1: summary: the summary is not the last event")));
  EXPECT_THAT(problems, ::testing::Contains(HasSubstr("missing args.devices[0].categories.graph_pool (line 3)")));
  EXPECT_THAT(problems,
              ::testing::Contains(HasSubstr("t: event 2: kvremap_trace: a second kvremap_trace metadata event")));
  EXPECT_THROW(parse_trace(text, "t"), kvremap::trace::SchemaError);
}

// A reader takes nothing from an event validate would not accept: whatever it keeps (raw events,
// typed records, a callback), the first problem stops it with validate's line, and the callback never
// sees the bad event.
TEST(TraceReader, AnEventThatBreaksTheSchemaIsRefusedWithValidatesFirstLine) {
  const std::string text = trace_text(
      {alloc_line(1, "0x1", 8, "kv"),
       R"({"ph":"i","cat":"alloc","name":"alloc","pid":7,"tid":"seven","ts":"soon","args":{"bytes":-5,"ptr":12,"device":"0"}})",
       R"({"ph":"i","cat":"alloc","name":"free","pid":7,"tid":7,"ts":1,"args":[1,2]})"});
  const std::vector<std::string> problems = problems_of(text, "t");
  ASSERT_THAT(problems, ::testing::Contains(HasSubstr("event 3: free: args: expected an object")));
  EXPECT_EQ(problems.front(), "t: event 2: alloc: tid: expected an integer, found \"seven\" (line 4)");
  for (const bool raw : {true, false}) {
    for (const bool scan : {true, false}) {
      std::size_t seen = 0;
      kvremap::trace::ReadOptions options{.keep_raw_events = raw, .scan_hot_lines = scan};
      const bool callback = !raw && !scan;  // a callback sends every line through the parser
      if (callback) {
        options.on_event = [&seen](const nlohmann::json&, std::size_t, std::size_t, const kvremap::trace::Header&) {
          ++seen;
        };
      }
      try {
        parse_trace(text, "t", options);
        ADD_FAILURE() << "read a trace that breaks the schema";
      } catch (const kvremap::trace::SchemaError& error) {
        EXPECT_EQ(std::string(error.what()), problems.front());
        EXPECT_EQ(error.source(), "t");
      }
      if (callback) {
        EXPECT_EQ(seen, 2u) << "the header and the good allocation only";
      }
    }
  }
}

TEST(TraceReader, WithoutRawEventsTypedRecordsRemainAndValidateSaysWhy) {
  const Trace trace = read_trace(data_path("complete.json"), {.keep_raw_events = false});
  EXPECT_TRUE(trace.events.empty());
  EXPECT_EQ(trace.event_count, 32u);
  EXPECT_EQ(trace.allocs.size(), 4u);
  EXPECT_THAT(kvremap::trace::validate(trace), ::testing::ElementsAre(HasSubstr("read without its raw events")));
}

TEST(TraceReplay, TracksEachDeviceAndClampsFreesOfUnknownMemory) {
  const Trace trace =
      parse_trace(trace_text({alloc_line(1, "0x1", 100, "kv", 0), alloc_line(2, "0x2", 50, "kv", 1),
                              alloc_line(3, "0x3", 30, "kv", 0), free_line(4, "0x1", 100, "kv", 0),
                              alloc_line(5, "0x4", 100, "kv", 0), free_line(6, "0x9", 500, "other", 1)}),
                  "t");
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  const kvremap::trace::CategoryStats& kv0 = replay.devices.at(0).at("kv");
  EXPECT_EQ(kv0.live_bytes, 130u);
  EXPECT_EQ(kv0.peak_bytes, 130u);
  EXPECT_DOUBLE_EQ(kv0.peak_ts_us, 3);  // reached first at ts 3, matched again at ts 5
  EXPECT_EQ(kv0.allocated_bytes, 230u);
  EXPECT_EQ(kv0.allocations, 3u);
  EXPECT_EQ(kv0.frees, 1u);
  EXPECT_EQ(replay.devices.at(1).at("kv").live_bytes, 50u);
  EXPECT_EQ(replay.devices.at(1).at("other").live_bytes, 0u);
  EXPECT_EQ(replay.frees_exceeding_live, 1u);
  EXPECT_EQ(replay.devices.at(1).size(), kvremap::trace::kCategories.size());
}

TEST(TraceReplay, FollowsTimestampsAcrossThreadChunksNotFileOrder) {
  // Per-thread buffers: thread 8's chunk (a free at ts 20) reached the file before thread 7's chunk
  // holding the allocation it released (ts 10) and a later one (ts 30).
  std::string freed_on_other_thread = free_line(20, "0x1", 100, "kv");
  freed_on_other_thread.replace(freed_on_other_thread.find(R"("tid":7)"), 7, R"("tid":8)");
  const Trace trace = parse_trace(
      trace_text({freed_on_other_thread, alloc_line(10, "0x1", 100, "kv"), alloc_line(30, "0x2", 60, "kv")}), "t");
  const kvremap::trace::LiveBytesReplay replay = kvremap::trace::replay_live_bytes(trace);
  const kvremap::trace::CategoryStats& kv = replay.devices.at(0).at("kv");
  EXPECT_EQ(replay.frees_exceeding_live, 0u);
  EXPECT_EQ(kv.live_bytes, 60u);
  EXPECT_EQ(kv.peak_bytes, 100u);
  EXPECT_DOUBLE_EQ(kv.peak_ts_us, 10);
  EXPECT_EQ(trace.frees[0].event.tid, 8);
}

TEST(TraceReader, LargeTraceParsesInOnePassWithCorrectLines) {
  constexpr int kEvents = 50000;
  std::string text = "[\n" + kHeaderLine + "\n";
  text.reserve(kEvents * 200);
  for (int i = 0; i < kEvents; ++i) {
    text += "," +
            (i % 2 == 0 ? alloc_line(i, "0x" + std::to_string(i), 256, "other")
                        : free_line(i, "0x" + std::to_string(i - 1), 256, "other")) +
            "\n";
  }
  const Trace trace = parse_trace(text, "big.json");
  EXPECT_FALSE(trace.complete);
  EXPECT_EQ(trace.event_count, static_cast<std::size_t>(kEvents + 1));
  EXPECT_EQ(trace.event_lines.back(), static_cast<std::size_t>(kEvents + 2));
  const auto replayed = kvremap::trace::replay_live_bytes(trace);
  const kvremap::trace::CategoryStats& other = replayed.devices.at(0).at("other");
  EXPECT_EQ(other.live_bytes, 0u);
  EXPECT_EQ(other.peak_bytes, 256u);
}

// Every way a file can fail to be a trace is a TraceError, never another exception, a crash or "ok".
TEST(TraceReaderRobustness, NumberBeyondADoublesRangeIsAnErrorAtItsLine) {
  const std::string message = trace_error_of([] { (void)read_trace(data_path("number_out_of_range.json")); });
  EXPECT_THAT(message,
              HasSubstr("number_out_of_range.json: line 6: not a JSON event: number overflow parsing '1e309'"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_THAT(trace_error_of([] { (void)kvremap::trace::validate_file(data_path("number_out_of_range.json")); }),
              HasSubstr("line 6: not a JSON event: number overflow"));
  // Not mistaken for a cut-off last line: a prefix of a number the writer wrote is never out of range.
  const std::string last_line = R"({"ph":"i","cat":"x","name":"y","pid":7,"tid":7,"ts":-1e400})";
  EXPECT_THAT(trace_error_of([&] { (void)parse_trace(trace_text({last_line}, false), "t"); }),
              HasSubstr("t: line 3: not a JSON event: number overflow"));
}

TEST(TraceReaderRobustness, LinesNestedDeeperThanTheLimitAreRejectedBeforeParsing) {
  constexpr std::size_t kLevels = 100000;
  const std::string arrays = std::string(kLevels, '[') + std::string(kLevels, ']');
  std::string objects;
  for (std::size_t i = 0; i < kLevels; ++i) objects += R"({"a":)";
  objects += "1" + std::string(kLevels, '}');
  const std::string in_args = R"({"ph":"i","cat":"x","name":"y","pid":7,"tid":7,"ts":1,"args":)" + arrays + "}";
  for (const std::string& line : {arrays, objects, in_args}) {
    for (const bool closed : {true, false}) {
      EXPECT_THAT(trace_error_of([&] { (void)parse_trace(trace_text({line}, closed), "deep.json"); }),
                  HasSubstr("deep.json: line 3: nested deeper than 64 levels"));
    }
  }
  // The limit itself is fine; brackets inside strings (escaped quotes included) do not count.
  const auto nested_args = [](std::size_t levels) {
    return R"({"ph":"i","cat":"x","name":"y","pid":7,"tid":7,"ts":1,"args":)" + std::string(levels - 1, '[') +
           std::string(levels - 1, ']') + "}";
  };
  EXPECT_EQ(parse_trace(trace_text({nested_args(kvremap::trace::kMaxNestingDepth)}), "t").other_events.size(), 1u);
  EXPECT_THAT(
      trace_error_of([&] { (void)parse_trace(trace_text({nested_args(kvremap::trace::kMaxNestingDepth + 1)}), "t"); }),
      HasSubstr("line 3: nested deeper than 64"));
  const std::string brackets_in_string =
      R"({"ph":"i","cat":"x","name":"\")" + std::string(1000, '[') + R"(","pid":7,"tid":7,"ts":1,"args":{}})";
  EXPECT_EQ(parse_trace(trace_text({brackets_in_string}), "t").other_events.size(), 1u);
}

TEST(TraceReaderRobustness, DirectoriesAndUnopenablePathsAreErrorsAtLineZero) {
  const std::string directory = std::string(KVREMAP_SOURCE_DIR) + "/tests/data/traces";
  EXPECT_THAT(trace_error_of([&] { (void)read_trace(directory); }),
              HasSubstr("traces: line 0: cannot read: is a directory"));
  EXPECT_THAT(trace_error_of([&] { (void)kvremap::trace::validate_file(directory); }),
              HasSubstr("traces: line 0: cannot read: is a directory"));
  EXPECT_THAT(trace_error_of([] { (void)read_trace(data_path("complete.json/inside")); }),
              HasSubstr("complete.json/inside: line 0: cannot open: Not a directory"));
  EXPECT_THAT(trace_error_of([] { (void)kvremap::trace::validate_file(data_path("does-not-exist.json")); }),
              HasSubstr("does-not-exist.json: line 0: cannot open: No such file or directory"));
  EXPECT_THAT(trace_error_of([] { (void)read_trace("/dev/null"); }),
              HasSubstr("/dev/null: line 0: not a kvremap trace: the file is empty"));
}

// A file that opens but cannot be read, for any account (root included): this process's own
// /proc/self/mem fails at offset 0.
TEST(TraceReaderRobustness, AFileThatCannotBeReadIsAnError) {
  EXPECT_THAT(trace_error_of([] { (void)read_trace("/proc/self/mem"); }),
              HasSubstr("/proc/self/mem: line 1: cannot read: Input/output error"));
  EXPECT_THAT(trace_error_of([] { (void)kvremap::trace::validate_file("/proc/self/mem"); }),
              HasSubstr("/proc/self/mem: line 1: cannot read: Input/output error"));
}

TEST(TraceReaderRobustness, LongGarbageLineIsNotATrace) {
  // Megabytes with no newline: rejected by its first bytes, whatever follows.
  std::string garbage = "PK";
  garbage.append(kvremap::trace::kMaxLineBytes / 64, 'x');
  const TempFile file("long_garbage.json", garbage);
  EXPECT_THAT(trace_error_of([&] { (void)read_trace(file.path()); }),
              HasSubstr("long_garbage.json: line 1: not a kvremap trace: expected '['"));
}

// A file read in chunks gives what the same text gives in memory, lines across chunk boundaries
// and a last line without its newline included.
TEST(TraceReaderStreaming, FileReadInChunksMatchesTheTextInMemory) {
  constexpr int kEvents = 30000;  // about 6 MB: several read chunks
  std::string text = "[\n" + kHeaderLine + "\n";
  for (int i = 0; i < kEvents; ++i) {
    text += "," +
            (i % 2 == 0 ? alloc_line(i, "0x" + std::to_string(i), 256, "other")
                        : free_line(i, "0x" + std::to_string(i - 1), 256, "other")) +
            (i + 1 < kEvents ? "\n" : "");
  }
  const TempFile file("chunks.json", text);
  const Trace from_file = read_trace(file.path());
  const Trace from_text = parse_trace(text, file.path());
  EXPECT_EQ(from_file.event_count, static_cast<std::size_t>(kEvents + 1));
  EXPECT_EQ(from_file.event_lines, from_text.event_lines);
  EXPECT_EQ(from_file.events, from_text.events);
  ASSERT_EQ(from_file.frees.size(), from_text.frees.size());
  EXPECT_EQ(from_file.frees.back().ptr, from_text.frees.back().ptr);
  EXPECT_FALSE(from_file.truncated);

  const Trace records_only = read_trace(file.path(), {.keep_raw_events = false, .keep_records = false});
  EXPECT_EQ(records_only.event_count, static_cast<std::size_t>(kEvents + 1));
  EXPECT_TRUE(records_only.allocs.empty());
  EXPECT_TRUE(records_only.events.empty());
  EXPECT_EQ(records_only.header.schema_version, 1);
}

TEST(TraceReaderStreaming, EventCallbackSeesEveryEventInOrderWithTheHeaderRead) {
  std::vector<std::size_t> lines;
  std::vector<int> schemas;
  const Trace trace =
      read_trace(data_path("complete.json"), {.keep_raw_events = false,
                                              .keep_records = true,
                                              .on_event = [&](const nlohmann::json&, std::size_t index,
                                                              std::size_t line, const kvremap::trace::Header& header) {
                                                EXPECT_EQ(index, lines.size());
                                                lines.push_back(line);
                                                schemas.push_back(header.schema_version);
                                              }});
  ASSERT_EQ(lines.size(), trace.event_count);
  EXPECT_EQ(lines.front(), 2u);
  EXPECT_EQ(schemas.front(), 0);  // process_name comes before the header
  EXPECT_EQ(schemas.back(), 1);
}

// validate_file, validate_text and the readers agree: the same problems from a file and from its
// text, and a reader refuses exactly the files with problems, with the first of them.
void expect_readers_agree_with_validate(const std::string& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const kvremap::trace::FileValidation streamed = kvremap::trace::validate_file(path);
  EXPECT_EQ(streamed.problems, kvremap::trace::validate_text(text, path).problems);
  EXPECT_TRUE(streamed.trace.events.empty());
  EXPECT_TRUE(streamed.trace.allocs.empty());
  if (streamed.problems.empty()) {
    const Trace whole = read_trace(path);
    EXPECT_THAT(kvremap::trace::validate(whole), ::testing::IsEmpty());
    EXPECT_EQ(streamed.trace.event_count, whole.event_count);
    EXPECT_EQ(streamed.trace.complete, whole.complete);
    EXPECT_EQ(streamed.trace.truncated, whole.truncated);
    return;
  }
  for (const bool raw : {true, false}) {
    try {
      read_trace(path, {.keep_raw_events = raw});
      ADD_FAILURE() << "read a trace with problems";
    } catch (const kvremap::trace::SchemaError& error) {
      EXPECT_EQ(std::string(error.what()), streamed.problems.front());
    }
  }
}

TEST(TraceReaderStreaming, ValidateFileSaysWhatValidateSaysOfTheWholeTrace) {
  for (const char* name : {"complete.json", "schema_problems.json", "missing_close_bracket.json",
                           "killed_mid_line.json", "killed_after_comma.json"}) {
    SCOPED_TRACE(name);
    expect_readers_agree_with_validate(data_path(name));
  }
  // Cross-event checks: a summary followed by an event, slices that do not nest, a second header.
  const std::string summary = R"({"ph":"i","cat":"summary","name":"summary","pid":7,"tid":7,"ts":5,"args":{}})";
  const std::string capture =
      R"({"ph":"X","cat":"capture","name":"capture","pid":7,"tid":7,"ts":10,"dur":10,"args":{"capture_id":1,)"
      R"("stream":"0x1","mode":"global","status":"ok","allocated_bytes":0}})";
  const TempFile file("cross.json",
                      trace_text({summary, capture, lifetime_line(19, 2, "0x1", 8), kHeaderLine}, true, 2));
  const kvremap::trace::FileValidation streamed = kvremap::trace::validate_file(file.path());
  expect_readers_agree_with_validate(file.path());
  EXPECT_THAT(streamed.problems, ::testing::Contains(HasSubstr("event 1: summary: the summary is not the last event")));
  EXPECT_THAT(streamed.problems, ::testing::Contains(HasSubstr("event 3: alloc: overlaps event 2 (capture)")));
  EXPECT_THAT(streamed.problems, ::testing::Contains(HasSubstr("a second kvremap_trace metadata event")));
  // Slices that do not nest are known only at the end: the reader refuses the file then.
  const TempFile overlap("overlap.json", trace_text({capture, lifetime_line(19, 2, "0x1", 8)}, false, 2));
  expect_readers_agree_with_validate(overlap.path());
  EXPECT_THAT(kvremap::trace::validate_file(overlap.path()).problems,
              ::testing::ElementsAre(HasSubstr("event 2: alloc: overlaps event 1 (capture)")));
}

}  // namespace

// Numbers a JSON parser accepts but an integer field cannot hold saturate instead of being cast
// (undefined behaviour; found by the trace fuzz target).
TEST(TraceReaderRobustness, OutOfRangeNumbersInIntegerFieldsSaturate) {
  const nlohmann::json event = nlohmann::json::parse(
      R"({"a":1e71,"b":-1e71,"c":1.8446744073709552e19,"d":18446744073709551615,"e":3.5,"f":-2})");
  using kvremap::trace::detail::int_at;
  using kvremap::trace::detail::uint_at;
  EXPECT_EQ(int_at(event, "a"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(int_at(event, "b"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(int_at(event, "d"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(int_at(event, "f"), -2);
  EXPECT_EQ(uint_at(event, "a"), ~std::uint64_t{0});
  EXPECT_EQ(uint_at(event, "c"), ~std::uint64_t{0});
  EXPECT_EQ(uint_at(event, "d"), ~std::uint64_t{0});
  EXPECT_EQ(uint_at(event, "e"), 3u);
  EXPECT_EQ(uint_at(event, "f"), 0u);
}

// An event name with a control character (escaped in the JSON text) is reported on one line.
TEST(TraceReaderRobustness, ProblemsStayOneLineWhateverTheNamesHold) {
  const std::string text = std::string(R"([
{"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":1,"tid":1,"ts":0,"args":{"schema_version":2}}
,{"ph":"i","cat":"memory","name":"alloc\tx\ny","pid":1,"tid":1,"ts":1,"s":"t","args":{}}
)");
  const auto problems = problems_of(text, "names.json");
  ASSERT_FALSE(problems.empty());
  for (const std::string& p : problems)
    for (const char c : p) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << p;
}

// The KV placement counter's parts add up to the cache's size; validate says so where they do not.
TEST(TraceReaderRobustness, AKvCounterWhosePartsDoNotAddUpIsAProblem) {
  const auto text = [](const char* args) {
    return trace_text(
        {std::string(R"({"ph":"C","cat":"memory","pid":4242,"tid":4242,"ts":1,"name":"device 0 kv bytes","args":)") +
         args + "}"},
        true, 3);
  };
  EXPECT_EQ(problems_of(text(R"({"reserved":10,"device":4,"scratch":0,"host":6})"), "kv.json"),
            std::vector<std::string>{});
  const auto problems = problems_of(text(R"({"reserved":10,"device":4,"scratch":4,"host":6})"), "kv.json");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("device + scratch + host must equal reserved"));
  const auto missing = problems_of(text(R"({"reserved":10,"device":10})"), "kv.json");
  ASSERT_FALSE(missing.empty());
  EXPECT_THAT(missing[0], HasSubstr("scratch"));
}

// The hot-line scanner against the JSON parser: every hot event kind in the writer's exact shape,
// mistyped and odd variants, and each line cut at every byte, must read the same or fail the same.
namespace {

// The writer's hot lines (interpose/trace/hot_format.cpp format_hot_record), then the synthetic
// trace's key order.
const std::vector<std::string> kWriterHotLines = {
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":1.500,"args":{"api":"cudaMalloc","ptr":"0x7f0000200000","bytes":2097152,"device":0,"category":"other","phase":"loading","caller":"libc10_cuda.so"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":2.250,"args":{"api":"cuMemAlloc_v2","ptr":"0x7f0000400000","bytes":4096,"device":1,"category":"kv","phase":"kv_allocation"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"free","s":"t","ts":3.000,"args":{"api":"cudaFree","ptr":"0x7f0000200000","bytes":2097152,"device":0,"category":"other"}})",
    R"({"ph":"X","cat":"alloc","pid":7,"tid":10,"name":"alloc","ts":4.001,"dur":0.999,"args":{"api":"cudaMalloc","ptr":"0x7f0000600000","bytes":512,"device":0,"category":"other","phase":"loading","free_api":"cudaFree"}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":5.000,"name":"device 0 bytes","args":{"kv":0,"graph_pool":0,"graph_exec":0,"module":0,"async_pool":0,"vmm":0,"other":2097152}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":6.000,"name":"device 0 bytes","args":{"kv":4096,"graph_pool":0,"graph_exec":0,"module":0,"async_pool":0,"vmm":0,"other":0}})",
    R"({"ph":"i","cat":"alloc","name":"alloc","pid":4242,"tid":4242,"ts":1000,"s":"t","args":{"api":"cudaMalloc","ptr":"0x7f0000000000","bytes":2097152,"device":0,"category":"other","phase":"loading","caller":"libc10_cuda.so"}})",
    R"({"ph":"C","cat":"memory","name":"device 0 bytes","pid":4242,"tid":4242,"ts":1000,"args":{"kv":0,"other":2097152}})",
};

// Variants the scanner must leave to the parser or read exactly as it does.
const std::vector<std::string> kOddHotLines = {
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":7.000,"args":{"api":5,"ptr":"0x1","bytes":"many","device":"0","category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":18446744073709551615,"name":"free","s":"t","ts":8,"args":{"ptr":"0x1","bytes":18446744073709551615,"device":9223372036854775808,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":9.5e0,"args":{"ptr":"0x2","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":1e999,"args":{"ptr":"0x2","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":010,"args":{"ptr":"0x2","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":-1,"args":{"ptr":"0x2","bytes":-1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":1.,"args":{"ptr":"0x2","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":11,"args":{"ptr":"0x\u0032","bytes":1,"category":"oth\"er"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":12,"args":{"ptr":"0x3","bytes":1,"bytes":2,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","name":"free","ts":13,"args":{"ptr":"0x3","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","ts":14,"extra":1,"args":{"ptr":"0x3","bytes":1,"category":"other"}})",
    R"({ "ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","ts":15,"args":{"ptr":"0x3","bytes":1,"category":"other"}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","ts":16,"args":{"ptr":"0x3","bytes":1.5,"category":["other"]}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","ts":17,"args":{"ptr":"0x3","bytes":true,"category":null}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","ts":18})",
    R"({"ph":"i","cat":"alloc","pid":7,"name":"alloc","ts":19,"args":{"ptr":"0x3","bytes":1}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","args":{"ptr":"0x3","bytes":1}})",
    R"({"ph":"B","cat":"alloc","pid":7,"tid":9,"name":"free","ts":20,"args":{"ptr":"0x3","bytes":1}})",
    R"({"ph":"X","cat":"alloc","pid":7,"tid":9,"name":"free","ts":21,"dur":1,"args":{"ptr":"0x3","bytes":1}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":22,"name":"device 1x bytes","args":{"kv":1}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":23,"name":"device 999999999 bytes","args":{"kv":1}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":24,"name":"device 0 bytes","args":{"kv":"1","other":3}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":25,"name":"device 0 bytes","args":{}})",
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":26,"name":"device 0 bytes","args":{"kv":1,"vmm":2}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":27,"args":{"ptr":"0x4","bytes":1,"category":"caf)"
    "\xc3\xa9"
    R"("}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":28,"args":{"ptr":"0x4","bytes":1}}})",
    R"({"ph":"i","cat":"alloc","pid":7,"tid":9,"name":"alloc","s":"t","ts":29,"args":{"ptr":"0x4","bytes":1}}x)",
    // The writer's KV placement counter: not a hot line, the parser's.
    R"({"ph":"C","cat":"memory","pid":7,"tid":9,"ts":6.000,"name":"device 0 kv bytes","args":{"reserved":8192,"device":0,"scratch":8192,"host":0}})",
};

// Everything the reader made of a trace, as text, so that two reads compare in one assertion.
std::string describe(const Trace& trace) {
  std::string out;
  const auto ref = [](const kvremap::trace::EventRef& e) {
    return std::to_string(e.index) + "@" + std::to_string(e.line) + " ts " + std::to_string(e.ts_us) + " tid " +
           std::to_string(e.tid);
  };
  const auto memory = [&](const char* what, const kvremap::trace::MemoryEvent& m) {
    out += std::string(what) + " " + ref(m.event) + " " + m.api + "|" + m.ptr + "|" + std::to_string(m.bytes) + "|" +
           std::to_string(m.device) + "|" + m.category + "|" + m.phase + "|" + m.caller + "|" +
           std::to_string(m.lifetime) + "\n";
  };
  for (const auto& m : trace.allocs) memory("alloc", m);
  for (const auto& m : trace.frees) memory("free", m);
  for (const auto& c : trace.counters) {
    out += "counter " + ref(c.event) + " device " + std::to_string(c.device);
    for (const auto& [name, bytes] : c.bytes_by_category) out += " " + name + "=" + std::to_string(bytes);
    out += "\n";
  }
  for (const auto& c : trace.kv_counters) {
    out += "kv counter " + ref(c.event) + " device " + std::to_string(c.device);
    for (const auto& [name, bytes] : c.bytes_by_category) out += " " + name + "=" + std::to_string(bytes);
    out += "\n";
  }
  for (const auto& o : trace.other_events)
    out += "other " + ref(o.event) + " " + o.ph + "|" + o.cat + "|" + o.name + "|" + o.args.dump() + "\n";
  if (trace.memory) {
    for (const auto& s : trace.memory->steps) {
      out += "step " + std::to_string(s.ts_us) + " " + std::to_string(s.order) + " " +
             trace.memory->name(s.key) + " " + trace.memory->name(s.category) + " " + trace.memory->name(s.caller) +
             " " + std::to_string(s.bytes) + " " + std::to_string(s.device) + " " +
             std::to_string(static_cast<int>(s.kind)) + " " + std::to_string(s.release) + "\n";
    }
  }
  out += "events " + std::to_string(trace.event_count) + " truncated " + std::to_string(trace.truncated) +
         " complete " + std::to_string(trace.complete) + "\n";
  return out;
}

// The trace as read, or the error it gave.
std::string outcome(const std::string& text, bool scan, bool timeline_only, bool every_counter) {
  kvremap::trace::ReadOptions options;
  options.keep_raw_events = false;
  options.scan_hot_lines = scan;
  options.memory_timeline_only = timeline_only;
  options.keep_every_counter_sample = every_counter;
  try {
    return describe(parse_trace(text, "t.json", options));
  } catch (const TraceError& error) {
    return std::string("error: ") + error.what();
  }
}

void expect_same_as_parser(const std::string& text) {
  for (const bool timeline_only : {false, true}) {
    for (const bool every_counter : {false, true}) {
      EXPECT_EQ(outcome(text, true, timeline_only, every_counter), outcome(text, false, timeline_only, every_counter))
          << text;
    }
  }
}

TEST(TraceReaderHotLines, ScannerTakesEveryWriterHotLine) {
  for (const std::string& line : kWriterHotLines) {
    kvremap::trace::detail::ScannedEvent event;
    EXPECT_TRUE(kvremap::trace::detail::scan_hot_line(line, event)) << line;
  }
  kvremap::trace::detail::ScannedEvent event;
  ASSERT_TRUE(kvremap::trace::detail::scan_hot_line(kWriterHotLines[3], event));
  EXPECT_EQ(event.ph, "X");
  EXPECT_EQ(event.ts_us, 4.001);
  EXPECT_EQ(event.dur_us, 0.999);
  EXPECT_EQ(event.tid, 10);
  EXPECT_EQ(event.string_arg("free_api"), "cudaFree");
  EXPECT_EQ(event.uint_arg("bytes"), 512U);
  EXPECT_EQ(event.string_arg("bytes"), "");
  EXPECT_EQ(event.uint_arg("api"), 0U);
}

TEST(TraceReaderHotLines, ScannerLeavesOtherEventsToTheParser) {
  for (const std::string& line :
       {kHeaderLine, std::string(R"({"ph":"i","cat":"checkpoint","name":"memory query","pid":7,"tid":7,"ts":1,"args":{}})"),
        kOddHotLines[7], kOddHotLines[8], kOddHotLines[11], kOddHotLines[24], kOddHotLines.back()}) {
    kvremap::trace::detail::ScannedEvent event;
    EXPECT_FALSE(kvremap::trace::detail::scan_hot_line(line, event)) << line;
  }
}

TEST(TraceReaderHotLines, ScannedTraceReadsAsParsed) {
  std::vector<std::string> lines = kWriterHotLines;
  lines.insert(lines.end(), kOddHotLines.begin(), kOddHotLines.end());
  for (const std::string& line : lines) {
    // Alone, closed and unclosed (a killed process), and between two good lines (an error if unparsable).
    expect_same_as_parser(trace_text({line}));
    expect_same_as_parser(trace_text({line}, false));
    expect_same_as_parser(trace_text({kWriterHotLines[0], line, kWriterHotLines[2]}));
  }
  expect_same_as_parser(trace_text(lines));
}

TEST(TraceReaderHotLines, CutHotLinesReadAsParsed) {
  for (const std::string& line : kWriterHotLines) {
    for (std::size_t length = 0; length < line.size(); ++length) {
      const std::string cut = line.substr(0, length);
      // As a killed process's last line: the tail is ignored; followed by another line: the same error.
      expect_same_as_parser(trace_text({kWriterHotLines[0], cut}, false));
      expect_same_as_parser(trace_text({cut, kWriterHotLines[2]}));
    }
  }
}

}  // namespace

namespace {

TEST(TraceReaderKvEvents, ReadsEachKindOnceAndLeavesMistypedFieldsEmpty) {
  const Trace trace = parse_trace(
      trace_text({
          R"({"ph":"i","cat":"kv","pid":7,"tid":7,"ts":1,"name":"kv deferred","s":"g","args":{"device":0,"regions":4,"tensor_bytes":1024,"deferred_bytes":4096,"scratch_bytes":2048}})",
          R"({"ph":"i","cat":"kv","pid":7,"tid":7,"ts":2,"name":"kv committed","s":"g","args":{"device":0,"kv_bytes":4096,"device_bytes":3072,"host_bytes":1024,"margin_bytes":-5,"trigger":"query","post_kv_peaks":{"other":{"at_kv_end":1,"peak":3,"peak_above":2}}}})",
          R"({"ph":"i","cat":"kv","pid":7,"tid":7,"ts":3,"name":"kv sizing adjusted","s":"g","args":{"shift_bytes":1.5,"profile":"p.json","device":"0"}})",
          R"({"ph":"i","cat":"kv","pid":7,"tid":7,"ts":4,"name":"kv something new","s":"g","args":{"device":1,"host_bytes":-1}})",
      }),
      "kv.json");
  const std::vector<kvremap::trace::KvEvent> events = kvremap::trace::kv_events(trace);
  using Kind = kvremap::trace::KvEvent::Kind;
  ASSERT_EQ(events.size(), 4U);
  EXPECT_EQ(events[0].kind, Kind::deferred);
  EXPECT_EQ(events[0].regions, 4U);
  EXPECT_EQ(events[0].deferred_bytes, 4096U);
  EXPECT_EQ(events[0].scratch_bytes, 2048U);
  EXPECT_FALSE(events[0].kv_bytes.has_value());
  EXPECT_EQ(events[1].kind, Kind::committed);
  EXPECT_EQ(events[1].margin_bytes, -5);
  EXPECT_EQ(events[1].trigger, "query");
  EXPECT_TRUE(events[1].has_post_kv_peaks);
  ASSERT_EQ(events[1].post_kv_peaks.size(), 1U);
  EXPECT_EQ(events[1].post_kv_peaks[0].category, "other");
  EXPECT_EQ(events[1].post_kv_peaks[0].peak_above, 2U);
  EXPECT_EQ(events[1].event.ts_us, 2);
  // A float or a string where an integer belongs is unknown, not truncated or zero.
  EXPECT_EQ(events[2].kind, Kind::sizing_adjusted);
  EXPECT_FALSE(events[2].shift_bytes.has_value());
  EXPECT_FALSE(events[2].device.has_value());
  EXPECT_EQ(events[2].profile, "p.json");
  EXPECT_EQ(events[3].kind, Kind::other);
  EXPECT_EQ(events[3].name, "kv something new");
  EXPECT_EQ(events[3].device, 1);
  EXPECT_FALSE(events[3].host_bytes.has_value());
}


// The writer's last event when the file could not grow: the reader keeps why and when, and the
// checks want its error to be a string.
TEST(TraceReaderStop, ATraceStoppedEventSaysWhyAndWhenAndAHeaderOnlyTraceIsEmpty) {
  const std::string stop =
      R"({"ph":"i","cat":"kvremap","name":"trace stopped","pid":7,"tid":0,"ts":2500.5,"s":"p","args":{"error":"File too large"}})";
  const Trace trace = parse_trace(trace_text({alloc_line(1, "0x1", 8, "kv"), stop}, false), "t");
  EXPECT_EQ(trace.stopped, "File too large");
  EXPECT_EQ(trace.stopped_at_us, 2500.5);
  EXPECT_EQ(trace.metadata_events, 1u);
  EXPECT_EQ(trace.event_count, 3u);
  std::string bad = stop;
  bad.replace(bad.find(R"("File too large")"), 16, "27");
  EXPECT_THAT(problems_of(trace_text({bad}, false), "t"),
              ::testing::ElementsAre("t: event 1: trace stopped: args.error: expected a string, found 27 (line 3)"));
  const Trace empty = parse_trace(trace_text({}, false), "t");
  EXPECT_EQ(empty.event_count, empty.metadata_events);
  EXPECT_TRUE(empty.stopped.empty());
  EXPECT_THAT(problems_of(trace_text({}, false), "t"), ::testing::IsEmpty());
}

// Problems found before a line that ends the reading are listed, that line last: so the first line
// validate prints is where a reader stops.
TEST(TraceReaderStop, ProblemsBeforeAnUnreadableLineComeFirstAndItLast) {
  const std::string text = trace_text({alloc_line(1, "0x1", 8, "weights"), "{not json", alloc_line(2, "0x2", 8, "kv")});
  EXPECT_THAT(problems_of(text, "t"),
              ::testing::ElementsAre(HasSubstr("t: event 1: alloc: args.category: expected one of"),
                                     HasSubstr("t: line 4: not a JSON event")));
  try {
    parse_trace(text, "t");
    ADD_FAILURE() << "read a trace with problems";
  } catch (const kvremap::trace::SchemaError& error) {
    EXPECT_EQ(std::string(error.what()), problems_of(text, "t").front());
  }
  // With no problem before it, the unreadable line is the TraceError it always was.
  EXPECT_THROW(kvremap::trace::validate_text(trace_text({"{not json", alloc_line(2, "0x2", 8, "kv")}), "t"),
               TraceError);
}

// A hot line the scanner takes and calls conforming gets no problem from the full checks.
TEST(TraceReaderHotLines, ALineTheScanCallsConformingHasNoProblem) {
  std::vector<std::string> lines = kWriterHotLines;
  lines.insert(lines.end(), kOddHotLines.begin(), kOddHotLines.end());
  std::size_t conforming = 0;
  for (const int schema : {1, 2}) {
    for (const std::string& line : lines) {
      kvremap::trace::detail::ScannedEvent event;
      if (!kvremap::trace::detail::scan_hot_line(line, event) ||
          !kvremap::trace::detail::hot_line_conforms(event, schema))
        continue;
      ++conforming;
      kvremap::trace::ReadOptions json_only{.keep_raw_events = false, .scan_hot_lines = false};
      EXPECT_NO_THROW(parse_trace(trace_text({line}, true, schema), "t", json_only)) << line;
    }
  }
  EXPECT_GE(conforming, 12u) << "the writer's lines conform";
}

// "cat" is optional and of any type in the schema: an event whose "cat" is not a string reads and
// validates, even under the name the writer gives its "trace stopped" event, which then is not it.
TEST(TraceReaderFieldTypes, ACatThatIsNotAStringIsReadAndValid) {
  const std::string header =
      "[\n"
      R"({"ph":"M","cat":"kvremap","name":"kvremap_trace","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,)"
      R"("library_version":"0","hostname":"h","pid":7,"ppid":1,"cmdline":"c","start_unix_ns":1,"options":{}}})"
      "\n";
  for (const char* cat : {"5", "{\"x\":1}", "null", "[\"kvremap\"]"}) {
    const std::string text = header + R"(,{"ph":"i","s":"g","cat":)" + cat +
                             R"(,"name":"trace stopped","pid":7,"tid":7,"ts":1,"args":{"error":"x"}})" + "\n]\n";
    const Trace trace = parse_trace(text, "t.json");
    EXPECT_EQ(trace.event_count, 2u) << cat;
    EXPECT_EQ(trace.stopped, "") << cat;
    EXPECT_THAT(kvremap::trace::validate(trace), ::testing::IsEmpty()) << cat;
  }
}

}  // namespace
