// `kvremap plot`: one self-contained HTML page (SVG and a little inline script) of device memory over time.
#pragma once

#include <string>
#include <vector>

#include "tools/analysis.h"

namespace kvremap::plot {

// The series stacked in each panel, bottom first: the non-KV categories, then the KV cache split by
// what backs it (the device, the deferral's scratch, host memory).
inline constexpr const char* kSeries[] = {"other",      "async_pool", "vmm",        "module", "graph_exec",
                                          "graph_pool", "kv_device",  "kv_scratch", "kv_host"};

// One panel per process and device on one time axis (processes aligned on their wall-clock start
// when every header records it, else on their first event). The page embeds report --json of each
// process in <script type="application/json" id="kvremap-figures"> (an array, in input order) and
// shows the same figures as text; nothing is fetched when it is viewed.
std::string render_html(const std::vector<analysis::ProcessFigures>& processes);

}  // namespace kvremap::plot
