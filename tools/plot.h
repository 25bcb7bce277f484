// `kvremap plot`: device memory over time as a self-contained HTML page, an SVG document or a PNG image.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/analysis.h"
#include "tools/plot/scene.h"

namespace kvremap::plot {

enum class Format { html, svg, png };

// The format an output path's extension names (.html/.htm, .svg, .png, any case; a name without an
// extension, such as /dev/stdout, is the HTML page), or nullopt for any other extension.
std::optional<Format> format_for_path(const std::string& path);

// One panel per process and device (tools/plot/scene.h). The page embeds report --json of each process
// in <script type="application/json" id="kvremap-figures"> (an array, in input order) and shows the
// figures as tables; nothing is fetched when it is viewed.
std::string render_html(const std::vector<analysis::ProcessFigures>& processes, Align align = Align::wall);

// The output in `format`; empty with `error` set where it could not be drawn.
std::string render(const std::vector<analysis::ProcessFigures>& processes, Format format, Align align,
                   std::string& error);

}  // namespace kvremap::plot
