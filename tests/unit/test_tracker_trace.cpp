// The tracker's records as the trace shows them, in-process with a real trace file: every free it counts has its event.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "interpose/base/library.h"
#include "interpose/trace/events.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/track_events.h"
#include "interpose/track/tracker.h"
#include "interpose/track/tracking_state.h"
#include "tools/trace/trace_reader.h"

namespace kvremap::interpose {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kMiB = 1ULL << 20;

// The trace file this process created: kvremap-HOST-PID[.N].json in KVREMAP_TRACE_DIR.
std::string this_process_trace() {
  const std::string pid = "-" + std::to_string(getpid());
  for (const auto& entry : fs::directory_iterator(options().trace_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kvremap-", 0) == 0 && name.find(pid + ".") != std::string::npos) return entry.path().string();
  }
  return {};
}

// The driver handed an address out again before kvremap saw it freed (a free made while tracking was off:
// another thread's, once the process's exit had begun). The counters retire the old record; the trace
// gets its free event too, so a replay of the events agrees with the summary.
TEST(TrackerTrace, AnAddressReusedBeforeItsFreeWasSeenGetsAFreeEventAndTheSummaryAgrees) {
  ASSERT_TRUE(options().trace) << "run with KVREMAP_TRACE_DIR set (tests/unit/CMakeLists.txt)";
  fs::create_directories(options().trace_dir);
  auto* fresh = new tracker_detail::State;
  fresh->trace_opened.store(true);  // this test opens the file itself
  tracker_detail::g_state.replace(fresh);
  trace_events::open_trace();
  ASSERT_TRUE(trace().is_open());
  const std::uint64_t ptr = 0x7f0000400000;
  on_alloc(ptr, 3 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_alloc(ptr, 1 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  trace().close(tracker_detail::summary_json("atexit"));

  const std::string path = this_process_trace();
  ASSERT_FALSE(path.empty());
  const trace::Trace t = trace::read_trace(path);
  const std::vector<std::string> problems = trace::validate(t);
  EXPECT_TRUE(problems.empty()) << problems.front();
  ASSERT_EQ(t.frees.size(), 1u);
  EXPECT_EQ(t.frees[0].api, kUnseenFreeApi);
  EXPECT_EQ(t.frees[0].bytes, 3 * kMiB);
  ASSERT_EQ(t.allocs.size(), 2u);
  ASSERT_TRUE(t.summary.has_value());
  const auto& other = t.summary->devices.at(0).categories.at("other");
  EXPECT_EQ(other.frees, 1u);
  EXPECT_EQ(other.allocations, 2u);
  EXPECT_EQ(trace::replay_live_bytes(t).devices.at(0).at("other").live_bytes, other.live_bytes);
  EXPECT_EQ(other.live_bytes, 1 * kMiB);
  std::error_code ignored;
  fs::remove(path, ignored);
}

}  // namespace
}  // namespace kvremap::interpose
