// Label placement against the boxes already placed (tools/plot/placer.h).
#include "tools/plot/placer.h"

#include <algorithm>

namespace kvremap::plot {

bool LabelPlacer::place(Label& label, const std::vector<Point>& candidates) {
  for (const Point& at : candidates) {
    Label trial = label;
    trial.at = at;
    const Box box = trial.box();
    if (!box.inside(bounds_)) continue;
    if (std::any_of(placed_.begin(), placed_.end(), [&](const Box& b) { return b.overlaps(box); })) continue;
    label.at = at;
    placed_.push_back(box);
    return true;
  }
  return false;
}

}  // namespace kvremap::plot
