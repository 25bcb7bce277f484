// `kvremap what-if`: what a start at another memory share would do, stock and under kvremap (vLLM, SGLang).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "policy/commit_plan.h"
#include "tools/analysis.h"

namespace kvremap::what_if {

// The engine flag a share is given with: vLLM sizes its KV cache from --gpu-memory-utilization,
// SGLang from --mem-fraction-static; both KV sizes are linear in the share.
enum class ShareFlag { gpu_memory_utilization, mem_fraction_static };

struct Settings {
  ShareFlag flag = ShareFlag::gpu_memory_utilization;
  double share = 0;  // the share to replay at
  std::optional<std::uint64_t> headroom_bytes;  // KVREMAP_HEADROOM for the replayed start
  std::optional<std::uint64_t> chunk_bytes;     // KVREMAP_CHUNK_BYTES for the replayed start
};

struct Outcome {
  int device = 0;
  double measured_utilization = 0;  // the traced start's
  std::uint64_t measured_kv_bytes = 0;
  std::uint64_t kv_step_bytes = 0;  // the KV size is a multiple of it: tensors x granularity
  // What the engine sizes at the new utilisation (0: it refuses). The engine rounds its KV size down
  // per tensor and the trace keeps only the result, so the engine's own figure is this or one step more.
  std::uint64_t kv_bytes = 0;
  std::string refused;  // the engine's own refusal (before any KV), or empty
  // Stock: the KV cache on the device from the KV burst on; it needs the post-KV work's peak beside.
  std::uint64_t stock_need_bytes = 0;       // KV + the largest post-KV transient
  std::uint64_t stock_available_bytes = 0;  // free once the KV burst ended, with nothing deferred
  std::string stock_oom_phase;              // empty: stock starts
  // kvremap: policy::plan_commit on the traced start's measurements with the new KV size.
  policy::CommitPlan plan;
  std::uint64_t headroom_bytes = 0;
  std::string note;  // an assumption the figures rest on, or empty
};

// Throws std::invalid_argument with one line when the trace cannot answer: not a vLLM or SGLang
// start, a share flag that is not the traced engine's, a share the trace does not record, or no
// "kv commit plan" (a start under KVREMAP_MODE=defer) on any device.
std::vector<Outcome> replay(const analysis::ProcessFigures& process, const Settings& settings);

std::string render(const analysis::ProcessFigures& process, const Settings& settings,
                   const std::vector<Outcome>& outcomes);
nlohmann::json render_json(const analysis::ProcessFigures& process, const Settings& settings,
                           const std::vector<Outcome>& outcomes);

}  // namespace kvremap::what_if
