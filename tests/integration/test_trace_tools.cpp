// kvremap report --json, plot, diff, merge and what-if on traces of the example engine (examples/vllm_like)
// started on the simulated driver: the tools agree with the engine's own printed figures, with each
// other, and what-if with actual starts at the settings it replays; the plot loads in headless chromium.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;
using nlohmann::json;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The engine's "%.2f GiB" of a byte count, as the example prints its KV size.
std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return text;
}

// The engine's KV figure from its "started, KV <n> GiB" line, or empty.
std::string started_kv(const std::string& out) {
  std::smatch m;
  static const std::regex started(R"(started, KV ([0-9.]+) GiB)");
  return std::regex_search(out, m, started) ? m[1].str() : std::string();
}

RunResult cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {KVREMAP_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, {}, {}, 120);
}

// One start of the seed scenario as vLLM at `utilization`; `mode` "stock" runs without the library.
struct Start {
  RunResult run;
  std::vector<std::string> traces;  // sorted: rank 0 first for multi-rank starts (lower pid)
};
Start start_seed(const std::string& utilization, const std::string& mode, int ranks = 1,
                 const std::vector<std::string>& extra_env = {}) {
  const std::string traces = make_temp_dir();
  std::vector<std::string> argv = {link_as(VLLM_LIKE, "vllm"), "--scenario", SEED_SCENARIO, "--gpu-memory-utilization",
                                   utilization};
  if (ranks > 1) argv.insert(argv.end(), {"--ranks", std::to_string(ranks)});
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, ranks);
  if (mode != "stock")
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=" + mode, "KVREMAP_TRACE_DIR=" + traces,
                           "KVREMAP_PROFILE_DIR=" + make_temp_dir()});
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  Start s{run_program(argv, env, {}, 240), trace_files(traces)};
  std::sort(s.traces.begin(), s.traces.end(), [](const std::string& a, const std::string& b) {
    return kvremap::trace::read_trace(a, {.keep_raw_events = false, .keep_records = false}).header.pid <
           kvremap::trace::read_trace(b, {.keep_raw_events = false, .keep_records = false}).header.pid;
  });
  return s;
}

// Two ranks of the seed at 0.95 under kvremap: the traces most tests read, made once.
const Start& seed_ranks() {
  static const Start s = start_seed("0.95", "defer", 2);
  return s;
}

json report_json(const std::vector<std::string>& traces) {
  std::vector<std::string> args = {"report", "--json"};
  args.insert(args.end(), traces.begin(), traces.end());
  const RunResult r = cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// what-if --json's figures for the first device.
json what_if(const std::string& trace, const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"what-if", "--json", trace};
  args.insert(args.end(), flags.begin(), flags.end());
  const RunResult r = cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return json::parse(r.out)["devices"][0];
}

std::string format_bytes(std::uint64_t bytes) {
  // As the tools print sizes (tools/report.h): binary units, two decimals.
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", v, units[u]);
  return text;
}

// One start of the seed scenario as SGLang at `fraction` (--mem-fraction-static); "stock" runs
// without the library.
Start start_sglang(const std::string& fraction, const std::string& mode) {
  const std::string traces = make_temp_dir();
  const std::vector<std::string> argv = {
      link_as(VLLM_LIKE, "sglang"), "serve", "--scenario", SEED_SCENARIO, "--engine", "sglang",
      "--mem-fraction-static",      fraction};
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 1);
  if (mode != "stock")
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=" + mode, "KVREMAP_TRACE_DIR=" + traces,
                           "KVREMAP_PROFILE_DIR=" + make_temp_dir()});
  return Start{run_program(argv, env, {}, 240), trace_files(traces)};
}

}  // namespace

