// Renders the plot's scene as SVG text: one <svg> per panel for the HTML page, or one standalone document.
#pragma once

#include <string>
#include <string_view>

#include "tools/plot/scene.h"

namespace kvremap::plot {

// XML text with <, >, & and " escaped.
std::string xml_escape(std::string_view text);

// One panel as an <svg class="panel" id="panel-INDEX"> element (the HTML page's; ids stay unique per index).
std::string svg_panel(const Panel& panel, std::size_t index);

// Every panel, stacked under its heading, as one standalone SVG document.
std::string svg_document(const Scene& scene);

}  // namespace kvremap::plot
