// Writes the plot as an HTML page (the scene's SVG, a hover read-out and the figures as tables), an SVG or a PNG (tools/plot.h).
#include "tools/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tools/plot/png.h"
#include "tools/plot/svg.h"
#include "tools/report.h"
#include "tools/report_json.h"
#include "tools/start_up_work.h"

namespace kvremap::plot {
namespace {

// JSON inside <script>: "</" must not close the element.
std::string script_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  for (const char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

// One row of a figures table; rows whose figures are all zero are left out.
void byte_row(std::string& out, const std::string& what, std::uint64_t bytes, const char* attribute) {
  if (bytes == 0) return;
  fmt::format_to(std::back_inserter(out), "<tr {}=\"{}\"><td>{}</td><td data-bytes=\"{}\">{}</td></tr>\n", attribute,
                 xml_escape(what), xml_escape(what), bytes, report::format_bytes(bytes));
}

void panel_html(std::string& out, std::size_t index, const Panel& panel, const analysis::DeviceFigures& d) {
  fmt::format_to(std::back_inserter(out), "<h2>{}</h2>\n", xml_escape(panel.heading));
  out += svg_panel(panel, index);
  // The hover read-out's data: one row per sample, bytes per series, on the panel's axis.
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [ts, stack] : panel.samples) {
    nlohmann::json row = nlohmann::json::array({ts});
    for (const auto b : stack) row.push_back(b);
    rows.push_back(row);
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& [name, start, end] : panel.phases) phases.push_back({name, start, end});
  const nlohmann::json data = {{"t0", panel.t0_us},       {"t1", panel.t1_us}, {"left", panel.plot.x},
                               {"right", panel.plot.x + panel.plot.w}, {"rows", rows}, {"phases", phases}};
  fmt::format_to(std::back_inserter(out), "<script type=\"application/json\" id=\"kvremap-samples-{}\">{}</script>\n",
                 index, script_json(data));
  fmt::format_to(std::back_inserter(out), "<div class=\"readout\" id=\"readout-{}\">hover over the chart</div>\n",
                 index);

  // The figures as text (the same as report --json), without rows of zeros.
  out += "<table class=\"figures\"><tr><th>category</th><th>peak</th><th>peak at</th><th>live at end</th></tr>\n";
  for (const auto& [name, stats] : d.categories) {
    if (stats.peak_bytes == 0 && stats.live_bytes == 0) continue;
    fmt::format_to(std::back_inserter(out),
                   "<tr data-category=\"{0}\"><td>{0}</td><td data-bytes=\"{1}\">{2}</td><td>{3:.3f} s</td><td "
                   "data-bytes=\"{4}\">{5}</td></tr>\n",
                   xml_escape(name), stats.peak_bytes, report::format_bytes(stats.peak_bytes), stats.peak_ts_us / 1e6,
                   stats.live_bytes, report::format_bytes(stats.live_bytes));
  }
  out += "</table>\n";
  if (d.kv.deferred || d.kv.planned || d.kv.committed) {
    out += "<table class=\"kv\"><tr><th>KV cache</th><th>bytes</th></tr>\n";
    byte_row(out, "KV reserved", d.kv.kv_bytes, "data-kv");
    byte_row(out, "KV on device", d.kv.device_bytes, "data-kv");
    byte_row(out, "KV on scratch", d.kv.scratch_bytes, "data-kv");
    byte_row(out, "KV on host", d.kv.host_bytes, "data-kv");
    out += "</table>\n";
    fmt::format_to(std::back_inserter(out), "<p class=\"kv\">KV cache: {} tensors; margin {} ({})</p>\n", d.kv.tensors,
                   report::format_signed_bytes(d.kv.margin_bytes), xml_escape(d.kv.verdict));
  }
  if (!d.phases.empty()) {
    out += "<table class=\"phases\"><tr><th>phase</th><th>from</th><th>to</th><th>peak</th></tr>\n";
    for (const auto& ph : d.phases)
      fmt::format_to(std::back_inserter(out),
                     "<tr data-phase=\"{0}\"><td>{0}</td><td>{1:.3f} s</td><td>{2:.3f} s</td><td data-bytes=\"{3}\">{4}"
                     "</td></tr>\n",
                     xml_escape(ph.phase), ph.start_us / 1e6, ph.end_us / 1e6, ph.peak_bytes,
                     report::format_bytes(ph.peak_bytes));
    out += "</table>\n";
  }
  // What the start-up work after the KV cache needed, by name: autotuning's peak is not hidden among "other".
  if (const auto work = analysis::start_up_work_lines(analysis::start_up_work(d)); !work.empty()) {
    out += "<ul class=\"start-up-work\">\n";
    for (const std::string& line : work) out += "<li>" + xml_escape(line) + "</li>\n";
    out += "</ul>\n";
  }
  if (!panel.dropped_labels.empty()) {
    std::string names;
    for (const auto& l : panel.dropped_labels) names += (names.empty() ? "" : "; ") + xml_escape(l);
    fmt::format_to(std::back_inserter(out), "<p class=\"dropped\">not labelled in the chart (no room; in the tables): {}</p>\n",
                   names);
  }
}

constexpr const char* kStyle = R"(<style>
body{font:13px sans-serif;margin:16px;color:#212121}
h2{font-size:14px;margin:18px 0 4px}
.readout{font:12px monospace;white-space:pre;min-height:3em}
.figures{border-collapse:collapse;margin:4px 0}
.figures td,.figures th{border:1px solid #ddd;padding:2px 8px;text-align:right}
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

std::optional<Format> format_for_path(const std::string& path) {
  const auto slash = path.rfind('/');
  const auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1) return Format::html;
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == "html" || ext == "htm") return Format::html;
  if (ext == "svg") return Format::svg;
  if (ext == "png") return Format::png;
  return std::nullopt;
}

std::string render_html(const std::vector<analysis::ProcessFigures>& processes, Align align) {
  const Scene scene = build_scene(processes, align);
  nlohmann::json figures = nlohmann::json::array();
  for (const auto& p : processes) figures.push_back(report::report_json(p));
  nlohmann::json series = nlohmann::json::array();
  for (const char* name : kSeries) series.push_back(name);

  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kvremap plot</title>\n";
  out += kStyle;
  out += "</head><body>\n<h1>kvremap: device memory over time</h1>\n";
  fmt::format_to(std::back_inserter(out),
                 "<p>{} processes; time axis: {}. The KV cache is drawn at its reserved size: hatched while it lies "
                 "on the scratch (deferred), solid where the device backs it, yellow where host memory does. "
                 "<span id=\"kvremap-status\">scripts did not run</span></p>\n",
                 processes.size(),
                 scene.wall_clock ? "wall clock from the earliest start"
                 : align == Align::start
                     ? "each process from its own first event"
                     : "each process from its first event (a header lacks start_unix_ns)");
  std::size_t index = 0;
  for (const auto& p : processes)
    for (const auto& d : p.devices) {
      panel_html(out, index, scene.panels[index], d);
      ++index;
    }
  fmt::format_to(std::back_inserter(out), "<script type=\"application/json\" id=\"kvremap-figures\">{}</script>\n",
                 script_json(figures));
  std::string script = kScript;
  script.replace(script.find("%SERIES%"), 8, series.dump());
  out += script;
  out += "</body></html>\n";
  return out;
}

std::string render(const std::vector<analysis::ProcessFigures>& processes, Format format, Align align,
                   std::string& error) {
  if (format == Format::html) return render_html(processes, align);
  const Scene scene = build_scene(processes, align);
  // The page still shows the processes' tables; a picture of nothing would look like a failure.
  if (scene.panels.empty()) {
    error = "no device memory recorded in the traces: nothing to draw (the .html page shows what they hold)";
    return {};
  }
  return format == Format::svg ? svg_document(scene) : render_png(scene, error);
}

}  // namespace kvremap::plot