TEST(TraceTools, ReportJsonHasTheEnginesKvAndAttributesItToTheKvPhase) {
  const Start& s = seed_ranks();
  ASSERT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
  ASSERT_EQ(s.traces.size(), 2u);
  const json report = report_json(s.traces);
  ASSERT_EQ(report.size(), 2u);
  const std::string printed = started_kv(s.run.out);
  ASSERT_FALSE(printed.empty()) << s.run.out;
  for (const json& process : report) {
    const json& device = process["devices"][0];
    EXPECT_TRUE(device["events_agree"].get<bool>());
    const json& kv = device["kv"];
    EXPECT_EQ(gib(kv["kv_bytes"].get<std::uint64_t>()), printed);
    EXPECT_EQ(kv["kv_bytes"], kv["device_bytes"].get<std::uint64_t>() + kv["host_bytes"].get<std::uint64_t>());
    // The KV tensors are allocated in kv_allocation and still live when it ends, and nowhere else.
    std::uint64_t kv_held = 0;
    for (const json& phase : device["phases"]) {
      const std::uint64_t held = phase["allocated_live_at_end"].value("kv", std::uint64_t{0});
      if (phase["phase"] == "kv_allocation") {
        EXPECT_EQ(held, kv["kv_bytes"]) << phase.dump();
      }
      kv_held += held;
      // The peak of all categories is at least each category's live bytes at the phase's end.
      std::uint64_t live = 0;
      for (const auto& [name, bytes] : phase["live_at_end"].items()) live += bytes.get<std::uint64_t>();
      EXPECT_GE(phase["peak_bytes"].get<std::uint64_t>(), live) << phase.dump();
    }
    EXPECT_EQ(kv_held, kv["kv_bytes"]);
    EXPECT_EQ(device["categories"]["kv"]["peak_bytes"], kv["kv_bytes"]);
  }
  // The text report carries the same attribution table.
  const RunResult text = cli({"report", s.traces[0]});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("phase attribution, device 0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("kv_allocation"), std::string::npos);
}

TEST(TraceTools, DiffOfAStartWithItselfIsZeroAndAgainstAnotherUtilisationIsTheKvDifference) {
  const Start& s = seed_ranks();
  ASSERT_EQ(s.traces.size(), 2u);
  const RunResult same = cli({"diff", s.traces[0], s.traces[0]});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  std::istringstream lines(same.out);
  std::size_t rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(": ") == std::string::npos || line.starts_with("A:") || line.starts_with("B:") ||
        line.find("KV: A") != std::string::npos)
      continue;
    ++rows;
    EXPECT_TRUE(line.ends_with(" =")) << line;
  }
  EXPECT_GT(rows, 10u) << same.out;

  const Start lower = start_seed("0.9", "defer");
  ASSERT_EQ(lower.run.exit_code, 0) << lower.run.out << lower.run.err;
  ASSERT_EQ(lower.traces.size(), 1u);
  const json a = report_json({s.traces[0]})[0]["devices"][0]["kv"];
  const json b = report_json({lower.traces[0]})[0]["devices"][0]["kv"];
  const RunResult d = cli({"diff", s.traces[0], lower.traces[0]});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const std::int64_t delta = b["kv_bytes"].get<std::int64_t>() - a["kv_bytes"].get<std::int64_t>();
  ASSERT_LT(delta, 0);
  const std::regex row(R"(kv: size\s+\S+ \S+\s+\S+ \S+\s+(\S+ \S+))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(d.out, m, row)) << d.out;
  EXPECT_EQ(m[1].str(), "-" + format_bytes(static_cast<std::uint64_t>(-delta)));
  // The KV difference is the largest: it comes before every phase's non-KV rows.
  EXPECT_LT(d.out.find("kv_allocation: kv"), d.out.find("post_kv_warmup: other")) << d.out;
}

TEST(TraceTools, MergedRanksValidateAndKeepEveryEventOnItsOwnProcessTrack) {
  const Start& s = seed_ranks();
  ASSERT_EQ(s.traces.size(), 2u);
  const std::string merged = make_temp_dir() + "/merged.json";
  const RunResult r = cli({"merge", s.traces[0], s.traces[1], "-o", merged});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const RunResult v = cli({"validate", merged});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find(": ok, "), std::string::npos) << v.out;

  const auto all = kvremap::trace::read_trace(merged);
  std::map<std::int64_t, std::size_t> per_pid;
  for (const json& e : all.events) ++per_pid[e["pid"].get<std::int64_t>()];
  std::size_t inputs = 0;
  std::int64_t earliest = INT64_MAX;
  std::map<std::int64_t, double> header_ts;  // each rank's own header time, by pid
  for (const std::string& path : s.traces) {
    const auto t = kvremap::trace::read_trace(path);
    inputs += t.event_count;
    earliest = std::min(earliest, t.header.start_unix_ns);
    // The merged file's own header takes the first input's pid.
    EXPECT_EQ(per_pid[t.header.pid], t.event_count + (t.header.pid == all.header.pid ? 1 : 0)) << path;
    for (const json& e : t.events)
      if (e.value("name", "") == "kvremap_trace") header_ts[t.header.pid] = e["ts"].get<double>();
  }
  EXPECT_EQ(all.event_count, inputs + 1);
  EXPECT_EQ(all.header.start_unix_ns, earliest);
  // Aligned on wall-clock start: each rank's events moved by its start's distance from the earliest.
  std::size_t moved = 0;
  for (const json& e : all.events) {
    if (e.value("name", "") != "kvremap_merged_process") continue;
    const std::int64_t start = e["args"]["start_unix_ns"].get<std::int64_t>();
    const double expected = header_ts[e["pid"].get<std::int64_t>()] + static_cast<double>((start - earliest) / 1000);
    EXPECT_NEAR(e["ts"].get<double>(), expected, 1e-6) << e.dump();
    ++moved;
  }
  EXPECT_EQ(moved, 2u);
}

// What-if's kvremap figures against a start's own commit: the same verdict and headroom, and the same
// device memory free beside the KV cache (margin + KV: the KV size may differ by the engine's rounding).
void expect_same_plan(const json& predicted, const json& kv) {
  const json& plan = predicted["kvremap"];
  EXPECT_EQ(plan["verdict"], kv["verdict"]);
  EXPECT_EQ(plan["headroom_bytes"], kv["headroom_bytes"]);
  EXPECT_EQ(plan["margin_bytes"].get<std::int64_t>() + predicted["kv_bytes"].get<std::int64_t>(),
            kv["margin_bytes"].get<std::int64_t>() + kv["kv_bytes"].get<std::int64_t>());
  EXPECT_EQ(plan["device_bytes"].get<std::uint64_t>() + plan["host_bytes"].get<std::uint64_t>(),
            predicted["kv_bytes"].get<std::uint64_t>());
}

// The engine's KV size is what-if's or one step more (the engine rounds down per tensor).
void expect_kv_within_a_step(const json& predicted, std::uint64_t actual) {
  const std::uint64_t kv = predicted["kv_bytes"].get<std::uint64_t>();
  EXPECT_GE(actual, kv);
  EXPECT_LE(actual, kv + predicted["kv_step_bytes"].get<std::uint64_t>());
}

