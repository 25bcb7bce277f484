// `kvremap report --json` and the per-phase attribution table of the text report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/analysis.h"

namespace kvremap::report {

// The text report's figures, machine-readable: identity, ending, per device the category table,
// the phase attribution and the KV cache's placement; checkpoints and phase changes.
nlohmann::json report_json(const analysis::ProcessFigures& process);

// Per device and phase: peak, bytes allocated in the phase and still live at its end by category,
// and the callers holding the most memory at the phase's peak.
std::string render_phase_attribution(const analysis::ProcessFigures& process);

// The text report's out-of-memory section: each snapshot's request, what was live and who held it.
std::string render_oom_snapshots(const analysis::ProcessFigures& process);

}  // namespace kvremap::report
