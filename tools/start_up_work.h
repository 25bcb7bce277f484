// What the start-up work after the KV cache needed on one device, by name: the post-KV warm-up (compilation and
// kernel autotuning) and CUDA-graph capture, instead of per-category rises where both are "other".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/analysis.h"

namespace kvremap::analysis {

// The phase from the KV burst's end to the first capture (policy::Phase::post_kv_warmup): vLLM's
// compile_or_warm_up_model (torch.compile's Inductor compilation, kernel autotuning, the warm-up forwards) and
// SGLang's warm-up forwards and autotuning. Figures are beside the KV cache, from the phase's start.
struct WarmupNeed {
  bool seen = false;
  double seconds = 0;
  std::uint64_t peak_above_bytes = 0;  // the highest it held at once beyond what was live at its start
  std::uint64_t resident_bytes = 0;    // what it left live at its end beyond that level
  std::uint64_t modules_bytes = 0;     // the kernel modules it loaded
};

// The capture phase (policy::Phase::capture): the graph pool the captures allocated into and the graph
// executables instantiated, as held at its end, and its peak beyond what was live at its start.
struct CaptureNeed {
  bool seen = false;
  double seconds = 0;
  std::uint64_t graph_pool_bytes = 0;
  std::uint64_t graph_exec_bytes = 0;
  std::uint64_t peak_above_bytes = 0;
};

struct StartUpWork {
  WarmupNeed warmup;
  CaptureNeed capture;
};

// From the device's phases; the last span of each phase (a profiling KV cache freed before its commit sends
// the phases back: the last warm-up is the one after the real KV cache).
StartUpWork start_up_work(const DeviceFigures& device);

// One line each for the warm-up and the capture that were seen, in human units: "post-KV warm-up
// (compilation, autotuning): peak 11.26 GiB beside the KV cache, 0.26 GiB left resident, 0.40 GiB of modules,
// 3.20 s".
std::vector<std::string> start_up_work_lines(const StartUpWork& work);

}  // namespace kvremap::analysis
