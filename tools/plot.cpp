// Writes the plot page: stacked areas, phase bands, peak/commit/query/out-of-memory markers and a hover read-out (tools/plot.h).
#include "tools/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "tools/report.h"
#include "tools/report_json.h"

namespace kvremap::plot {
namespace {

constexpr std::size_t kSeriesCount = std::size(kSeries);
constexpr std::array<const char*, kSeriesCount> kColours = {"#9e9e9e", "#80cbc4", "#ce93d8", "#ffcc80", "#ef9a9a",
                                                            "#e57373", "#1e88e5", "#90caf9", "#fff176"};
constexpr double kWidth = 1100;
constexpr double kHeight = 330;
constexpr double kLeft = 80;
constexpr double kRight = 20;
constexpr double kTop = 56;
constexpr double kBottom = 40;

using Stack = std::array<std::uint64_t, kSeriesCount>;

struct Sample {
  double ts_us;  // on the shared axis
  Stack bytes;
};

std::uint64_t at(const analysis::ByCategory& live, const char* name) {
  const auto found = live.find(name);
  return found == live.end() ? 0 : found->second;
}

// The KV cache's live bytes split by backing at time ts (the process's own clock).
Stack stack_of(const analysis::ByCategory& live, const analysis::KvFigures& kv, double ts) {
  Stack s{};
  for (std::size_t i = 0; i < 6; ++i) s[i] = at(live, kSeries[i]);
  std::uint64_t known = 0;
  for (std::size_t i = 0; i < 6; ++i) known += s[i];
  std::uint64_t all = 0;
  for (const auto& [name, bytes] : live) all += bytes;
  s[0] += all - known - at(live, "kv");  // categories outside the fixed set count as other
  const std::uint64_t kv_live = at(live, "kv");
  const bool on_scratch =
      kv.reserved_ts_us >= 0 && ts >= kv.reserved_ts_us && (kv.commit_ts_us < 0 || ts < kv.commit_ts_us);
  if (on_scratch) {
    s[7] = kv_live == 0 ? 0 : std::min(kv_live, kv.scratch_bytes == 0 ? kv_live : kv.scratch_bytes);
  } else if (kv.commit_ts_us >= 0 && ts >= kv.commit_ts_us) {
    s[8] = std::min(kv_live, kv.host_bytes);
    s[6] = kv_live - s[8];
  } else {
    s[6] = kv_live;
  }
  return s;
}

std::vector<Sample> samples_of(const analysis::DeviceFigures& d, double offset_us) {
  std::vector<analysis::TimelinePoint> points = d.timeline;
  // The backing changes at the reservation and the commit, between memory events: sample there too.
  for (const double ts : {d.kv.reserved_ts_us, d.kv.commit_ts_us}) {
    if (ts < 0) continue;
    analysis::ByCategory live;
    for (const auto& p : d.timeline)
      if (p.ts_us <= ts) live = p.live;
    points.push_back({ts, live});
  }
  std::stable_sort(points.begin(), points.end(), [](const auto& x, const auto& y) { return x.ts_us < y.ts_us; });
  std::vector<Sample> samples;
  for (const auto& p : points) samples.push_back({p.ts_us + offset_us, stack_of(p.live, d.kv, p.ts_us)});
  return samples;
}

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script>: "</" must not close the element.
std::string script_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<') {
      out += "\\u003c";
    } else {
      out += text[i];
    }
  }
  return out;
}

struct Axis {
  double t0 = 0, t1 = 1;
  double x(double ts) const { return kLeft + (ts - t0) / (t1 - t0) * (kWidth - kLeft - kRight); }
};

