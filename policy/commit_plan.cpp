// The commit decision: all on the device, the deficit at the end of every tensor on host, or a precise failure.
#include "policy/commit_plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "policy/sglang_model.h"
#include "policy/units.h"
#include "policy/vllm_model.h"

namespace kvremap::policy {
namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
  return buf;
}

// The flags that shrink the engine's KV cache by `shrink` bytes, for a start under kvremap or without it;
// for an engine kvremap does not know, both engines' flags.
std::string flags_for(const CommitInputs& in, std::uint64_t kv_bytes, std::uint64_t shrink, bool under_kvremap) {
  const KvShrink target{.shrink_bytes = shrink,
                        .kv_fit_bytes = kv_bytes > shrink ? kv_bytes - shrink : 0,
                        .device_total_bytes = in.device_total_bytes,
                        .under_kvremap = under_kvremap};
  const std::string vllm = vllm_shrink_flags(target, in.gpu_memory_utilization, in.kv_cache_memory.has_value());
  const std::string sglang = sglang_shrink_flags(target, in.mem_fraction_static);
  switch (in.engine) {
    case EngineKind::vllm:
      return vllm;
    case EngineKind::sglang:
      return sglang;
    case EngineKind::other:
      break;
  }
  return "a KV cache of " + std::to_string(target.kv_fit_bytes) + " bytes (" + gib(target.kv_fit_bytes) +
         ") fits: vLLM " + vllm + "; SGLang " + sglang;
}

std::uint64_t positive(std::int64_t value) { return value > 0 ? static_cast<std::uint64_t>(value) : 0; }

}  // namespace

std::string next_start_hint(const CommitInputs& in, std::int64_t margin_bytes) {
  const std::uint64_t kv_bytes = std::accumulate(in.tensor_bytes.begin(), in.tensor_bytes.end(), std::uint64_t{0});
  const std::uint64_t under = positive(-margin_bytes);
  const std::uint64_t without =
      positive(static_cast<std::int64_t>(in.post_kv_transient_bytes) - margin_bytes);  // >= under
  if (without == 0) return "";
  const std::string without_flags = flags_for(in, kv_bytes, without, false);
  if (under == 0) return "a start without kvremap needs " + without_flags;
  const std::string under_flags = flags_for(in, kv_bytes, under, true);
  if (under_flags == without_flags) return "next start, with or without kvremap: " + under_flags;
  return "next start under kvremap: " + under_flags + "; without kvremap: " + without_flags;
}

std::string_view to_string(CommitVerdict verdict) {
  switch (verdict) {
    case CommitVerdict::all_device:
      return "all_device";
    case CommitVerdict::host_tail:
      return "host_tail";
    case CommitVerdict::fail:
      break;
  }
  return "fail";
}

FreeWhileDeferred free_while_deferred(std::uint64_t driver_free, std::uint64_t deferred_bytes,
                                      std::uint64_t scratch_bytes) {
  const std::uint64_t hidden = deferred_bytes > scratch_bytes ? deferred_bytes - scratch_bytes : 0;
  if (driver_free >= hidden) return {driver_free - hidden, 0};
  return {0, hidden - driver_free};
}

CommitPlan plan_commit(const CommitInputs& in) {
  CommitPlan plan;
  const std::size_t n = in.tensor_bytes.size();
  plan.kv_bytes = std::accumulate(in.tensor_bytes.begin(), in.tensor_bytes.end(), std::uint64_t{0});
  plan.tensors.resize(n);
  for (std::size_t i = 0; i < n; ++i) plan.tensors[i].device_bytes = in.tensor_bytes[i];
  plan.device_bytes = plan.kv_bytes;
  // Byte counts beyond 2^62 are no real device's; clamped there, the signed margin never wraps.
  const auto clamp = [](std::uint64_t v) { return static_cast<std::int64_t>(std::min(v, std::uint64_t{1} << 62)); };
  const std::int64_t available = clamp(in.device_free_bytes) - clamp(in.headroom_bytes);
  plan.margin_bytes = available - clamp(plan.kv_bytes);
  const std::string hint = next_start_hint(in, plan.margin_bytes);
  plan.next_start_hint = hint;
  if (plan.margin_bytes >= 0) {
    plan.verdict = CommitVerdict::all_device;
    plan.message = "commit: " + gib(plan.kv_bytes) + " of KV on the device, " +
                   gib(static_cast<std::uint64_t>(plan.margin_bytes)) + " to spare after " + gib(in.headroom_bytes) +
                   " headroom" + (hint.empty() ? "" : "; " + hint);
    return plan;
  }
  plan.deficit_bytes = static_cast<std::uint64_t>(-plan.margin_bytes);
  if (in.deficit_mode == DeficitMode::host && in.host_vmm_supported) {
    plan.verdict = CommitVerdict::host_tail;
    // Block allocators hand out low block ids first, so the end of every tensor is what only the
    // most loaded moments touch. One share for all; a tensor smaller than the share goes to host
    // whole and the others share what it could not hold.
    const std::uint64_t granule = in.granularity ? in.granularity : 1;
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return in.tensor_bytes[a] < in.tensor_bytes[b]; });
    std::uint64_t remaining = plan.deficit_bytes;
    std::size_t left = n;
    for (std::size_t pos = 0; pos < n; ++pos) {
      const std::uint64_t share = round_up((remaining + left - 1) / left, granule);
      const std::size_t i = order[pos];
      if (in.tensor_bytes[i] < share) {  // this one goes entirely to host; the others share the rest
        plan.tensors[i] = TensorSplit{0, in.tensor_bytes[i]};
        remaining -= std::min(remaining, in.tensor_bytes[i]);
        --left;
        continue;
      }
      for (std::size_t rest = pos; rest < n; ++rest) {
        const std::size_t j = order[rest];
        plan.tensors[j] = TensorSplit{in.tensor_bytes[j] - share, share};
      }
      break;
    }
    for (const TensorSplit& t : plan.tensors) plan.host_bytes += t.host_bytes;
    plan.device_bytes = plan.kv_bytes - plan.host_bytes;
    if (n) plan.host_bytes_per_tensor = plan.tensors[order.back()].host_bytes;
    plan.message = "commit: " + gib(plan.kv_bytes) + " of KV does not fit (" + gib(plan.deficit_bytes) +
                   " short with " + gib(in.headroom_bytes) + " headroom): " + gib(plan.host_bytes) +
                   " on host memory, " +
                   (n == 1 ? "the last " + format_bytes(plan.host_bytes_per_tensor) +
                                 " of the one KV allocation (with a layer-major layout as vLLM's, whole last layers "
                                 "that every forward pass reads from host memory)"
                           : "the last " + format_bytes(plan.host_bytes_per_tensor) + " of each of " +
                                 std::to_string(n) + " tensors") +
                   "; " + hint;
    return plan;
  }
  plan.verdict = CommitVerdict::fail;
  plan.message = "kvremap: the KV cache (" + gib(plan.kv_bytes) + ") does not fit: " + gib(plan.deficit_bytes) +
                 " missing on the device (" + std::to_string(plan.deficit_bytes) + " bytes, with " +
                 gib(in.headroom_bytes) + " headroom of " + gib(in.device_free_bytes) + " free" +
                 (in.deficit_mode == DeficitMode::host ? "; no host memory tier on this device" : "") + "); " + hint;
  return plan;
}

}  // namespace kvremap::policy