TEST(TraceTools, WhatIfAtTheTracedUtilisationIsTheTracedCommit) {
  const Start& s = seed_ranks();
  ASSERT_FALSE(s.traces.empty());
  const json kv = report_json({s.traces[0]})[0]["devices"][0]["kv"];
  const json w = what_if(s.traces[0], {"--gpu-memory-utilization", "0.95"});
  EXPECT_EQ(w["kv_bytes"], kv["kv_bytes"]);
  EXPECT_EQ(w["kvremap"]["device_bytes"], kv["device_bytes"]);
  EXPECT_EQ(w["kvremap"]["host_bytes"], kv["host_bytes"]);
  EXPECT_EQ(w["kvremap"]["margin_bytes"], kv["margin_bytes"]);
  expect_same_plan(w, kv);
  // Stock at 0.95 runs out of memory in post-KV autotuning: the engine says so when started without kvremap.
  EXPECT_EQ(w["stock"]["oom_phase"], "post_kv_warmup") << w.dump();
  const Start stock = start_seed("0.95", "stock");
  EXPECT_NE(stock.run.exit_code, 0);
  EXPECT_NE(stock.run.err.find("phase post-KV (autotune) failed"), std::string::npos) << stock.run.err;
}

TEST(TraceTools, WhatIfAtAnotherUtilisationMatchesActualStartsThere) {
  const Start& s = seed_ranks();
  ASSERT_FALSE(s.traces.empty());
  // Stock at 0.8 starts, with the KV cache what-if predicts.
  const json at_08 = what_if(s.traces[0], {"--gpu-memory-utilization", "0.8"});
  EXPECT_EQ(at_08["stock"]["oom_phase"], "") << at_08.dump();
  const Start stock = start_seed("0.8", "stock");
  ASSERT_EQ(stock.run.exit_code, 0) << stock.run.err;
  const std::string printed = started_kv(stock.run.out);
  ASSERT_FALSE(printed.empty()) << stock.run.out;
  const std::uint64_t kv = at_08["kv_bytes"].get<std::uint64_t>();
  EXPECT_TRUE(printed == gib(kv) || printed == gib(kv + at_08["kv_step_bytes"].get<std::uint64_t>()))
      << printed << " vs " << at_08.dump();

  // kvremap at 0.9 with a 1 GiB headroom floor: the plan the library made in that start.
  const json at_09 = what_if(s.traces[0], {"--gpu-memory-utilization", "0.9", "--headroom", "1GiB"});
  const Start actual = start_seed("0.9", "defer", 1, {"KVREMAP_HEADROOM=1GiB"});
  ASSERT_EQ(actual.run.exit_code, 0) << actual.run.err;
  ASSERT_EQ(actual.traces.size(), 1u);
  const json committed = report_json({actual.traces[0]})[0]["devices"][0]["kv"];
  expect_kv_within_a_step(at_09, committed["kv_bytes"].get<std::uint64_t>());
  expect_same_plan(at_09, committed);

  // At 1.0 the engine refuses at start-up: less is free than the share asks for.
  const json at_10 = what_if(s.traces[0], {"--gpu-memory-utilization", "1.0"});
  EXPECT_TRUE(at_10["refused"].get<std::string>().ends_with("(init)")) << at_10.dump();
  const Start refused = start_seed("1.0", "stock");
  EXPECT_NE(refused.run.exit_code, 0);
  EXPECT_NE(refused.run.err.find("phase init failed: ValueError: Free memory on device"), std::string::npos)
      << refused.run.err;

  // Stock at 0.9 runs out of memory where what-if says.
  const json stock_09 = what_if(s.traces[0], {"--gpu-memory-utilization", "0.9"});
  const Start stock_start = start_seed("0.9", "stock");
  if (stock_09["stock"]["oom_phase"] == "") {
    EXPECT_EQ(stock_start.run.exit_code, 0) << stock_start.run.err;
  } else {
    EXPECT_NE(stock_start.run.exit_code, 0);
    EXPECT_NE(stock_start.run.err.find("phase post-KV"), std::string::npos) << stock_start.run.err;
  }
}

