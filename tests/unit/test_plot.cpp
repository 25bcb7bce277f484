// `kvremap plot`: round ticks, labels clear of each other, the KV cache at its reserved size, --align start,
// and the HTML, SVG and PNG outputs written by the CLI (the PNG read back with cairo).
#include <cairo.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tools/analysis.h"
#include "tools/plot.h"
#include "tools/plot/scene.h"
#include "tools/plot/svg.h"
#include "tools/plot/ticks.h"
#include "tools/trace/trace_reader.h"

namespace {

using kvremap::analysis::analyse;
using kvremap::analysis::ProcessFigures;
using kvremap::plot::Align;
using kvremap::plot::build_scene;
using kvremap::plot::Panel;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string data_trace(const std::string& name) { return std::string(KVREMAP_SOURCE_DIR) + "/tests/data/traces/" + name; }

std::string header(long long start_unix_ns = 1735689600000000000LL, std::uint64_t total = 80 * kGiB) {
  return "[\n{\"ph\":\"M\",\"cat\":\"kvremap\",\"name\":\"kvremap_trace\",\"pid\":7,\"tid\":1,\"ts\":0,\"args\":{"
         "\"schema_version\":2,\"library_version\":\"0.1.0\",\"hostname\":\"h\",\"pid\":7,\"ppid\":1,\"cmdline\":"
         "\"vllm serve m\",\"start_unix_ns\":" +
         std::to_string(start_unix_ns) +
         ",\"options\":{}}}\n,{\"ph\":\"M\",\"cat\":\"kvremap\",\"name\":\"kvremap_device\",\"pid\":7,\"tid\":1,"
         "\"ts\":0,\"args\":{\"device\":0,\"total_bytes\":" +
         std::to_string(total) + "}}\n";
}

std::string phase(double ts, const std::string& to, const std::string& from) {
  return ",{\"ph\":\"i\",\"cat\":\"phase\",\"name\":\"phase: " + to + "\",\"pid\":7,\"tid\":1,\"ts\":" +
         std::to_string(ts) + ",\"s\":\"g\",\"args\":{\"phase\":\"" + to + "\",\"previous\":\"" + from +
         "\",\"reason\":\"test\"}}\n";
}

std::string alloc(double ts, const std::string& ptr, std::uint64_t bytes, const std::string& category) {
  return ",{\"ph\":\"i\",\"cat\":\"alloc\",\"name\":\"alloc\",\"pid\":7,\"tid\":1,\"ts\":" + std::to_string(ts) +
         ",\"s\":\"t\",\"args\":{\"api\":\"cudaMalloc\",\"ptr\":\"" + ptr + "\",\"bytes\":" + std::to_string(bytes) +
         ",\"device\":0,\"category\":\"" + category + "\",\"phase\":\"loading\"}}\n";
}

// A crowded start: many short phases, every category peaking close together.
std::string crowded_start() {
  std::string t = header();
  std::string previous = "init";
  const char* categories[] = {"other", "async_pool", "vmm", "module", "graph_exec", "graph_pool"};
  const char* phases[] = {"loading", "profiling", "kv_allocation", "post_kv_warmup", "capture", "serving"};
  for (int i = 0; i < 40; ++i) {
    const std::string name = phases[i % 6];
    t += phase(1000.0 + i * 50, name, previous);
    t += alloc(1010.0 + i * 50, "0x" + std::to_string(100 + i), (1 + i % 6) * 64 * kMiB, categories[i % 6]);
    previous = name;
  }
  return t + "]\n";
}

// A defer-mode start: a 40 GiB KV reserved on a 64 MiB scratch from 2 ms, committed at 10 ms with 1 GiB
// on the host (docs/trace-format.md, KV events); without `commit`, the process ends deferred.
std::string deferred_start(long long start_unix_ns = 1735689600000000000LL, bool commit = true) {
  std::string t = header(start_unix_ns) + phase(100, "loading", "init") + alloc(200, "0x1", 2 * kGiB, "other");
  t += phase(1500, "kv_allocation", "loading");
  t += ",{\"ph\":\"i\",\"cat\":\"kv\",\"name\":\"kv deferred\",\"pid\":7,\"tid\":1,\"ts\":2000,\"s\":\"g\",\"args\":"
       "{\"device\":0,\"regions\":4,\"tensor_bytes\":" +
       std::to_string(10 * kGiB) + ",\"deferred_bytes\":" + std::to_string(40 * kGiB) +
       ",\"scratch_bytes\":" + std::to_string(64 * kMiB) + "}}\n";
  t += alloc(2100, "0x2", 40 * kGiB, "kv");
  t += phase(5000, "serving", "kv_allocation");
  if (!commit) return t + "]\n";
  t += ",{\"ph\":\"i\",\"cat\":\"kv\",\"name\":\"kv committed\",\"pid\":7,\"tid\":1,\"ts\":10000,\"s\":\"g\",\"args\":"
       "{\"device\":0,\"trigger\":\"graph launch\",\"kv_bytes\":" +
       std::to_string(40 * kGiB) + ",\"device_bytes\":" + std::to_string(39 * kGiB) +
       ",\"host_bytes\":" + std::to_string(kGiB) + ",\"tensors\":4,\"granularity\":2097152}}\n";
  t += alloc(12000, "0x3", 256 * kMiB, "graph_pool");
  return t + "]\n";
}

ProcessFigures figures(const std::string& text, const std::string& source = "t") {
  return analyse(kvremap::trace::parse_trace(text, source));
}

std::vector<double> values(const std::vector<kvremap::plot::Tick>& ticks) {
  std::vector<double> out;
  for (const auto& t : ticks) out.push_back(t.value);
  return out;
}
std::vector<std::string> labels(const std::vector<kvremap::plot::Tick>& ticks) {
  std::vector<std::string> out;
  for (const auto& t : ticks) out.push_back(t.label);
  return out;
}

TEST(PlotTicks, BytesAtPowerOfTwoStepsInBinaryUnits) {
  const std::vector<std::string> by_16 = {"0", "16 GiB", "32 GiB", "48 GiB", "64 GiB", "80 GiB"};
  EXPECT_EQ(labels(kvremap::plot::byte_ticks(80 * kGiB)), by_16);
  // An H100's 79.19 GiB: the axis ends at the next round tick, the capacity is a line of its own.
  EXPECT_EQ(labels(kvremap::plot::byte_ticks(85'030'000'000ULL)), by_16);
  EXPECT_EQ(values(kvremap::plot::byte_ticks(85'030'000'000ULL)).back(), static_cast<double>(80 * kGiB));
  // A deferred KV's reserved size above an H100's capacity: still 16 GiB steps.
  EXPECT_EQ(labels(kvremap::plot::byte_ticks(84 * kGiB)),
            (std::vector<std::string>{"0", "16 GiB", "32 GiB", "48 GiB", "64 GiB", "80 GiB", "96 GiB"}));
  EXPECT_EQ(labels(kvremap::plot::byte_ticks(2 * kGiB + 1)),
            (std::vector<std::string>{"0", "512 MiB", "1 GiB", "1.5 GiB", "2 GiB", "2.5 GiB"}));
  EXPECT_EQ(labels(kvremap::plot::byte_ticks(1000)), (std::vector<std::string>{"0", "256 B", "512 B", "768 B", "1 KiB"}));
  for (const std::uint64_t top : {std::uint64_t{1}, 3 * kMiB, 141 * kGiB, 7 * kGiB + 5}) {
    const auto ticks = kvremap::plot::byte_ticks(top);
    EXPECT_LE(ticks.size(), 7u) << top;
    EXPECT_GE(ticks.back().value, static_cast<double>(top)) << top;
  }
}

TEST(PlotTicks, SecondsAtOneTwoFiveSteps) {
  EXPECT_EQ(labels(kvremap::plot::second_ticks(0, 73.4e6)),
            (std::vector<std::string>{"0 s", "10 s", "20 s", "30 s", "40 s", "50 s", "60 s", "70 s"}));
  EXPECT_EQ(labels(kvremap::plot::second_ticks(0, 20'000)),
            (std::vector<std::string>{"0.000 s", "0.005 s", "0.010 s", "0.015 s", "0.020 s"}));
  EXPECT_EQ(labels(kvremap::plot::second_ticks(1.5e6, 9e6)),
            (std::vector<std::string>{"2 s", "3 s", "4 s", "5 s", "6 s", "7 s", "8 s", "9 s"}));
}

// No two labels of a panel overlap, every one lies inside its panel, and what did not fit is named.
void expect_labels_clear(const Panel& panel) {
  const auto all = kvremap::plot::labels_of(panel);
  ASSERT_GT(all.size(), 10u);
  const kvremap::plot::Box bounds{0, 0, panel.width, panel.height};
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(all[i]->box().inside(bounds)) << all[i]->text;
    for (std::size_t j = i + 1; j < all.size(); ++j)
      EXPECT_FALSE(all[i]->box().overlaps(all[j]->box())) << "'" << all[i]->text << "' and '" << all[j]->text << "'";
  }
}

TEST(PlotScene, LabelsNeverOverlapOnACrowdedStartAndTheDroppedOnesAreInTheTables) {
  const ProcessFigures crowded = figures(crowded_start());
  ASSERT_EQ(crowded.devices[0].phases.size(), 41u);
  const auto scene = build_scene({crowded}, Align::wall);
  ASSERT_EQ(scene.panels.size(), 1u);
  expect_labels_clear(scene.panels[0]);
  // Forty phases in two milliseconds cannot all be named in the chart; those left out are in the page.
  ASSERT_FALSE(scene.panels[0].dropped_labels.empty());
  const std::string html = kvremap::plot::render_html({crowded});
  std::size_t rows = 0;
  for (auto at = html.find("<tr data-phase=\""); at != std::string::npos; at = html.find("<tr data-phase=\"", at + 1))
    ++rows;
  EXPECT_EQ(rows, crowded.devices[0].phases.size());
  EXPECT_NE(html.find("not labelled in the chart (no room; in the tables): " + scene.panels[0].dropped_labels.front()),
            std::string::npos);
  // A heading longer than the panel is cut to it on a whole character.
  const std::string cut = kvremap::plot::fit_text(std::string(200, 'x') + "\xc3\xa9\xc3\xa9", 14, 300);
  EXPECT_LE(kvremap::plot::text_width(cut, 14), 300.0);
  EXPECT_EQ(cut.substr(cut.size() - 3), "\xe2\x80\xa6");
  EXPECT_EQ(kvremap::plot::fit_text("short", 14, 300), "short");
  // The real example trace and the deferred start, each with its phases, peaks, capacity and commit.
  expect_labels_clear(build_scene({figures(slurp(data_trace("complete.json")))}, Align::wall).panels[0]);
  expect_labels_clear(build_scene({figures(deferred_start())}, Align::wall).panels[0]);
}

// The KV band while deferred is the KV's reserved 40 GiB, all of it on the scratch (hatched); after the
// commit 39 GiB on the device and 1 GiB on the host.
TEST(PlotScene, TheDeferredKvIsDrawnAtItsReservedSize) {
  const ProcessFigures p = figures(deferred_start());
  const Panel panel = build_scene({p}, Align::wall).panels[0];
  bool saw_deferred = false, saw_committed = false;
  for (const auto& [ts, stack] : panel.samples) {
    if (ts >= 2100 && ts < 10000) {
      saw_deferred = true;
      EXPECT_EQ(stack[7], 40 * kGiB) << ts;
      EXPECT_EQ(stack[6] + stack[8], 0u) << ts;
    } else if (ts >= 10000) {
      saw_committed = true;
      EXPECT_EQ(stack[6], 39 * kGiB) << ts;
      EXPECT_EQ(stack[8], kGiB) << ts;
    }
  }
  EXPECT_TRUE(saw_deferred);
  EXPECT_TRUE(saw_committed);
  // The scratch band is hatched and as tall as 40 GiB on the chart's scale (0 to 80 GiB over its height).
  bool hatched = false;
  for (const auto& m : panel.marks) {
    if (m.css_class != "area" || m.data.front().second != "kv_scratch") continue;
    const auto& path = std::get<kvremap::plot::Path>(m.shapes.front());
    hatched = path.style.hatched;
    double low = 1e9, high = -1e9;
    for (const auto& pt : path.points) {
      low = std::min(low, pt.y);
      high = std::max(high, pt.y);
    }
    EXPECT_NEAR(high - low, panel.plot.h * 40.0 / 80.0, 0.5);
  }
  EXPECT_TRUE(hatched) << "no kv_scratch band";
  const std::string html = kvremap::plot::render_html({p});
  for (const char* row : {"KV reserved", "KV on device", "KV on scratch", "KV on host"})
    EXPECT_NE(html.find("<tr data-kv=\"" + std::string(row) + "\">"), std::string::npos) << row;
  // Still deferred at the end: nothing on the device or the host, and no rows of zeros for them.
  const std::string deferred = kvremap::plot::render_html({figures(deferred_start(1, false))});
  EXPECT_NE(deferred.find("<tr data-kv=\"KV reserved\">"), std::string::npos);
  EXPECT_NE(deferred.find("<tr data-kv=\"KV on scratch\">"), std::string::npos);
  EXPECT_EQ(deferred.find("<tr data-kv=\"KV on device\">"), std::string::npos);
  EXPECT_EQ(deferred.find("<tr data-kv=\"KV on host\">"), std::string::npos);
}

// Two starts 100 s apart: on the wall clock the second is drawn 100 s later; aligned on their starts
// they are drawn over each other, on an axis as long as one start.
TEST(PlotScene, AlignStartDrawsStartsFromTheirOwnStart) {
  const ProcessFigures a = figures(deferred_start(), "a");
  const ProcessFigures b = figures(deferred_start(1735689600000000000LL + 100'000'000'000LL), "b");
  const auto wall = build_scene({a, b}, Align::wall);
  EXPECT_GT(wall.panels[0].t1_us, 100e6);
  const auto start = build_scene({a, b}, Align::start);
  ASSERT_EQ(start.panels.size(), 2u);
  EXPECT_LT(start.panels[1].t1_us, 1e6);
  EXPECT_EQ(start.panels[0].samples, start.panels[1].samples);
  EXPECT_EQ(start.panels[0].samples.front().first, 200.0) << "each start's own time";
  EXPECT_EQ(wall.panels[1].samples.front().first, 100e6 + 200.0);
}

struct Result {
  int exit_code = -1;
  std::string err;
};

// The CLI as a user runs it; stderr captured.
Result cli(const std::string& args) {
  const std::string err_path = std::filesystem::temp_directory_path() / ("kvremap-plot-err-" + std::to_string(getpid()));
  const int status = std::system((std::string(KVREMAP_CLI) + " " + args + " >/dev/null 2>" + err_path).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err_path)};
}

std::string temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("kvremap-plot-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(PlotCli, WritesAPngThatCairoReadsBackWithAPicture) {
  const std::string png = temp_dir() + "/p.png";
  const Result r = cli("plot " + data_trace("complete.json") + " -o " + png);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = slurp(png);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  cairo_surface_t* image = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(image), CAIRO_STATUS_SUCCESS);
  const int width = cairo_image_surface_get_width(image), height = cairo_image_surface_get_height(image);
  EXPECT_GE(width, 1000);
  EXPECT_GE(height, 300);
  cairo_surface_flush(image);
  const unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  std::set<std::uint32_t> colours;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) colours.insert(*reinterpret_cast<const std::uint32_t*>(data + y * stride + x * 4) & 0xFFFFFF);
  // The KV's blue is drawn: the chart, not a blank image.
  EXPECT_TRUE(colours.count(0x1e88e5)) << colours.size() << " colours";
  EXPECT_GT(colours.size(), 20u);
  cairo_surface_destroy(image);
}

TEST(PlotCli, WritesAWellFormedSvgWithThePanelsAndAlignsStarts) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/a.json") << deferred_start();
  std::ofstream(dir + "/b.json") << deferred_start(1735689600000000000LL + 100'000'000'000LL);
  const std::string svg = dir + "/p.svg";
  const Result r = cli("plot " + dir + "/a.json " + dir + "/b.json --align start -o " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Parsed as XML; both panels' stacked areas are the same drawing.
  const std::string check =
      "import sys, xml.etree.ElementTree as E\n"
      "ns = '{http://www.w3.org/2000/svg}'\n"
      "root = E.parse(sys.argv[1]).getroot()\n"
      "assert root.tag == ns + 'svg', root.tag\n"
      "panels = [g for g in root.iter(ns + 'g') if g.get('class') == 'panel']\n"
      "assert len(panels) == 2, len(panels)\n"
      "areas = [[a.find(ns + 'polygon').get('points') for a in p.iter(ns + 'g') if a.get('class') == 'area'] "
      "for p in panels]\n"
      "assert areas[0] and areas[0] == areas[1], 'the starts differ'\n"
      "assert any(a.get('data-series') == 'kv_scratch' for a in root.iter(ns + 'g'))\n";
  std::ofstream(dir + "/check.py") << check;
  EXPECT_EQ(std::system(("python3 " + dir + "/check.py " + svg).c_str()), 0);
  const Result wall = cli("plot " + dir + "/a.json " + dir + "/b.json -o " + dir + "/wall.svg");
  ASSERT_EQ(wall.exit_code, 0) << wall.err;
  EXPECT_NE(std::system(("python3 " + dir + "/check.py " + dir + "/wall.svg 2>/dev/null").c_str()), 0)
      << "on the wall clock the second start is drawn later";
}

TEST(PlotCli, AnUnknownExtensionOrAlignmentIsOneLineAndExitTwo) {
  const std::string dir = temp_dir();
  const Result pdf = cli("plot " + data_trace("complete.json") + " -o " + dir + "/p.pdf");
  EXPECT_EQ(pdf.exit_code, 2);
  EXPECT_EQ(pdf.err, "kvremap plot: " + dir + "/p.pdf: unknown extension .pdf: name the file .html (or .htm), .svg or .png\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/p.pdf"));
  const Result align = cli("plot " + data_trace("complete.json") + " --align late -o " + dir + "/p.html");
  EXPECT_EQ(align.exit_code, 2);
  EXPECT_EQ(std::count(align.err.begin(), align.err.end(), '\n'), 1) << align.err;
  EXPECT_NE(align.err.find("--align late"), std::string::npos) << align.err;
  EXPECT_NE(align.err.find("wall"), std::string::npos) << align.err;
  // A name without an extension (a device, a FIFO) is the page, as before.
  const Result page = cli("plot " + data_trace("complete.json") + " -o " + dir + "/page");
  EXPECT_EQ(page.exit_code, 0) << page.err;
  EXPECT_EQ(slurp(dir + "/page").rfind("<!DOCTYPE html>", 0), 0u);
}

}  // namespace
