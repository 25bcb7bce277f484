// Builds the plot's panels from the analysis: stacked series, markers, round ticks and labels placed clear of each other (tools/plot/scene.h).
#include "tools/plot/scene.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "tools/plot/placer.h"
#include "tools/plot/ticks.h"
#include "tools/report.h"

namespace kvremap::plot {

bool Box::overlaps(const Box& o) const { return x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h; }
bool Box::inside(const Box& o) const { return x >= o.x && y >= o.y && x + w <= o.x + o.w && y + h <= o.y + o.h; }

double text_width(const std::string& text, double size) {
  // Characters, not bytes (UTF-8 continuation bytes add nothing); 0.62 em is wider than DejaVu Sans's
  // average, so the drawn text stays inside its box.
  std::size_t chars = 0;
  for (const unsigned char c : text) chars += (c & 0xC0) != 0x80;
  return static_cast<double>(chars) * size * 0.62;
}

std::string fit_text(const std::string& text, double size, double width) {
  if (text_width(text, size) <= width) return text;
  std::string cut = text;
  while (!cut.empty() && text_width(cut + "…", size) > width) {
    // One whole character: its continuation bytes, then its first byte.
    while (!cut.empty()) {
      const auto c = static_cast<unsigned char>(cut.back());
      cut.pop_back();
      if ((c & 0xC0) != 0x80) break;
    }
  }
  return cut + "…";
}

Box Label::box() const {
  const double w = text_width(text, size) * (bold ? 1.1 : 1.0);
  const double x = anchor == Anchor::start ? at.x : anchor == Anchor::middle ? at.x - w / 2 : at.x - w;
  return {x, at.y - size * 0.95, w, size * 1.25};
}

namespace {

constexpr double kWidth = 1100;
constexpr double kLeft = 80;
constexpr double kRight = 20;
constexpr double kLane = 14;        // one row of phase labels above the chart
constexpr std::size_t kLanes = 4;   // rows of phase labels
constexpr double kTop = 8 + kLane * kLanes;
constexpr double kPlotHeight = 250;
constexpr double kLegendRow = 18;

constexpr const char* kColours[] = {"#9e9e9e", "#80cbc4", "#ce93d8", "#ffcc80", "#ef9a9a",
                                    "#e57373", "#1e88e5", "#bbdefb", "#fff176"};
constexpr const char* kLegend[] = {"other",      "async pool",   "vmm",           "module",    "graph exec",
                                   "graph pool", "KV on device", "KV on scratch", "KV on host"};
constexpr std::size_t kKvDevice = 6, kKvScratch = 7, kKvHost = 8;
constexpr const char* kHatch = "#1565c0";    // the scratch band's lines
constexpr const char* kReserved = "#0d47a1";  // the KV's reserved size, outlined

std::uint64_t at(const analysis::ByCategory& live, const char* name) {
  const auto found = live.find(name);
  return found == live.end() ? 0 : found->second;
}

// The stack at time ts (the process's own clock). The KV cache counts at its reserved size: while
// deferred all of it lies on the scratch, after the commit it is split as the commit placed it.
Stack stack_of(const analysis::ByCategory& live, const analysis::KvFigures& kv, double ts) {
  Stack s{};
  for (std::size_t i = 0; i < 6; ++i) s[i] = at(live, kSeries[i]);
  std::uint64_t known = 0;
  for (std::size_t i = 0; i < 6; ++i) known += s[i];
  std::uint64_t all = 0;
  for (const auto& [name, bytes] : live) all += bytes;
  s[0] += all - known - at(live, "kv");  // categories outside the fixed set count as other
  const std::uint64_t kv_live = at(live, "kv");
  const bool deferred =
      kv.reserved_ts_us >= 0 && ts >= kv.reserved_ts_us && (kv.commit_ts_us < 0 || ts < kv.commit_ts_us);
  if (deferred) {
    s[kKvScratch] = kv_live;
  } else if (kv.commit_ts_us >= 0 && ts >= kv.commit_ts_us) {
    s[kKvHost] = std::min(kv_live, kv.host_bytes);
    s[kKvDevice] = kv_live - s[kKvHost];
  } else {
    s[kKvDevice] = kv_live;
  }
  return s;
}

std::uint64_t through(const Stack& s, std::size_t last) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i <= last && i < kSeriesCount; ++i) sum += s[i];
  return sum;
}