TEST(TraceTools, BadInputIsOneLineAndItsExitStatus) {
  const std::string missing = make_temp_dir() + "/missing.json";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plot", missing, "-o", make_temp_dir() + "/p.html"},
        std::vector<std::string>{"diff", missing, missing},
        std::vector<std::string>{"what-if", missing, "--gpu-memory-utilization", "0.9"},
        std::vector<std::string>{"merge", missing, "-o", make_temp_dir() + "/m.json"},
        std::vector<std::string>{"report", "--json", missing}}) {
    const RunResult r = cli(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("missing.json: line 0: cannot open"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), args[0] == "diff" ? 2 : 1) << r.err;
  }
  const Start& s = seed_ranks();
  ASSERT_FALSE(s.traces.empty());
  EXPECT_EQ(cli({"what-if", s.traces[0], "--gpu-memory-utilization", "1.5"}).exit_code, 2);
  EXPECT_EQ(cli({"what-if", s.traces[0], "--gpu-memory-utilization", "0.9", "--headroom", "lots"}).exit_code, 2);
  EXPECT_EQ(cli({"plot", s.traces[0]}).exit_code, 2);
  EXPECT_EQ(cli({"plot", s.traces[0], "-o", "/proc/no-such-dir/p.html"}).exit_code, 2);
  for (const char* command : {"plot", "diff", "merge", "what-if", "report"}) {
    const RunResult help = cli({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_NE(help.out.find("Exit status"), std::string::npos) << command << ": " << help.out;
  }
}

namespace {

// Headless chromium on `url` with the flags that keep it off the network and out of the user's
// profile; `extra` adds the action (--dump-dom, --screenshot=...).
RunResult chromium(const std::string& url, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {CHROMIUM,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-quic",
                                   "--no-first-run",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--user-data-dir=" + make_temp_dir(),
                                   "--enable-logging=stderr",
                                   "--v=0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(url);
  return run_program(argv, {}, {}, 120);
}

// The text of the element `<script ... id="ID">` in a DOM dump.
std::string script_text(const std::string& dom, const std::string& id) {
  const std::string open = "id=\"" + id + "\">";
  const auto begin = dom.find(open);
  if (begin == std::string::npos) return {};
  const auto end = dom.find("</script>", begin);
  return dom.substr(begin + open.size(), end - begin - open.size());
}

}  // namespace

TEST(TraceTools, ThePlotLoadsInHeadlessChromiumWithTheReportsFigures) {
  if (std::string(CHROMIUM).empty())
    FAIL() << "chromium was not found when the tests were configured: install Debian's package chromium "
              "(apt-get install chromium, or scripts/install-deps.sh) and configure again";
  const Start& s = seed_ranks();
  ASSERT_EQ(s.traces.size(), 2u);
  const std::string dir = make_temp_dir();
  const std::string page = dir + "/plot.html";
  const RunResult plot = cli({"plot", s.traces[0], s.traces[1], "-o", page});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  // Self-contained: nothing is fetched when the page is viewed.
  const std::string html = slurp(page);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);

  const RunResult dom = chromium("file://" + page, {"--dump-dom"});
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_NE(dom.out.find("ready: 2 panels, 2 processes"), std::string::npos) << "the page's script did not run";
  EXPECT_EQ(dom.err.find("CONSOLE("), std::string::npos) << "console messages:\n" << dom.err;
  EXPECT_EQ(dom.err.find("Uncaught"), std::string::npos) << dom.err;
  // The picture's elements are in the page: the KV cache's band, the capacity line, the round ticks.
  EXPECT_NE(dom.out.find("<g class=\"area\" data-series=\"kv_device\">"), std::string::npos);
  EXPECT_NE(dom.out.find("<g class=\"capacity\""), std::string::npos);
  EXPECT_NE(dom.out.find(">0</text>"), std::string::npos) << "the byte axis starts at a round 0";

  // The same starts as an SVG: well-formed XML, and no label's box overlaps another's in a panel.
  const std::string svg = dir + "/plot.svg";
  ASSERT_EQ(cli({"plot", s.traces[0], s.traces[1], "-o", svg}).exit_code, 0);
  std::ofstream(dir + "/labels.py")
      << "import sys, xml.etree.ElementTree as E\n"
         "ns = '{http://www.w3.org/2000/svg}'\n"
         "panels = [g for g in E.parse(sys.argv[1]).getroot().iter(ns + 'g') if g.get('class') == 'panel']\n"
         "assert len(panels) == 2, len(panels)\n"
         "for p in panels:\n"
         "  boxes = [(t.text, [float(v) for v in t.get('data-box').split()]) for t in p.iter(ns + 'text')]\n"
         "  assert len(boxes) > 10, len(boxes)\n"
         "  for i, (a, (ax, ay, aw, ah)) in enumerate(boxes):\n"
         "    for b, (bx, by, bw, bh) in boxes[i + 1:]:\n"
         "      assert not (ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah), (a, b)\n"
         "print('labels clear')\n";
  const RunResult labels = run_program({"/usr/bin/python3", dir + "/labels.py", svg}, {});
  EXPECT_EQ(labels.exit_code, 0) << labels.out << labels.err;

  // The figures embedded in the page are report --json's, and the visible table shows its peaks.
  const json embedded = json::parse(script_text(dom.out, "kvremap-figures"));
  const json report = report_json(s.traces);
  EXPECT_EQ(embedded, report);
  for (const json& process : report) {
    for (const auto& [name, stats] : process["devices"][0]["categories"].items()) {
      const std::uint64_t peak = stats["peak_bytes"].get<std::uint64_t>();
      if (peak == 0) continue;
      const std::string cell = "<td data-bytes=\"" + std::to_string(peak) + "\">" + format_bytes(peak) + "</td>";
      EXPECT_NE(dom.out.find(cell), std::string::npos) << name << ": " << cell;
    }
  }

  // The hover read-out: the pointer at the right end of the first panel, after the commit, reads the
  // KV cache's device share that report --json gives.
  const std::string hover = dir + "/hover.html";
  std::ofstream(hover)
      << "<!DOCTYPE html><html><body><iframe id=f src=\"plot.html\" width=1200 height=900></iframe>"
         "<pre id=r>no read-out</pre><script>window.addEventListener('load',function(){"
         "var d=document.getElementById('f').contentDocument;var s=d.querySelector('svg.panel');"
         "var b=s.getBoundingClientRect();s.dispatchEvent(new MouseEvent('mousemove',{clientX:"
         "b.left+b.width*0.995,clientY:b.top+b.height/2,bubbles:true}));document.getElementById('r')"
         ".textContent='read-out: '+d.getElementById('readout-0').textContent;});</script></body></html>";
  const RunResult hovered =
      chromium("file://" + hover, {"--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom"});
  ASSERT_EQ(hovered.exit_code, 0) << hovered.err;
  const std::string device_share =
      "kv_device: " + gib(report[0]["devices"][0]["kv"]["device_bytes"].get<std::uint64_t>()) + " GiB";
  EXPECT_NE(hovered.out.find(device_share), std::string::npos) << device_share << "\n" << hovered.out;
  EXPECT_NE(hovered.out.find(" s  serving"), std::string::npos) << hovered.out;

  // A screenshot with more than one colour: a blank or failed page is one.
  const std::string shot = dir + "/plot.png";
  const RunResult screenshot = chromium("file://" + page, {"--screenshot=" + shot, "--window-size=1200,900"});
  ASSERT_EQ(screenshot.exit_code, 0) << screenshot.err;
  const std::string png = slurp(shot);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  // Chromium decodes its own PNG: a page that draws it on a canvas counts the colours.
  const std::string counter = dir + "/count.html";
  std::ofstream(counter)
      << "<!DOCTYPE html><html><body><img id=i src=\"plot.png\"><p id=n>not counted</p><script>"
         "window.addEventListener('load',function(){var i=document.getElementById('i');"
         "var c=document.createElement('canvas');c.width=i.naturalWidth;c.height=i.naturalHeight;"
         "var x=c.getContext('2d');x.drawImage(i,0,0);var d=x.getImageData(0,0,c.width,c.height).data;"
         "var s={};for(var k=0;k<d.length;k+=4)s[d[k]+','+d[k+1]+','+d[k+2]]=1;"
         "document.getElementById('n').textContent='colours '+Object.keys(s).length+' size '+"
         "c.width+'x'+c.height;});</script></body></html>";
  const RunResult count =
      chromium("file://" + counter, {"--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(count.out, m, std::regex(R"(colours (\d+) size (\d+)x(\d+))"))) << count.out;
  EXPECT_GT(std::stoul(m[1].str()), 8u) << m[0];
  EXPECT_EQ(m[2].str(), "1200");
}

// SGLang sizes its pool from --mem-fraction-static: what-if replays a traced SGLang start at other
// fractions, checked against actual starts there; a vLLM flag on an SGLang trace is one clear line.
TEST(TraceTools, WhatIfReplaysAnSglangStartAtOtherFractions) {
  const Start traced = start_sglang("0.9", "defer");
  ASSERT_EQ(traced.run.exit_code, 0) << traced.run.out << traced.run.err;
  ASSERT_EQ(traced.traces.size(), 1u);
  const json kv = report_json({traced.traces[0]})[0]["devices"][0]["kv"];
  const json same = what_if(traced.traces[0], {"--mem-fraction-static", "0.9"});
  EXPECT_EQ(same["kv_bytes"], kv["kv_bytes"]);
  expect_same_plan(same, kv);
  // Stock at 0.9 runs out of memory after the KV burst; what-if says so.
  EXPECT_NE(same["stock"]["oom_phase"], "") << same.dump();
  EXPECT_NE(start_sglang("0.9", "stock").run.exit_code, 0);

  const json at_08 = what_if(traced.traces[0], {"--mem-fraction-static", "0.8"});
  const Start stock = start_sglang("0.8", "stock");
  ASSERT_EQ(stock.run.exit_code, 0) << stock.run.err;
  EXPECT_EQ(at_08["stock"]["oom_phase"], "") << at_08.dump();
  const std::string printed = started_kv(stock.run.out);
  ASSERT_FALSE(printed.empty()) << stock.run.out;
  const std::uint64_t predicted = at_08["kv_bytes"].get<std::uint64_t>();
  EXPECT_TRUE(printed == gib(predicted) || printed == gib(predicted + at_08["kv_step_bytes"].get<std::uint64_t>()))
      << printed << " vs " << at_08.dump();

  const RunResult wrong = cli({"what-if", traced.traces[0], "--gpu-memory-utilization", "0.8"});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_NE(wrong.err.find("the traced start is SGLang: replay it with --mem-fraction-static"), std::string::npos)
      << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;
  const RunResult neither = cli({"what-if", traced.traces[0]});
  EXPECT_EQ(neither.exit_code, 2) << neither.err;
  const RunResult both =
      cli({"what-if", traced.traces[0], "--gpu-memory-utilization", "0.8", "--mem-fraction-static", "0.8"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
}

// Stock sizing at 0.95 runs out of memory after the KV burst: report (text and --json) and plot show
// the trace's out-of-memory snapshot with the figures the library recorded.
TEST(TraceTools, ReportAndPlotShowTheOutOfMemorySnapshot) {
  const Start s = start_seed("0.95", "observe");
  ASSERT_NE(s.run.exit_code, 0) << "stock sizing at 0.95 runs out of memory";
  ASSERT_EQ(s.traces.size(), 1u);
  const auto trace = kvremap::trace::read_trace(s.traces[0]);
  json recorded;
  for (const auto& e : trace.other_events)
    if (e.cat == "oom" && e.name == "oom snapshot" && recorded.is_null()) recorded = e.args;
  ASSERT_FALSE(recorded.is_null());
  const json shown = report_json({s.traces[0]})[0]["devices"][0]["oom_snapshots"];
  ASSERT_EQ(shown.size(), 1u) << shown.dump();
  for (const char* key :
       {"phase", "api", "requested_bytes", "device_free_bytes", "live_total_bytes", "top_callers", "other_bytes"})
    EXPECT_EQ(shown[0][key], recorded[key]) << key;
  const RunResult text = cli({"report", s.traces[0]});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("out of memory, device 0, phase " + recorded["phase"].get<std::string>()), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(format_bytes(recorded["requested_bytes"].get<std::uint64_t>())), std::string::npos);
  const std::string html = make_temp_dir() + "/oom.html";
  ASSERT_EQ(cli({"plot", s.traces[0], "-o", html}).exit_code, 0);
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<g class=\"oom\" data-phase=\"" + recorded["phase"].get<std::string>() + "\">"),
            std::string::npos);
}

namespace {

// The hand-written traces of the unit tests, found from the scenario's path in the same source tree.
std::string data_trace(const std::string& name) {
  const std::string scenario = SEED_SCENARIO;
  return scenario.substr(0, scenario.rfind("/examples/vllm_like/")) + "/tests/data/traces/" + name;
}

// complete.json with `line` added after its header (the file's third line), in a fresh directory.
std::string trace_with_event(const std::string& line) {
  std::istringstream in(slurp(data_trace("complete.json")));
  std::string out, text;
  for (int n = 1; std::getline(in, text); ++n) {
    out += text + "\n";
    if (n == 3) out += line + "\n";
  }
  const std::string path = make_temp_dir() + "/kvremap-h-4242.json";
  std::ofstream(path) << out;
  return path;
}

// Runs the CLI in /bin/sh with SIGXFSZ ignored and a file-size limit of a few kilobytes: a write
// past it fails with EFBIG part-way through an output, as on a full disk.
RunResult cli_with_file_size_limit(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 4; exec \"$0\" \"$@\"", KVREMAP_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, {}, {}, 120);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// A "cat" is optional and of any type for validate; merge takes every trace validate accepts, and
// what it refuses it refuses naming the file, the line and the field.
TEST(TraceTools, MergeTakesWhatValidateAcceptsAndNamesTheFieldOfWhatItRefuses) {
  for (const std::string cat : {"5", "{\"a\":1}", "null", "[\"summary\"]"}) {
    const std::string input = trace_with_event(R"({"ph":"i","s":"t","cat":)" + cat +
                                               R"(,"name":"note","pid":4242,"tid":4242,"ts":1500,"args":{}})");
    const RunResult v = cli({"validate", input});
    ASSERT_EQ(v.exit_code, 0) << cat << ": " << v.out << v.err;
    const std::string merged = make_temp_dir() + "/merged.json";
    const RunResult m = cli({"merge", input, data_trace("complete.json"), "-o", merged});
    EXPECT_EQ(m.exit_code, 0) << cat << ": " << m.err;
    EXPECT_EQ(m.err, "") << cat;
    const RunResult mv = cli({"validate", merged});
    EXPECT_EQ(mv.exit_code, 0) << cat << ": " << mv.out << mv.err;
    EXPECT_NE(slurp(merged).find(R"("cat":)" + json::parse(cat).dump()), std::string::npos) << cat;
  }
  // A header whose schema version is not an integer: refused by both, the file, line and field named.
  std::string bad = slurp(data_trace("complete.json"));
  bad.replace(bad.find(R"("schema_version":1)"), 18, R"("schema_version":"1")");
  const std::string input = make_temp_dir() + "/bad.json";
  std::ofstream(input) << bad;
  const std::string merged = make_temp_dir() + "/merged.json";
  const RunResult m = cli({"merge", data_trace("complete.json"), input, "-o", merged});
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_EQ(m.err, "kvremap merge: " + input + ": line 3: kvremap_trace metadata has no integer args.schema_version\n");
  EXPECT_FALSE(fs::exists(merged));
}

// One reading of a trace: report, plot, diff, merge and what-if take nothing from a trace validate
// refuses; each refuses it with validate's own line and exit status 1, and writes no output file.
// The bad values are on allocation lines in the writer's shape, and an unknown category on a line
// the hot-line scanner reads; the same line with a good value reads.
TEST(TraceTools, EveryReaderRefusesWhatValidateRefusesWithValidatesLine) {
  const auto alloc = [](const std::string& bytes, const std::string& category) {
    return R"(,{"ph":"i","cat":"alloc","name":"alloc","pid":4242,"tid":4242,"ts":1500,"s":"t","args":{"api":"cudaMalloc",)"
           R"("ptr":"0x7f0000a00000","bytes":)" + bytes + R"(,"device":0,"category":")" + category +
           R"(","phase":"loading"}})";
  };
  const std::string good = data_trace("complete.json");
  for (const auto& [bytes, category] :
       std::vector<std::pair<std::string, std::string>>{{"-1", "other"},
                                                        {"0.5", "other"},
                                                        {"1e308", "other"},
                                                        {"18446744073709551616", "other"},
                                                        {"4096", "weights"}}) {
    SCOPED_TRACE(bytes + " " + category);
    const std::string input = trace_with_event(alloc(bytes, category));
    const RunResult v = cli({"validate", input});
    EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
    const std::string line = v.out.substr(0, v.out.find('\n'));
    EXPECT_NE(line.find(input + ": event 2: alloc: args."), std::string::npos) << v.out;
    const std::string dir = make_temp_dir();
    const std::vector<std::vector<std::string>> readers = {
        {"report", input},
        {"report", "--json", input},
        {"plot", input, "-o", dir + "/p.html"},
        {"diff", input, good},
        {"diff", good, input},
        {"merge", good, input, "-o", dir + "/m.json"},
        {"what-if", input, "--gpu-memory-utilization", "0.9"}};
    for (const std::vector<std::string>& args : readers) {
      const RunResult r = cli(args);
      EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.out << r.err;
      EXPECT_EQ(r.err, "kvremap " + args[0] + ": " + line + "\n") << args[0];
      if (args[0] != "report") {
        EXPECT_EQ(r.out, "") << args[0] << ": no figures from a refused trace";
      } else if (args[1] == "--json") {
        EXPECT_EQ(r.out, "[]\n");
      } else {
        EXPECT_EQ(r.out, "");
      }
    }
    EXPECT_FALSE(fs::exists(dir + "/p.html"));
    EXPECT_FALSE(fs::exists(dir + "/m.json"));
  }
  // The same allocation with a good size: every reader reads it.
  const std::string input = trace_with_event(alloc("4096", "other"));
  ASSERT_EQ(cli({"validate", input}).exit_code, 0);
  const std::string dir = make_temp_dir();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"report", input}, std::vector<std::string>{"report", "--json", input},
        std::vector<std::string>{"plot", input, "-o", dir + "/p.html"}, std::vector<std::string>{"diff", input, good},
        std::vector<std::string>{"merge", good, input, "-o", dir + "/m.json"}}) {
    const RunResult r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "") << args[0];
  }
  // what-if reads it too, and then says what the trace lacks for its question.
  const RunResult w = cli({"what-if", input, "--gpu-memory-utilization", "0.9"});
  EXPECT_EQ(w.exit_code, 1);
  EXPECT_NE(w.err.find("no \"kv commit plan\" in the trace"), std::string::npos) << w.err;
}

