// KVREMAP_METRICS_FILE's text: samples per process and device, several processes merged into one file with each
// family grouped once, dead processes dropped, and read back as `kvremap status` reads it.
#include "policy/metrics_text.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

using kvremap::policy::DeviceMetrics;
using kvremap::policy::merged_metrics_file;
using kvremap::policy::metrics_samples;
using kvremap::policy::parse_metrics_file;
using kvremap::policy::ProcessMetrics;

ProcessMetrics process(std::int64_t pid, std::string title, std::uint64_t device_bytes) {
  DeviceMetrics d;
  d.device = 0;
  d.kv_requested_bytes = 100;
  d.kv_device_bytes = device_bytes;
  d.kv_host_bytes = 100 - device_bytes;
  d.phase = "serving";
  d.overflows = 2;
  d.overflow_bytes = 64;
  d.committed_at = 1796626089;
  return ProcessMetrics{pid, std::move(title), {d}};
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(MetricsText, AProcessSamplesCarryItsPidTitleAndDevice) {
  const std::string samples = metrics_samples(process(42, "VLLM::EngineCore", 90));
  EXPECT_NE(samples.find("kvremap_kv_device_bytes{pid=\"42\",title=\"VLLM::EngineCore\",device=\"0\"} 90\n"),
            std::string::npos)
      << samples;
  EXPECT_NE(samples.find("kvremap_phase{pid=\"42\",title=\"VLLM::EngineCore\",device=\"0\",phase=\"serving\"} 1\n"),
            std::string::npos);
  EXPECT_NE(samples.find("kvremap_up{pid=\"42\",title=\"VLLM::EngineCore\"} 1\n"), std::string::npos);
}

TEST(MetricsText, LabelValuesAreEscapedAsTheFormatRequires) {
  const std::string samples = metrics_samples(process(7, "a\"b\\c\nd", 1));
  EXPECT_NE(samples.find(R"(title="a\"b\\c\nd")"), std::string::npos) << samples;
  const auto parsed = parse_metrics_file(merged_metrics_file("", 7, samples, [](std::int64_t) { return true; }));
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].title, "a\"b\\c\nd");
}

TEST(MetricsText, MergingReplacesItsOwnLinesKeepsLiveOthersAndDropsTheDead) {
  const auto alive = [](std::int64_t pid) { return pid != 3; };
  std::string file = merged_metrics_file("", 1, metrics_samples(process(1, "one", 10)), alive);
  file = merged_metrics_file(file, 2, metrics_samples(process(2, "two", 20)), alive);
  file = merged_metrics_file(file, 3, metrics_samples(process(3, "three", 30)), alive);
  file = merged_metrics_file(file, 1, metrics_samples(process(1, "one", 11)), alive);  // pid 3 has ended
  EXPECT_EQ(count_of(file, "# TYPE kvremap_kv_device_bytes gauge\n"), 1u) << file;
  EXPECT_EQ(count_of(file, "# TYPE kvremap_serving_overflows_total counter\n"), 1u);
  // Each family's samples follow its TYPE line, before the next family's.
  const std::size_t type = file.find("# TYPE kvremap_kv_device_bytes gauge\n");
  const std::size_t next = file.find("# HELP", type);
  const std::string family = file.substr(type, next - type);
  EXPECT_EQ(count_of(family, "kvremap_kv_device_bytes{"), 2u) << family;
  const auto parsed = parse_metrics_file(file);
  std::set<std::int64_t> pids;
  for (const auto& p : parsed) pids.insert(p.pid);
  EXPECT_EQ(pids, (std::set<std::int64_t>{1, 2}));
  for (const auto& p : parsed) {
    ASSERT_EQ(p.devices.size(), 1u);
    EXPECT_EQ(p.devices[0].kv_device_bytes, p.pid == 1 ? 11u : 20u) << "the newest figures of each process";
    EXPECT_EQ(p.devices[0].overflows, 2u);
    EXPECT_EQ(p.devices[0].phase, "serving");
    EXPECT_EQ(p.devices[0].committed_at, 1796626089);
  }
}

TEST(MetricsText, LinesThatAreNotKvremapsSamplesAreDropped) {
  const std::string foreign = "# HELP node_load1 x\nnode_load1 0.5\nkvremap_kv_device_bytes{pid=\"x\"} 5\ngarbage\n";
  const std::string file = merged_metrics_file(foreign, 1, metrics_samples(process(1, "one", 10)),
                                               [](std::int64_t) { return true; });
  EXPECT_EQ(file.find("node_load1"), std::string::npos);
  EXPECT_EQ(file.find("garbage"), std::string::npos);
  EXPECT_EQ(file.find("pid=\"x\""), std::string::npos);
  EXPECT_EQ(parse_metrics_file(file).size(), 1u);
}

}  // namespace