std::vector<std::pair<double, Stack>> samples_of(const analysis::DeviceFigures& d, double offset_us) {
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
  std::vector<std::pair<double, Stack>> samples;
  for (const auto& p : points) samples.emplace_back(p.ts_us + offset_us, stack_of(p.live, d.kv, p.ts_us));
  return samples;
}

Label label(std::string text, double size, Anchor anchor, std::string fill = "#212121") {
  Label l;
  l.text = std::move(text);
  l.size = size;
  l.anchor = anchor;
  l.fill = std::move(fill);
  return l;
}

class PanelBuilder {
 public:
  PanelBuilder(const analysis::ProcessFigures& p, const analysis::DeviceFigures& d, double offset_us, double t0,
               double t1)
      : p_(p), d_(d), offset_(offset_us), placer_({0, 0, kWidth, 1e9}) {
    panel_.heading = fmt::format("{} · device {} · {}", p.header.process_name.empty() ? p.source : p.header.process_name,
                                 d.device, p.source);
    panel_.width = kWidth;
    panel_.plot = {kLeft, kTop, kWidth - kLeft - kRight, kPlotHeight};
    panel_.t0_us = t0;
    panel_.t1_us = t1;
    panel_.samples = samples_of(d, offset_us);
    for (const auto& ph : d.phases) panel_.phases.emplace_back(ph.phase, ph.start_us + offset_us, ph.end_us + offset_us);
    std::uint64_t top = d.total_bytes;
    for (const auto& [ts, s] : panel_.samples) top = std::max(top, through(s, kSeriesCount - 1));
    for (const auto& c : p.checkpoints)
      if (c.device == d.device) top = std::max(top, c.driver_total);
    y_ticks_ = byte_ticks(top);
    top_ = std::max(1.0, y_ticks_.back().value);
  }

  Panel build() {
    phase_bands();
    grid();
    areas();
    reserved_outline();
    capacity();
    commit();
    oom();
    queries();
    peaks();
    axes();
    phase_labels();
    peak_labels();
    legend();
    return std::move(panel_);
  }

 private:
  double x(double ts) const {
    return kLeft + (ts - panel_.t0_us) / (panel_.t1_us - panel_.t0_us) * (kWidth - kLeft - kRight);
  }
  double y(double bytes) const { return kTop + kPlotHeight - bytes / top_ * kPlotHeight; }
  double bottom() const { return kTop + kPlotHeight; }
  Mark& mark(std::string css_class) {
    panel_.marks.push_back({std::move(css_class), {}, {}, {}});
    return panel_.marks.back();
  }
  // Places a label at the first free candidate; one that fits nowhere is dropped and named.
  bool put(Mark& m, Label l, const std::vector<Point>& candidates) {
    if (!placer_.place(l, candidates)) {
      panel_.dropped_labels.push_back(l.text);
      return false;
    }
    m.shapes.emplace_back(std::move(l));
    return true;
  }