// A trace whose file could not grow ends with the writer's "trace stopped" event: validate accepts
// it and says where and why it stopped, report shows the same (text and JSON); a file with only its
// header is a valid empty trace.
TEST(TraceTools, ATraceThatStoppedEarlySaysWhereAndWhyAndAHeaderOnlyTraceIsEmpty) {
  std::istringstream in(slurp(data_trace("complete.json")));
  std::string head, text;
  for (int n = 1; n <= 8 && std::getline(in, text); ++n) head += text + "\n";
  const std::string dir = make_temp_dir();
  const std::string stopped = dir + "/kvremap-h-4242.json";
  std::ofstream(stopped) << head
                         << R"(,{"ph":"i","cat":"kvremap","name":"trace stopped","pid":4242,"tid":0,"ts":2500123.250,)"
                            R"("s":"p","args":{"error":"No space left on device"}})"
                         << "\n";
  const RunResult v = cli({"validate", stopped});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(v.out, stopped +
                       ": ok, 8 events, stopped early at 2.500 s: No space left on device (the trace file could "
                       "not grow)\n");
  const RunResult r = cli({"report", stopped});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ended     early, stopped at 2.500 s: No space left on device (the trace file could not grow)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("note: trace stopped at 2.500 s: No space left on device (the trace file could not grow)\n"),
            std::string::npos)
      << r.out;
  const RunResult j = cli({"report", "--json", stopped});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json ended = json::parse(j.out).at(0).at("ended");
  EXPECT_EQ(ended.at("stopped").at("error"), "No space left on device");
  EXPECT_EQ(ended.at("stopped").at("at_us"), 2500123.25);
  EXPECT_TRUE(json::parse(cli({"report", "--json", data_trace("complete.json")}).out).at(0).at("ended").at("stopped").is_null());

  std::istringstream again(slurp(data_trace("complete.json")));
  std::string header;
  for (int n = 1; n <= 3 && std::getline(again, text); ++n) header += text + "\n";
  const std::string empty = dir + "/kvremap-h-4243.json";
  std::ofstream(empty) << header;
  const RunResult e = cli({"validate", empty});
  EXPECT_EQ(e.exit_code, 0) << e.out << e.err;
  EXPECT_EQ(e.out, empty + ": ok, 2 events (the header only), no closing ']' (process did not exit cleanly)\n");
  const RunResult er = cli({"report", empty});
  EXPECT_EQ(er.exit_code, 0) << er.err;
  EXPECT_NE(er.out.find("ended     without a summary (killed or crashed?); no event after the header"),
            std::string::npos)
      << er.out;
}

