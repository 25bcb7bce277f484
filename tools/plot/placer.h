// Puts labels where they overlap no label already placed: the first free spot among a label's candidates.
#pragma once

#include <vector>

#include "tools/plot/scene.h"

namespace kvremap::plot {

class LabelPlacer {
 public:
  explicit LabelPlacer(Box bounds) : bounds_(bounds) {}
  // Moves `label` to the first of `candidates` (baseline points) where its box lies inside the bounds
  // and clear of every placed box; false (label untouched) where none is free.
  bool place(Label& label, const std::vector<Point>& candidates);
  // A box that labels must keep clear of (a legend swatch).
  void reserve(const Box& box) { placed_.push_back(box); }

 private:
  Box bounds_;
  std::vector<Box> placed_;
};

}  // namespace kvremap::plot
