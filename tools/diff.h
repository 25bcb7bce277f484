// `kvremap diff A B`: two runs or two ranks side by side, largest differences first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/analysis.h"

namespace kvremap::diff {

// One compared figure: a phase's peak or end-of-phase live bytes of a category, or a KV figure.
struct Row {
  std::string what;  // e.g. "capture: graph_pool peak", "kv: device bytes"
  std::int64_t a = 0;
  std::int64_t b = 0;
  std::int64_t delta() const { return b - a; }
};

// Rows for device `device_a` of A against `device_b` of B, sorted by |B - A|, largest first;
// rows where both are 0 are left out.
std::vector<Row> compare(const analysis::DeviceFigures& a, const analysis::DeviceFigures& b);

// The whole text: which devices were paired, the KV each got and its margin, then the rows.
std::string render_diff(const analysis::ProcessFigures& a, const analysis::ProcessFigures& b);

}  // namespace kvremap::diff