// An output that cannot be written whole leaves nothing behind: no partial file, and a file that was
// there before as it was. One line names the file and the error.
TEST(TraceTools, AnOutputThatFailsPartWayLeavesNoPartialFileAndTheOldOneUnchanged) {
  const std::string complete = data_trace("complete.json");
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"plot", complete}, std::vector<std::string>{"merge", complete, complete}}) {
    const std::string dir = make_temp_dir();
    const std::string target = dir + "/out";
    std::ofstream(target) << "old contents\n";
    std::vector<std::string> args = command;
    args.insert(args.end(), {"-o", target});
    // The whole output is larger than the limit (a plot page, two copies of an 8 KB trace).
    const RunResult r = cli_with_file_size_limit(args);
    EXPECT_EQ(r.exit_code, 2) << command[0] << ": " << r.out << r.err;
    EXPECT_EQ(r.err, "kvremap " + command[0] + ": " + target + ": cannot write: File too large\n") << command[0];
    EXPECT_EQ(slurp(target), "old contents\n") << command[0];
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"out"}) << command[0] << ": a temporary file was left";
    EXPECT_EQ(r.out, "") << command[0];

    // Without the limit the same command replaces the old file whole.
    const RunResult ok = cli(args);
    EXPECT_EQ(ok.exit_code, 0) << command[0] << ": " << ok.err;
    EXPECT_NE(slurp(target), "old contents\n") << command[0];
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"out"}) << command[0];
  }
  // A device is written directly; its error is the one line.
  const RunResult full = cli({"plot", complete, "-o", "/dev/full"});
  EXPECT_EQ(full.exit_code, 2);
  EXPECT_EQ(full.err, "kvremap plot: /dev/full: cannot write: No space left on device\n");
}

