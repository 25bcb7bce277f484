// The plot's drawing model: panels of rectangles, paths, circles and labels with measured boxes, built
// once from the analysis and rendered alike to SVG (tools/plot/svg.h) and PNG (tools/plot/png.h).
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tools/analysis.h"

namespace kvremap::plot {

// The series stacked in each panel, bottom first: the non-KV categories, then the KV cache at its
// reserved size split by what backs it (the device, the deferral's scratch, host memory).
inline constexpr const char* kSeries[] = {"other",      "async_pool", "vmm",        "module", "graph_exec",
                                          "graph_pool", "kv_device",  "kv_scratch", "kv_host"};
inline constexpr std::size_t kSeriesCount = std::size(kSeries);
using Stack = std::array<std::uint64_t, kSeriesCount>;

// How several processes share the time axis: from the earliest wall-clock start (each placed at its
// own start), or each from its own start (its trace's time 0, the first event: starts of one
// configuration drawn over each other).
enum class Align { wall, start };

struct Point {
  double x = 0, y = 0;
};
struct Box {
  double x = 0, y = 0, w = 0, h = 0;
  bool overlaps(const Box& other) const;
  bool inside(const Box& outer) const;
};
struct Style {
  std::string fill;    // "#rrggbb", or empty for none
  std::string stroke;  // "#rrggbb", or empty for none
  double stroke_width = 1;
  bool dashed = false;
  bool hatched = false;  // diagonal lines in the stroke colour over the fill
};
struct Rect {
  Box box;
  Style style;
};
struct Path {
  std::vector<Point> points;
  bool closed = true;  // a filled polygon, else a line through the points
  Style style;
};
struct Circle {
  Point centre;
  double r = 3;
  Style style;
};
enum class Anchor { start, middle, end };
struct Label {
  std::string text;
  Point at;  // the baseline point the anchor names
  double size = 10;
  Anchor anchor = Anchor::start;
  std::string fill = "#212121";
  bool bold = false;
  // Where the text lies, from one estimate of its width shared by both renderers (wider than
  // DejaVu Sans, the face both use, so the drawn text stays inside).
  Box box() const;
};
double text_width(const std::string& text, double size);
// `text` cut to `width` with a trailing "…" where its estimated width is more.
std::string fit_text(const std::string& text, double size, double width);

using Shape = std::variant<Rect, Path, Circle, Label>;

// Shapes drawn together: one SVG <g> with its class, data attributes and hover title.
struct Mark {
  std::string css_class;
  std::vector<std::pair<std::string, std::string>> data;
  std::string title;
  std::vector<Shape> shapes;
};

// One process and device.
struct Panel {
  std::string heading;
  double width = 0, height = 0;
  Box plot;  // the chart's area inside the panel
  double t0_us = 0, t1_us = 1;
  std::vector<Mark> marks;  // drawn in order
  std::vector<std::string> dropped_labels;  // labels that fitted nowhere (their figures are in the tables)
  // For the hover read-out: bytes per series after each sample, on the panel's axis.
  std::vector<std::pair<double, Stack>> samples;
  std::vector<std::tuple<std::string, double, double>> phases;  // name, start, end on the axis
};

struct Scene {
  std::vector<Panel> panels;  // one per process and device, in input order
  std::vector<double> offsets_us;  // per process: added to its own timestamps on the axis
  bool wall_clock = false;  // Align::wall with every header's start_unix_ns
};

Scene build_scene(const std::vector<analysis::ProcessFigures>& processes, Align align);

// Every label in the panel, in panel coordinates.
std::vector<const Label*> labels_of(const Panel& panel);

// The series' colours and legend names.
const char* series_colour(std::size_t series);
const char* series_legend(std::size_t series);

}  // namespace kvremap::plot
