// SVG text of the plot's scene (tools/plot/svg.h).
#include "tools/plot/svg.h"

#include <fmt/format.h>

#include <iterator>

namespace kvremap::plot {
namespace {

constexpr double kHeading = 24;  // a standalone document's heading above each panel
constexpr const char* kFont = "DejaVu Sans, Verdana, sans-serif";

void style_attributes(std::string& out, const Style& s, std::size_t index) {
  if (s.hatched)
    fmt::format_to(std::back_inserter(out), " fill=\"url(#hatch-{})\"", index);
  else
    fmt::format_to(std::back_inserter(out), " fill=\"{}\"", s.fill.empty() ? "none" : s.fill);
  if (!s.stroke.empty() && !s.hatched)
    fmt::format_to(std::back_inserter(out), " stroke=\"{}\" stroke-width=\"{}\"", s.stroke, s.stroke_width);
  if (s.dashed) out += " stroke-dasharray=\"6 3\"";
}

void shape(std::string& out, const Shape& shape, std::size_t index) {
  if (const auto* r = std::get_if<Rect>(&shape)) {
    fmt::format_to(std::back_inserter(out), "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"",
                   r->box.x, r->box.y, r->box.w, r->box.h);
    style_attributes(out, r->style, index);
    out += "/>";
  } else if (const auto* p = std::get_if<Path>(&shape)) {
    out += p->closed ? "<polygon points=\"" : "<polyline points=\"";
    for (const Point& pt : p->points) fmt::format_to(std::back_inserter(out), "{:.1f},{:.1f} ", pt.x, pt.y);
    out += "\"";
    style_attributes(out, p->style, index);
    out += "/>";
  } else if (const auto* c = std::get_if<Circle>(&shape)) {
    fmt::format_to(std::back_inserter(out), "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\"", c->centre.x, c->centre.y,
                   c->r);
    style_attributes(out, c->style, index);
    out += "/>";
  } else if (const auto* l = std::get_if<Label>(&shape)) {
    const Box b = l->box();
    fmt::format_to(std::back_inserter(out),
                   "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" fill=\"{}\" text-anchor=\"{}\"{} "
                   "data-box=\"{:.1f} {:.1f} {:.1f} {:.1f}\">{}</text>",
                   l->at.x, l->at.y, l->size, l->fill,
                   l->anchor == Anchor::start ? "start" : l->anchor == Anchor::middle ? "middle" : "end",
                   l->bold ? " font-weight=\"bold\"" : "", b.x, b.y, b.w, b.h, xml_escape(l->text));
  }
}

// The panel's marks, with the scratch band's hatching defined under `index`.
void body(std::string& out, const Panel& panel, std::size_t index) {
  fmt::format_to(std::back_inserter(out),
                 "<defs><pattern id=\"hatch-{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                 "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"{}\"/><line x1=\"0\" "
                 "y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#1565c0\" stroke-width=\"2\"/></pattern></defs>\n",
                 index, series_colour(7));
  for (const Mark& m : panel.marks) {
    fmt::format_to(std::back_inserter(out), "<g class=\"{}\"", m.css_class);
    for (const auto& [key, value] : m.data) fmt::format_to(std::back_inserter(out), " data-{}=\"{}\"", key, xml_escape(value));
    out += ">";
    for (const Shape& s : m.shapes) shape(out, s, index);
    if (!m.title.empty()) fmt::format_to(std::back_inserter(out), "<title>{}</title>", xml_escape(m.title));
    out += "</g>\n";
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
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

std::string svg_panel(const Panel& panel, std::size_t index) {
  std::string out = fmt::format(
      "<svg class=\"panel\" id=\"panel-{0}\" data-panel=\"{0}\" width=\"{1}\" height=\"{2}\" viewBox=\"0 0 {1} {2}\" "
      "font-family=\"{3}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
      index, panel.width, panel.height, kFont);
  body(out, panel, index);
  fmt::format_to(std::back_inserter(out),
                 "<line class=\"cursor\" id=\"cursor-{}\" x1=\"-10\" x2=\"-10\" y1=\"{}\" y2=\"{}\" stroke=\"#000\"/>\n",
                 index, panel.plot.y, panel.plot.y + panel.plot.h);
  out += "</svg>\n";
  return out;
}

std::string svg_document(const Scene& scene) {
  double width = 1, height = 0;
  for (const Panel& p : scene.panels) {
    width = std::max(width, p.width);
    height += kHeading + p.height;
  }
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"{2}\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
      width, std::max(1.0, height), kFont);
  double y = 0;
  for (std::size_t i = 0; i < scene.panels.size(); ++i) {
    const Panel& p = scene.panels[i];
    fmt::format_to(std::back_inserter(out),
                   "<text class=\"heading\" x=\"8\" y=\"{:.1f}\" font-size=\"14\" font-weight=\"bold\" "
                   "fill=\"#212121\">{}</text>\n<g class=\"panel\" data-panel=\"{}\" transform=\"translate(0 {:.1f})\">\n",
                   y + 17, xml_escape(fit_text(p.heading, 14 * 1.1, p.width - 16)), i, y + kHeading);
    body(out, p, i);
    out += "</g>\n";
    y += kHeading + p.height;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace kvremap::plot