void panel(std::string& out, std::size_t index, const analysis::ProcessFigures& p, const analysis::DeviceFigures& d,
           double offset_us, const Axis& axis) {
  const std::vector<Sample> samples = samples_of(d, offset_us);
  std::uint64_t top = d.total_bytes;
  for (const Sample& s : samples) {
    std::uint64_t sum = 0;
    for (const auto b : s.bytes) sum += b;
    top = std::max(top, sum);
  }
  for (const auto& c : p.checkpoints)
    if (c.device == d.device) top = std::max(top, c.driver_total);
  if (top == 0) top = 1;
  const double plot_h = kHeight - kTop - kBottom;
  const auto y = [&](std::uint64_t bytes) {
    return kTop + plot_h - static_cast<double>(bytes) / static_cast<double>(top) * plot_h;
  };
  const auto fx = [&](double ts) { return fmt::format("{:.1f}", axis.x(ts)); };
  const auto fy = [&](std::uint64_t bytes) { return fmt::format("{:.1f}", y(bytes)); };

  fmt::format_to(std::back_inserter(out),
                 "<h2>{} &middot; device {} &middot; {}</h2>\n<svg class=\"panel\" id=\"panel-{}\" data-panel=\"{}\" "
                 "width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                 escape(p.header.process_name.empty() ? p.source : p.header.process_name), d.device, escape(p.source),
                 index, index, kWidth, kHeight, kWidth, kHeight);
  // Phase bands with their names.
  for (std::size_t i = 0; i < d.phases.size(); ++i) {
    const auto& ph = d.phases[i];
    const double x0 = axis.x(ph.start_us + offset_us);
    const double x1 = axis.x(ph.end_us + offset_us);
    fmt::format_to(std::back_inserter(out),
                   "<rect class=\"phase\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>"
                   "<text class=\"phase-name\" x=\"{:.1f}\" y=\"{}\">{}</text>\n",
                   x0, kTop, std::max(0.0, x1 - x0), plot_h, i % 2 == 0 ? "#f5f5f5" : "#e8eaf6", x0 + 3,
                   kTop - 6 - static_cast<double>(i % 3) * 14, escape(ph.phase));  // staggered: short phases crowd
  }
  // Stacked areas: each series between the cumulative sum below it and the one including it, as steps.
  for (std::size_t series = 0; series < kSeriesCount && !samples.empty(); ++series) {
    std::string upper, lower;
    const auto cumulative = [&](const Sample& s, std::size_t through) {
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i <= through && i < kSeriesCount; ++i) sum += s.bytes[i];
      return sum;
    };
    bool any = false;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const Sample& s = samples[i];
      const double next = i + 1 < samples.size() ? samples[i + 1].ts_us : s.ts_us;
      const std::uint64_t hi = cumulative(s, series);
      const std::uint64_t lo = series == 0 ? 0 : cumulative(s, series - 1);
      any = any || hi != lo;
      upper += fmt::format("{},{} {},{} ", fx(s.ts_us), fy(hi), fx(next), fy(hi));
      lower = fmt::format("{},{} {},{} ", fx(next), fy(lo), fx(s.ts_us), fy(lo)) + lower;  // walked backwards
    }
    if (!any) continue;
    fmt::format_to(std::back_inserter(out),
                   "<polygon class=\"area\" data-series=\"{}\" fill=\"{}\" points=\"{}{}\"/>\n", kSeries[series],
                   kColours[series], upper, lower);
  }
  // The device's capacity.
  if (d.total_bytes != 0)
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"capacity\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><text class=\"label\" x=\"{}\" "
                   "y=\"{}\">device {}</text>\n",
                   kLeft, kWidth - kRight, fy(d.total_bytes), fy(d.total_bytes), kLeft + 4, y(d.total_bytes) + 12,
                   report::format_bytes(d.total_bytes));
  // Each category's peak, at the time the report gives.
  for (const auto& [name, stats] : d.categories) {
    if (stats.peak_bytes == 0) continue;
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"peak\" data-category=\"{}\"><circle cx=\"{}\" cy=\"{}\" r=\"4\"/><text class=\"label\" "
                   "x=\"{:.1f}\" y=\"{:.1f}\">{} peak {}</text></g>\n",
                   escape(name), fx(stats.peak_ts_us + offset_us), fy(stats.peak_bytes),
                   axis.x(stats.peak_ts_us + offset_us) + 5, y(stats.peak_bytes) - 4, escape(name),
                   report::format_bytes(stats.peak_bytes));
  }
  // The commit.
  if (d.kv.commit_ts_us >= 0)
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"commit\"><line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><text class=\"label\" "
                   "x=\"{3:.1f}\" y=\"{4}\">KV commit: {5} device, {6} host</text></g>\n",
                   fx(d.kv.commit_ts_us + offset_us), kTop, kTop + plot_h, axis.x(d.kv.commit_ts_us + offset_us) + 4,
                   kTop + 12, report::format_bytes(d.kv.device_bytes), report::format_bytes(d.kv.host_bytes));
  // Out-of-memory snapshots: where an allocation failed, what it asked for, and who held the memory.
  for (const analysis::OomSnapshot& s : d.oom_snapshots) {
    std::string held;
    for (const auto& c : s.top_callers)
      held += fmt::format("{}{} {}", held.empty() ? "" : ", ", c.caller, report::format_bytes(c.bytes));
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"oom\" data-phase=\"{0}\"><line x1=\"{1}\" x2=\"{1}\" y1=\"{2}\" y2=\"{3}\"/><text "
                   "class=\"label\" x=\"{4:.1f}\" y=\"{5}\">out of memory: {6} of {7}</text><title>{0}: {6} of {7}; "
                   "live {8}; held by {9}</title></g>\n",
                   escape(s.phase), fx(s.ts_us + offset_us), kTop, kTop + plot_h, axis.x(s.ts_us + offset_us) + 4,
                   kTop + 24, escape(s.api), report::format_bytes(s.requested_bytes),
                   report::format_bytes(s.live_total_bytes), escape(held.empty() ? std::string("-") : held));
  }
  // Memory queries: used per the driver, and per what the engine was told.
  for (const auto& c : p.checkpoints) {
    if (c.device != d.device || c.event.line == 0) continue;
    const std::uint64_t used_driver = c.driver_total > c.driver_free ? c.driver_total - c.driver_free : 0;
    const std::uint64_t used_told = c.returned_total > c.returned_free ? c.returned_total - c.returned_free : 0;
    fmt::format_to(std::back_inserter(out),
                   "<g class=\"query\" data-index=\"{0}\"><line x1=\"{2}\" x2=\"{2}\" y1=\"{3}\" y2=\"{4}\"/>"
                   "<rect x=\"{5:.1f}\" y=\"{6:.1f}\" width=\"6\" height=\"6\"/><circle cx=\"{2}\" cy=\"{4}\" r=\"3\"/>"
                   "<title>query {0} ({1}): driver free {7}, told {8}</title></g>\n",
                   c.index, escape(c.phase), fx(c.event.ts_us + offset_us), fy(used_driver), fy(used_told),
                   axis.x(c.event.ts_us + offset_us) - 3, y(used_driver) - 3, report::format_bytes(c.driver_free),
                   report::format_bytes(c.returned_free));
  }
  // Axes.
  fmt::format_to(std::back_inserter(out), "<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>", kLeft,
                 kTop, kTop + plot_h);
  for (int i = 0; i <= 4; ++i) {
    const std::uint64_t bytes = top / 4 * static_cast<std::uint64_t>(i);
    fmt::format_to(std::back_inserter(out), "<text class=\"tick\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                   kLeft - 4, y(bytes) + 4, report::format_bytes(bytes));
  }
  for (int i = 0; i <= 5; ++i) {
    const double ts = axis.t0 + (axis.t1 - axis.t0) * i / 5;
    fmt::format_to(std::back_inserter(out),
                   "<text class=\"tick\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.3f} s</text>", axis.x(ts),
                   kHeight - kBottom + 16, ts / 1e6);
  }
  fmt::format_to(std::back_inserter(out),
                 "<line class=\"cursor\" id=\"cursor-{}\" x1=\"-10\" x2=\"-10\" y1=\"{}\" y2=\"{}\"/>", index, kTop,
                 kTop + plot_h);
  out += "\n</svg>\n";

  // The hover read-out's data: one row per sample, bytes per series, on the shared axis.
  nlohmann::json rows = nlohmann::json::array();
  for (const Sample& s : samples) {
    nlohmann::json row = nlohmann::json::array({s.ts_us});
    for (const auto b : s.bytes) row.push_back(b);
    rows.push_back(row);
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& ph : d.phases) phases.push_back({ph.phase, ph.start_us + offset_us, ph.end_us + offset_us});
  const nlohmann::json data = {{"t0", axis.t0}, {"t1", axis.t1},   {"left", kLeft}, {"right", kWidth - kRight},
                               {"rows", rows},  {"phases", phases}};
  fmt::format_to(std::back_inserter(out), "<script type=\"application/json\" id=\"kvremap-samples-{}\">{}</script>\n",
                 index, script_json(data));
  fmt::format_to(std::back_inserter(out), "<div class=\"readout\" id=\"readout-{}\">hover over the chart</div>\n",
                 index);

  // The figures as text (the same as report --json).
  out += "<table class=\"figures\"><tr><th>category</th><th>peak</th><th>peak at</th><th>live at end</th></tr>\n";
  for (const auto& [name, stats] : d.categories) {
    fmt::format_to(std::back_inserter(out),
                   "<tr data-category=\"{0}\"><td>{0}</td><td data-bytes=\"{1}\">{2}</td><td>{3:.3f} s</td><td "
                   "data-bytes=\"{4}\">{5}</td></tr>\n",
                   escape(name), stats.peak_bytes, report::format_bytes(stats.peak_bytes), stats.peak_ts_us / 1e6,
                   stats.live_bytes, report::format_bytes(stats.live_bytes));
  }
  out += "</table>\n";
  if (d.kv.planned || d.kv.committed)
    fmt::format_to(std::back_inserter(out),
                   "<p class=\"kv\">KV cache: {} in {} tensors; committed {} on the device, {} on the host; margin {} "
                   "({})</p>\n",
                   report::format_bytes(d.kv.kv_bytes), d.kv.tensors, report::format_bytes(d.kv.device_bytes),
                   report::format_bytes(d.kv.host_bytes), report::format_signed_bytes(d.kv.margin_bytes),
                   escape(d.kv.verdict));
}