  void phase_bands() {
    for (std::size_t i = 0; i < d_.phases.size(); ++i) {
      const auto& ph = d_.phases[i];
      const double x0 = x(ph.start_us + offset_), x1 = x(ph.end_us + offset_);
      Mark& m = mark("phase");
      m.data.emplace_back("phase", ph.phase);
      m.shapes.emplace_back(
          Rect{{x0, kTop, std::max(0.0, x1 - x0), kPlotHeight}, {i % 2 == 0 ? "#f5f5f5" : "#e8eaf6", "", 1}});
    }
  }
  void grid() {
    Mark& m = mark("grid");
    for (const Tick& t : y_ticks_)
      m.shapes.emplace_back(Path{{{kLeft, y(t.value)}, {kWidth - kRight, y(t.value)}}, false, {"", "#e0e0e0", 1}});
  }
  void areas() {
    const auto& samples = panel_.samples;
    for (std::size_t series = 0; series < kSeriesCount && !samples.empty(); ++series) {
      std::vector<Point> upper, lower;
      bool any = false;
      for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto& [ts, s] = samples[i];
        const double next = i + 1 < samples.size() ? samples[i + 1].first : ts;
        const auto hi = static_cast<double>(through(s, series));
        const auto lo = series == 0 ? 0.0 : static_cast<double>(through(s, series - 1));
        any = any || hi != lo;
        upper.push_back({x(ts), y(hi)});
        upper.push_back({x(next), y(hi)});
        lower.push_back({x(ts), y(lo)});
        lower.push_back({x(next), y(lo)});
      }
      if (!any) continue;
      present_[series] = true;
      upper.insert(upper.end(), lower.rbegin(), lower.rend());
      Mark& m = mark("area");
      m.data.emplace_back("series", kSeries[series]);
      Style style{kColours[series], series == kKvScratch ? kHatch : "", 1};
      style.hatched = series == kKvScratch;
      m.shapes.emplace_back(Path{std::move(upper), true, style});
    }
  }
  // The KV cache's reserved size, outlined over its parts, where it is live.
  void reserved_outline() {
    const auto& samples = panel_.samples;
    std::vector<Point> upper, lower;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const auto& [ts, s] = samples[i];
      if (s[kKvDevice] + s[kKvScratch] + s[kKvHost] == 0) continue;
      const double next = i + 1 < samples.size() ? samples[i + 1].first : ts;
      const auto hi = static_cast<double>(through(s, kKvHost)), lo = static_cast<double>(through(s, kKvDevice - 1));
      upper.push_back({x(ts), y(hi)});
      upper.push_back({x(next), y(hi)});
      lower.push_back({x(ts), y(lo)});
      lower.push_back({x(next), y(lo)});
    }
    if (upper.empty()) return;
    kv_present_ = true;
    upper.insert(upper.end(), lower.rbegin(), lower.rend());
    Mark& m = mark("kv-reserved");
    m.shapes.emplace_back(Path{std::move(upper), true, {"", kReserved, 1.5}});
  }
  void capacity() {
    if (d_.total_bytes == 0) return;
    const double yy = y(static_cast<double>(d_.total_bytes));
    Mark& m = mark("capacity");
    m.data.emplace_back("bytes", std::to_string(d_.total_bytes));
    Style style{"", "#c62828", 1.5};
    style.dashed = true;
    m.shapes.emplace_back(Path{{{kLeft, yy}, {kWidth - kRight, yy}}, false, style});
    const double r = kWidth - kRight - 4;
    put(m, label("device " + report::format_bytes(d_.total_bytes), 10, Anchor::end, "#c62828"),
        {{r, yy - 3}, {r, yy + 12}, {r - 300, yy - 3}, {r - 300, yy + 12}});
  }
  // Candidates beside a vertical marker at x, from the chart's top down, right of it then left of it.
  std::vector<Point> beside(double at_x, const Label& l, double first_y) const {
    std::vector<Point> out;
    const double w = text_width(l.text, l.size);
    for (int row = 0; row < 8; ++row) {
      out.push_back({at_x + 4, first_y + row * 12});
      out.push_back({at_x - 4 - w, first_y + row * 12});
    }
    return out;
  }
  void commit() {
    if (d_.kv.commit_ts_us < 0) return;
    const double cx = x(d_.kv.commit_ts_us + offset_);
    Mark& m = mark("commit");
    Style style{"", "#2e7d32", 2};
    style.dashed = true;
    m.shapes.emplace_back(Path{{{cx, kTop}, {cx, bottom()}}, false, style});
    Label l = label(fmt::format("KV commit: {} device, {} host", report::format_bytes(d_.kv.device_bytes),
                                report::format_bytes(d_.kv.host_bytes)),
                    10, Anchor::start, "#1b5e20");
    put(m, l, beside(cx, l, kTop + 12));
  }
  void oom() {
    for (const analysis::OomSnapshot& s : d_.oom_snapshots) {
      std::string held;
      for (const auto& c : s.top_callers)
        held += fmt::format("{}{} {}", held.empty() ? "" : ", ", c.caller, report::format_bytes(c.bytes));
      const double ox = x(s.ts_us + offset_);
      Mark& m = mark("oom");
      m.data.emplace_back("phase", s.phase);
      m.title = fmt::format("{}: {} of {}; live {}; held by {}", s.phase, s.api, report::format_bytes(s.requested_bytes),
                            report::format_bytes(s.live_total_bytes), held.empty() ? std::string("-") : held);
      m.shapes.emplace_back(Path{{{ox, kTop}, {ox, bottom()}}, false, {"", "#c62828", 2}});
      Label l = label(fmt::format("out of memory: {} of {}", s.api, report::format_bytes(s.requested_bytes)), 10,
                      Anchor::start, "#b71c1c");
      put(m, l, beside(ox, l, kTop + 24));
    }
  }
  void queries() {
    for (const auto& c : p_.checkpoints) {
      if (c.device != d_.device || c.event.line == 0) continue;
      const std::uint64_t used_driver = c.driver_total > c.driver_free ? c.driver_total - c.driver_free : 0;
      const std::uint64_t used_told = c.returned_total > c.returned_free ? c.returned_total - c.returned_free : 0;
      const double qx = x(c.event.ts_us + offset_);
      const double yd = y(static_cast<double>(used_driver)), yt = y(static_cast<double>(used_told));
      Mark& m = mark("query");
      m.data.emplace_back("index", std::to_string(c.index));
      m.title = fmt::format("query {} ({}): driver free {}, told {}", c.index, c.phase,
                            report::format_bytes(c.driver_free), report::format_bytes(c.returned_free));
      m.shapes.emplace_back(Path{{{qx, yd}, {qx, yt}}, false, {"", "#6d4c41", 1}});
      m.shapes.emplace_back(Rect{{qx - 3, yd - 3, 6, 6}, {"#6d4c41", "", 1}});
      m.shapes.emplace_back(Circle{{qx, yt}, 3, {"#ffffff", "#6d4c41", 1}});
    }
  }
  void peaks() {
    for (const auto& [name, stats] : d_.categories) {
      if (stats.peak_bytes == 0) continue;
      Mark& m = mark("peak");
      m.data.emplace_back("category", name);
      m.title = fmt::format("{} peak {} at {:.3f} s", name, report::format_bytes(stats.peak_bytes),
                            stats.peak_ts_us / 1e6);
      m.shapes.emplace_back(Circle{{x(stats.peak_ts_us + offset_), y(static_cast<double>(stats.peak_bytes))},
                                   4,
                                   {"#000000", "", 1}});
      peak_marks_.push_back(panel_.marks.size() - 1);
    }
  }
  void axes() {
    Mark& m = mark("axis");
    m.shapes.emplace_back(Path{{{kLeft, kTop}, {kLeft, bottom()}, {kWidth - kRight, bottom()}}, false,
                               {"", "#616161", 1}});
    for (const Tick& t : y_ticks_) {
      m.shapes.emplace_back(Path{{{kLeft - 3, y(t.value)}, {kLeft, y(t.value)}}, false, {"", "#616161", 1}});
      put(m, label(t.label, 10, Anchor::end, "#616161"), {{kLeft - 5, y(t.value) + 4}});
    }
    for (const Tick& t : second_ticks(panel_.t0_us, panel_.t1_us)) {
      const double tx = x(t.value);
      m.shapes.emplace_back(Path{{{tx, bottom()}, {tx, bottom() + 3}}, false, {"", "#616161", 1}});
      put(m, label(t.label, 10, Anchor::middle, "#616161"), {{tx, bottom() + 17}});
    }
  }
  void phase_labels() {
    for (std::size_t i = 0; i < d_.phases.size(); ++i) {
      const auto& ph = d_.phases[i];
      Mark& m = mark("phase-name");
      m.data.emplace_back("phase", ph.phase);
      const double x0 = x(ph.start_us + offset_) + 3;
      std::vector<Point> rows;
      for (std::size_t r = 0; r < kLanes; ++r) rows.push_back({x0, kTop - 4 - static_cast<double>(r) * kLane});
      put(m, label(ph.phase, 11, Anchor::start, "#3949ab"), rows);
    }
  }
  void peak_labels() {
    for (const std::size_t index : peak_marks_) {
      Mark& m = panel_.marks[index];
      const auto& c = std::get<Circle>(m.shapes.front()).centre;
      const std::string name = m.data.front().second;
      Label l = label(name + " peak " + report::format_bytes(d_.categories.at(name).peak_bytes), 10, Anchor::start);
      const double w = text_width(l.text, l.size);
      std::vector<Point> candidates;
      for (const double dy : {-6.0, 14.0, -18.0, 26.0, -30.0, 38.0, -42.0})
        for (const double dx : {6.0, -6.0 - w, -w / 2}) candidates.push_back({c.x + dx, c.y + dy});
      put(m, l, candidates);
    }
  }
  void legend() {
    Mark& m = mark("legend");
    double lx = kLeft, ly = bottom() + 26;
    const auto item = [&](Style swatch, const std::string& text) {
      const double w = 16 + text_width(text, 10) + 14;
      if (lx + w > kWidth - kRight) {
        lx = kLeft;
        ly += kLegendRow;
      }
      m.shapes.emplace_back(Rect{{lx, ly, 12, 12}, std::move(swatch)});
      placer_.reserve({lx, ly, 12, 12});
      put(m, label(text, 10, Anchor::start), {{lx + 16, ly + 10}});
      lx += w;
    };
    for (std::size_t s = 0; s < kSeriesCount; ++s) {
      if (!present_[s]) continue;
      Style style{kColours[s], s == kKvScratch ? kHatch : "", 1};
      style.hatched = s == kKvScratch;
      item(style, kLegend[s]);
    }
    if (kv_present_) item({"", kReserved, 1.5}, "KV reserved");
    if (d_.total_bytes != 0) item({"", "#c62828", 1.5}, "device capacity");
    if (!peak_marks_.empty()) item({"#000000", "", 1}, "category peak");
    panel_.height = ly + 12 + 8;
  }

  const analysis::ProcessFigures& p_;
  const analysis::DeviceFigures& d_;
  double offset_;
  LabelPlacer placer_;
  Panel panel_;
  std::vector<Tick> y_ticks_;
  double top_ = 1;
  std::array<bool, kSeriesCount> present_{};
  bool kv_present_ = false;
  std::vector<std::size_t> peak_marks_;
};

}  // namespace