// Paths and trace strings reach the terminal with their control bytes as \xNN: a file name or a
// cmdline holding a newline or an escape sequence cannot forge a line or drive the terminal.
TEST(TraceTools, ControlCharactersInPathsAndTraceStringsAreEscaped) {
  const std::string dir = make_temp_dir();
  const std::string missing = dir + "/a\nkvremap report: forged\x1b[31m.json";
  const RunResult r = cli({"report", missing});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "kvremap report: " + dir + "/a\\x0akvremap report: forged\\x1b[31m.json: line 0: cannot open: " +
                       "No such file or directory\n");

  std::string text = slurp(data_trace("complete.json"));
  const std::string cmdline = R"("cmdline":"python3 -m vllm.entrypoints.openai.api_server --model m")";
  text.replace(text.find(cmdline), cmdline.size(), R"("cmdline":"engine \u001b[31m\nkvremap report: forged")");
  const std::string caller = R"("caller":"libc10_cuda.so")";
  text.replace(text.find(caller), caller.size(), R"("caller":"lib\u001b]0;x\u0007.so")");
  const std::string path = dir + "/kvremap-\r.json";
  std::ofstream(path) << text;
  const RunResult report = cli({"report", path});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("== " + dir + "/kvremap-\\x0d.json\n"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find(": engine \\x1b[31m\\x0akvremap report: forged\n"), std::string::npos) << report.out;
  for (const char c : report.out + report.err) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (byte >= 0x20 && byte != 0x7f)) << "byte " << static_cast<int>(byte);
  }
  // JSON output keeps the strings exact, escaped by the JSON writer.
  const RunResult as_json = cli({"report", "--json", path});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_NE(as_json.out.find(R"(engine \u001b[31m\nkvremap report: forged)"), std::string::npos);
  EXPECT_EQ(json::parse(as_json.out)[0]["process"]["cmdline"], "engine \x1b[31m\nkvremap report: forged");
  const RunResult validate = cli({"validate", path});
  EXPECT_EQ(validate.out, dir + "/kvremap-\\x0d.json: ok, 32 events\n") << validate.err;
}

