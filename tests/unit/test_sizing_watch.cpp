// `kvremap size`'s watch of a start's traces: when every process that deferred its KV cache has committed it and
// written its profile, lines read whole only, and the line a sizing run ends with.
#include "tools/sizing_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

using kvremap::run::SizingWatch;

constexpr const char* kDeferred = R"(,{"ph":"i","s":"g","cat":"kv","name":"kv deferred","pid":7,"tid":7,"ts":1,"args":{"device":DEV,"deferred_bytes":100}})";
constexpr const char* kCommitted = R"(,{"ph":"i","s":"g","cat":"kv","name":"kv committed","pid":7,"tid":7,"ts":2,"args":{"device":DEV,"kv_bytes":3221225472,"device_bytes":2147483648,"host_bytes":1073741824}})";
constexpr const char* kWritten = R"(,{"ph":"i","s":"g","cat":"kv","name":"kv profile written","pid":7,"tid":7,"ts":3,"args":{"device":DEV,"path":"/p/vllm-1-rank0.json","key_hash":"0000000000000001"}})";

std::string on(const char* line, int device) {
  std::string text = line;
  text.replace(text.find("DEV"), 3, std::to_string(device));
  return text;
}

TEST(SizingWatch, MeasuredOnlyOnceEveryDeferredDeviceHasCommittedAndWrittenItsProfile) {
  SizingWatch watch;
  EXPECT_FALSE(watch.measured()) << "nothing deferred yet";
  watch.feed_line("a.json", on(kDeferred, 0));
  watch.feed_line("b.json", on(kDeferred, 1));
  EXPECT_FALSE(watch.measured());
  watch.feed_line("a.json", on(kCommitted, 0));
  watch.feed_line("a.json", on(kWritten, 0));
  EXPECT_FALSE(watch.measured()) << "b.json's device 1 has not committed";
  watch.feed_line("b.json", on(kCommitted, 1));
  EXPECT_FALSE(watch.measured()) << "committed, profile not yet written";
  const auto before = watch.progress();
  watch.feed_line("b.json", on(kWritten, 1));
  EXPECT_TRUE(watch.measured());
  EXPECT_GT(watch.progress(), before);
  ASSERT_EQ(watch.devices().size(), 2u);
  EXPECT_EQ(watch.devices()[0].host_bytes, 1073741824u);
}

TEST(SizingWatch, AProfileWrittenBeforeAnyCommitIsNotAMeasurement) {
  SizingWatch watch;
  watch.feed_line("a.json", on(kDeferred, 0));
  watch.feed_line("a.json", on(kWritten, 0));
  EXPECT_FALSE(watch.measured());
}

TEST(SizingWatch, OtherEventsForgedTextAndBrokenLinesCountForNothing) {
  SizingWatch watch;
  // The words inside another event's string are not an event; a line cut off does not parse.
  watch.feed_line("a.json", R"(,{"ph":"i","cat":"alloc","name":"alloc","args":{"caller":"\"cat\":\"kv\" kv deferred"}})");
  watch.feed_line("a.json", std::string(on(kDeferred, 0)).substr(0, 40));
  EXPECT_TRUE(watch.devices().empty());
  watch.feed_line("a.json", R"({"ph":"i","cat":"kv","name":"kv nothing deferred","args":{"reason":"no allocation"}})");
  EXPECT_EQ(watch.nothing_deferred(), "no allocation");
}

TEST(SizingWatch, PollReadsOnlyWholeLinesOfNewTraces) {
  const std::string dir = std::filesystem::temp_directory_path() / ("sizing-watch-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/kvremap-h-1.json") << on(kDeferred, 0) << "\n" << on(kCommitted, 0) << "\n";
  std::ofstream(dir + "/kvremap-h-old.json") << on(kDeferred, 3) << "\n";
  SizingWatch watch;
  watch.poll(dir, {"kvremap-h-old.json"});
  ASSERT_EQ(watch.devices().size(), 1u) << "the file there before the start is not read";
  const std::string written = on(kWritten, 0);
  {
    std::ofstream out(dir + "/kvremap-h-1.json", std::ios::app);
    out << written.substr(0, 30);  // half a line: not yet an event
  }
  watch.poll(dir, {"kvremap-h-old.json"});
  EXPECT_FALSE(watch.measured());
  {
    std::ofstream out(dir + "/kvremap-h-1.json", std::ios::app);
    out << written.substr(30) << "\n";
  }
  watch.poll(dir, {"kvremap-h-old.json"});
  EXPECT_TRUE(watch.measured());
  std::filesystem::remove_all(dir);
}

TEST(SizingWatch, TheLineSaysWhatEachProcessHoldsAndWhereItsProfileIs) {
  SizingWatch one;
  one.feed_line("a.json", on(kDeferred, 0));
  one.feed_line("a.json", on(kCommitted, 0));
  one.feed_line("a.json", on(kWritten, 0));
  EXPECT_EQ(kvremap::run::sizing_line(one.devices()),
            "measured 1 process: device 0 holds 2.00 GiB of KV on the device, 1.00 GiB on host memory; profile "
            "written: /p/vllm-1-rank0.json");
  SizingWatch two = one;
  two.feed_line("b.json", on(kDeferred, 1));
  two.feed_line("b.json", on(kCommitted, 1));
  two.feed_line("b.json", on(kWritten, 1));
  EXPECT_EQ(kvremap::run::sizing_line(two.devices()),
            "measured 2 processes: each holds 2.00 GiB of KV on the device, 2.00 GiB on host memory in all; 2 profiles "
            "written in /p");
}

}  // namespace
