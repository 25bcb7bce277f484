// What the start-up work after the KV cache needed on one device, by name (tools/start_up_work.h).
#include "tools/start_up_work.h"

#include <fmt/format.h>

#include "policy/units.h"

namespace kvremap::analysis {
namespace {

std::uint64_t at(const ByCategory& live, const char* category) {
  const auto found = live.find(category);
  return found == live.end() ? 0 : found->second;
}

std::uint64_t rise(std::uint64_t to, std::uint64_t from) { return to > from ? to - from : 0; }

const PhaseFigures* last_of(const DeviceFigures& device, const char* phase) {
  const PhaseFigures* last = nullptr;
  for (const PhaseFigures& p : device.phases)
    if (p.phase == phase) last = &p;
  return last;
}

}  // namespace

StartUpWork start_up_work(const DeviceFigures& device) {
  StartUpWork work;
  if (const PhaseFigures* p = last_of(device, "post_kv_warmup")) {
    const std::uint64_t start = beside_kv(p->live_at_start);
    work.warmup = {true, (p->end_us - p->start_us) / 1e6, rise(p->peak_beside_kv_bytes, start),
                   rise(beside_kv(p->live_at_end), start), at(p->allocated, "module")};
  }
  if (const PhaseFigures* p = last_of(device, "capture")) {
    work.capture = {true, (p->end_us - p->start_us) / 1e6,
                    rise(at(p->live_at_end, "graph_pool"), at(p->live_at_start, "graph_pool")),
                    rise(at(p->live_at_end, "graph_exec"), at(p->live_at_start, "graph_exec")),
                    rise(p->peak_beside_kv_bytes, beside_kv(p->live_at_start))};
  }
  return work;
}

std::vector<std::string> start_up_work_lines(const StartUpWork& work) {
  using policy::format_bytes;
  std::vector<std::string> lines;
  if (work.warmup.seen)
    lines.push_back(fmt::format(
        "post-KV warm-up (compilation, autotuning): peak {} beside the KV cache, {} left resident, {} of modules, {:.2f} s",
        format_bytes(work.warmup.peak_above_bytes), format_bytes(work.warmup.resident_bytes),
        format_bytes(work.warmup.modules_bytes), work.warmup.seconds));
  if (work.capture.seen)
    lines.push_back(fmt::format("CUDA-graph capture: graph pool {}, graph executables {}, peak {}, {:.2f} s",
                                format_bytes(work.capture.graph_pool_bytes), format_bytes(work.capture.graph_exec_bytes),
                                format_bytes(work.capture.peak_above_bytes), work.capture.seconds));
  return lines;
}

}  // namespace kvremap::analysis
