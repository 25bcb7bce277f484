// Draws the plot's scene with cairo's image surface and encodes it with cairo's PNG writer (tools/plot/png.h).
#include "tools/plot/png.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace kvremap::plot {
namespace {

constexpr double kHeading = 24;  // as in the SVG document (tools/plot/svg.cpp)
constexpr const char* kFace = "DejaVu Sans";

void colour(cairo_t* cr, const std::string& hex) {
  const unsigned long v = std::strtoul(hex.c_str() + (hex.empty() ? 0 : 1), nullptr, 16);
  const unsigned long rgb = hex.size() == 4 ? ((v >> 8 & 0xF) * 0x110000 | (v >> 4 & 0xF) * 0x1100 | (v & 0xF) * 0x11) : v;
  cairo_set_source_rgb(cr, static_cast<double>(rgb >> 16 & 0xFF) / 255, static_cast<double>(rgb >> 8 & 0xFF) / 255,
                       static_cast<double>(rgb & 0xFF) / 255);
}

// Fills and strokes the current path as `s` says; the hatching is lines clipped to it.
void paint(cairo_t* cr, const Style& s, bool closed) {
  if (closed && !s.fill.empty()) {
    colour(cr, s.fill);
    cairo_fill_preserve(cr);
  }
  if (s.hatched) {
    cairo_save(cr);
    cairo_clip_preserve(cr);
    double x0, y0, x1, y1;
    cairo_clip_extents(cr, &x0, &y0, &x1, &y1);
    cairo_new_path(cr);
    for (double d = x0 - (y1 - y0); d < x1; d += 6) {
      cairo_move_to(cr, d, y1);
      cairo_line_to(cr, d + (y1 - y0), y0);
    }
    colour(cr, s.stroke);
    cairo_set_line_width(cr, 1.5);
    cairo_stroke(cr);
    cairo_restore(cr);
    cairo_new_path(cr);
    return;
  }
  if (!s.stroke.empty()) {
    colour(cr, s.stroke);
    cairo_set_line_width(cr, s.stroke_width);
    const double dash[] = {6, 3};
    cairo_set_dash(cr, dash, s.dashed ? 2 : 0, 0);
    cairo_stroke_preserve(cr);
    cairo_set_dash(cr, dash, 0, 0);
  }
  cairo_new_path(cr);
}

void text(cairo_t* cr, const Label& l) {
  cairo_select_font_face(cr, kFace, CAIRO_FONT_SLANT_NORMAL, l.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, l.size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, l.text.c_str(), &e);
  // The anchor as in SVG; the layout's box (decided in the scene) is wider than the drawn text.
  const double x = l.anchor == Anchor::start ? l.at.x : l.anchor == Anchor::middle ? l.at.x - e.x_advance / 2
                                                                                    : l.at.x - e.x_advance;
  colour(cr, l.fill);
  cairo_move_to(cr, x, l.at.y);
  cairo_show_text(cr, l.text.c_str());
  cairo_new_path(cr);
}

void draw(cairo_t* cr, const Shape& shape) {
  if (const auto* r = std::get_if<Rect>(&shape)) {
    cairo_rectangle(cr, r->box.x, r->box.y, r->box.w, r->box.h);
    paint(cr, r->style, true);
  } else if (const auto* p = std::get_if<Path>(&shape)) {
    if (p->points.empty()) return;
    cairo_move_to(cr, p->points.front().x, p->points.front().y);
    for (const Point& pt : p->points) cairo_line_to(cr, pt.x, pt.y);
    if (p->closed) cairo_close_path(cr);
    paint(cr, p->style, p->closed);
  } else if (const auto* c = std::get_if<Circle>(&shape)) {
    cairo_new_sub_path(cr);
    cairo_arc(cr, c->centre.x, c->centre.y, c->r, 0, 2 * M_PI);
    paint(cr, c->style, true);
  } else if (const auto* l = std::get_if<Label>(&shape)) {
    text(cr, *l);
  }
}

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

std::string render_png(const Scene& scene, std::string& error) {
  double width = 1, height = 0;
  for (const Panel& p : scene.panels) {
    width = std::max(width, p.width);
    height += kHeading + p.height;
  }
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(std::ceil(width)),
                                                        std::max(1, static_cast<int>(std::ceil(height))));
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  double y = 0;
  for (const Panel& p : scene.panels) {
    Label heading;
    heading.text = fit_text(p.heading, 14 * 1.1, p.width - 16);
    heading.size = 14;
    heading.bold = true;
    heading.at = {8, y + 17};
    text(cr, heading);
    cairo_save(cr);
    cairo_translate(cr, 0, y + kHeading);
    for (const Mark& m : p.marks)
      for (const Shape& s : m.shapes) draw(cr, s);
    cairo_restore(cr);
    y += kHeading + p.height;
  }
  std::string png;
  cairo_status_t status = cairo_status(cr);
  if (status == CAIRO_STATUS_SUCCESS) status = cairo_surface_write_to_png_stream(surface, append, &png);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  if (status != CAIRO_STATUS_SUCCESS) {
    error = cairo_status_to_string(status);
    return {};
  }
  return png;
}

}  // namespace kvremap::plot