constexpr const char* kStyle = R"(<style>
body{font:13px sans-serif;margin:16px;color:#212121}
h2{font-size:14px;margin:18px 0 4px}
.phase-name{font-size:11px;fill:#3949ab}
.label{font-size:10px;fill:#212121}
.tick{font-size:10px;fill:#616161}
.axis{stroke:#616161}
.capacity{stroke:#c62828;stroke-dasharray:6 3}
.peak circle{fill:#000}
.commit line{stroke:#2e7d32;stroke-width:2;stroke-dasharray:4 2}
.oom line{stroke:#c62828;stroke-width:2}
.query line{stroke:#6d4c41}
.query rect{fill:#6d4c41}
.query circle{fill:#fff;stroke:#6d4c41}
.cursor{stroke:#000;stroke-width:1}
.readout{font:12px monospace;white-space:pre;min-height:3em}
.figures{border-collapse:collapse;margin:4px 0}
.figures td,.figures th{border:1px solid #ddd;padding:2px 8px;text-align:right}
.legend span{display:inline-block;margin-right:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
</style>
)";

// The hover read-out: the sample under the pointer, per series, with the phase it falls in.
constexpr const char* kScript = R"(<script>
(function () {
  var names = %SERIES%;
  function gib(b) { return (b / 1073741824).toFixed(2) + ' GiB'; }
  var panels = document.querySelectorAll('svg.panel');
  panels.forEach(function (svg) {
    var i = svg.getAttribute('data-panel');
    var data = JSON.parse(document.getElementById('kvremap-samples-' + i).textContent);
    var readout = document.getElementById('readout-' + i);
    var cursor = document.getElementById('cursor-' + i);
    svg.addEventListener('mousemove', function (e) {
      var box = svg.getBoundingClientRect();
      var x = (e.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
      var t = data.t0 + (x - data.left) / (data.right - data.left) * (data.t1 - data.t0);
      var row = null;
      for (var k = 0; k < data.rows.length && data.rows[k][0] <= t; ++k) row = data.rows[k];
      cursor.setAttribute('x1', x); cursor.setAttribute('x2', x);
      var phase = '';
      data.phases.forEach(function (p, k) {  // the last phase lasts to the end of the axis
        if (t >= p[1] && (t < p[2] || k === data.phases.length - 1)) phase = p[0];
      });
      var text = (t / 1e6).toFixed(3) + ' s  ' + phase;
      if (row) {
        var total = 0;
        for (var s = 0; s < names.length; ++s) {
          total += row[s + 1];
          if (row[s + 1] > 0) text += '\n  ' + names[s] + ': ' + gib(row[s + 1]);
        }
        text += '\n  all: ' + gib(total);
      }
      readout.textContent = text;
    });
  });
  var figures = JSON.parse(document.getElementById('kvremap-figures').textContent);
  document.getElementById('kvremap-status').textContent =
      'ready: ' + panels.length + ' panels, ' + figures.length + ' processes';
})();
</script>
)";

}  // namespace

std::string render_html(const std::vector<analysis::ProcessFigures>& processes) {
  // Processes share the axis from the earliest wall-clock start; without one in every header, each starts at 0.
  bool wall_clock = !processes.empty();
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  for (const auto& p : processes) {
    wall_clock = wall_clock && p.header.start_unix_ns > 0;
    earliest = std::min(earliest, p.header.start_unix_ns);
  }
  std::vector<double> offsets;
  Axis axis{0, 0};
  for (const auto& p : processes) {
    offsets.push_back(wall_clock ? static_cast<double>(p.header.start_unix_ns - earliest) / 1000.0 : 0.0);
    axis.t1 = std::max(axis.t1, offsets.back() + p.end_us);
  }
  if (axis.t1 <= axis.t0) axis.t1 = axis.t0 + 1;

  nlohmann::json figures = nlohmann::json::array();
  for (const auto& p : processes) figures.push_back(report::report_json(p));
  nlohmann::json series = nlohmann::json::array();
  for (const char* name : kSeries) series.push_back(name);

  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvremap plot</title>\n";
  out += kStyle;
  out += "</head><body>\n<h1>kvremap: device memory over time</h1>\n";
  fmt::format_to(std::back_inserter(out),
                 "<p>{} processes; time axis: {}. <span id=\"kvremap-status\">scripts did not run</span></p>\n",
                 processes.size(),
                 wall_clock ? "wall clock from the earliest start"
                            : "each process from its first event (a header lacks start_unix_ns)");
  out += "<p class=\"legend\">";
  for (std::size_t i = 0; i < kSeriesCount; ++i)
    fmt::format_to(std::back_inserter(out), "<span><i style=\"background:{}\"></i>{}</span>", kColours[i], kSeries[i]);
  out +=
      "<span>&#9679; category peak</span><span>&#9632;/&#9675; memory query: used per the driver / per what the "
      "engine was told</span></p>\n";
  std::size_t index = 0;
  for (std::size_t i = 0; i < processes.size(); ++i)
    for (const auto& d : processes[i].devices) panel(out, index++, processes[i], d, offsets[i], axis);
  fmt::format_to(std::back_inserter(out), "<script type=\"application/json\" id=\"kvremap-figures\">{}</script>\n",
                 script_json(figures));
  std::string script = kScript;
  script.replace(script.find("%SERIES%"), 8, series.dump());
  out += script;
  out += "</body></html>\n";
  return out;
}

}  // namespace kvremap::plot