const char* series_colour(std::size_t series) { return kColours[series]; }
const char* series_legend(std::size_t series) { return kLegend[series]; }

std::vector<const Label*> labels_of(const Panel& panel) {
  std::vector<const Label*> out;
  for (const Mark& m : panel.marks)
    for (const Shape& s : m.shapes)
      if (const auto* l = std::get_if<Label>(&s)) out.push_back(l);
  return out;
}

Scene build_scene(const std::vector<analysis::ProcessFigures>& processes, Align align) {
  Scene scene;
  // Wall: from the earliest wall-clock start, where every header records one; else (and with
  // Align::start) each process from its own start, its trace's time 0 (the header, when the library
  // loaded in the process), so starts of one configuration are drawn over each other.
  bool wall_clock = align == Align::wall && !processes.empty();
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  for (const auto& p : processes) {
    wall_clock = wall_clock && p.header.start_unix_ns > 0;
    earliest = std::min(earliest, p.header.start_unix_ns);
  }
  scene.wall_clock = wall_clock;
  double t1 = 0;
  for (const auto& p : processes) {
    const double offset = wall_clock ? static_cast<double>(p.header.start_unix_ns - earliest) / 1000.0 : 0.0;
    scene.offsets_us.push_back(offset);
    t1 = std::max(t1, offset + p.end_us);
  }
  if (t1 <= 0) t1 = 1;
  for (std::size_t i = 0; i < processes.size(); ++i)
    for (const auto& d : processes[i].devices)
      scene.panels.push_back(PanelBuilder(processes[i], d, scene.offsets_us[i], 0, t1).build());
  return scene;
}

}  // namespace kvremap::plot
