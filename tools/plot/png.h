// Renders the plot's scene as a PNG image through cairo (every panel stacked under its heading).
#pragma once

#include <string>

#include "tools/plot/scene.h"

namespace kvremap::plot {

// The PNG file's bytes; empty with `error` set where cairo failed.
std::string render_png(const Scene& scene, std::string& error);

}  // namespace kvremap::plot