// A directory stands for the *.json traces directly in it, sorted by name, for every reader; one with none, or a
// directory of several where one trace is asked for (diff, what-if), is one line and status 2.
TEST(TraceTools, EveryReaderTakesADirectoryForTheTracesInIt) {
  const Start& s = seed_ranks();
  ASSERT_EQ(s.traces.size(), 2u);
  const std::string dir = fs::path(s.traces[0]).parent_path().string();
  std::vector<std::string> by_name = s.traces;
  std::sort(by_name.begin(), by_name.end());
  const auto with = [](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };

  RunResult r = cli({"report", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, cli(with({"report"}, by_name)).out);
  r = cli({"validate", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, cli(with({"validate"}, by_name)).out);
  const std::string out = make_temp_dir();
  r = cli({"plot", dir, "-o", out + "/memory.html"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out + "/memory.html: 2 processes\n");
  r = cli({"merge", dir, "-o", out + "/merged.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(out + "/merged.json: 2 traces"), std::string::npos) << r.out;

  // One trace per directory where one is asked for.
  const std::string first = make_temp_dir(), second = make_temp_dir();
  const std::string first_trace = first + "/" + fs::path(s.traces[0]).filename().string();
  const std::string second_trace = second + "/" + fs::path(s.traces[1]).filename().string();
  fs::copy_file(s.traces[0], first_trace);
  fs::copy_file(s.traces[1], second_trace);
  r = cli({"diff", first, second});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, cli({"diff", first_trace, second_trace}).out);
  r = cli({"what-if", first, "--gpu-memory-utilization", "0.9"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, cli({"what-if", first_trace, "--gpu-memory-utilization", "0.9"}).out);
  r = cli({"diff", dir, second});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "kvremap diff: " + dir + ": the directory holds 2 trace files; kvremap diff takes one trace there: "
                                            "name one of them\n");

  const std::string empty = make_temp_dir();
  std::ofstream(empty + "/notes.txt") << "not a trace\n";
  for (const std::string command : {"report", "validate"}) {
    r = cli({command, empty});
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "kvremap " + command + ": " + empty +
                         ": the directory holds no trace files (*.json); name a directory kvremap run wrote, or trace "
                         "files\n");
  }
}
