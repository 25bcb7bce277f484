// The commit decision: device chunks, host tail or a precise failure, and the margin to learn from.
#include "policy/commit_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "policy/units.h"

namespace kvremap::policy {
namespace {

std::uint64_t chunks_for(std::uint64_t bytes, std::uint64_t chunk) { return (bytes + chunk - 1) / chunk; }

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
  return buf;
}

// What to run instead so the next start's KV cache fits: vLLM's KV size is linear in the
// utilisation (kv = total * util - non_kv), so the KV shortfall comes off the utilisation directly.
std::string fix_hint(const CommitInputs& in, std::uint64_t deficit) {
  const std::uint64_t kv_fit = in.kv_bytes > deficit ? in.kv_bytes - deficit : 0;
  std::string hint = "use --kv-cache-memory " + std::to_string(kv_fit);
  if (in.gpu_memory_utilization && in.device_total_bytes > 0) {
    const double fit =
        *in.gpu_memory_utilization - static_cast<double>(deficit) / static_cast<double>(in.device_total_bytes);
    // Two decimals, rounded down: the suggestion must fit, not just nearly.
    const double rounded = fit > 0 ? std::floor(fit * 100.0) / 100.0 : 0.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, " or --gpu-memory-utilization %.2f", rounded);
    hint += buf;
  }
  return hint;
}

}  // namespace

CommitPlan plan_commit(const CommitInputs& in) {
  CommitPlan plan;
  const std::int64_t available =
      static_cast<std::int64_t>(in.device_free_bytes) - static_cast<std::int64_t>(in.headroom_bytes);
  plan.margin_bytes = available - static_cast<std::int64_t>(in.kv_bytes);
  const std::uint64_t total_chunks = in.chunk_bytes ? chunks_for(in.kv_bytes, in.chunk_bytes) : 0;
  if (plan.margin_bytes >= 0) {
    plan.verdict = CommitVerdict::all_device;
    plan.device_chunks = total_chunks;
    plan.message = "commit: " + gib(in.kv_bytes) + " of KV on the device, " +
                   gib(static_cast<std::uint64_t>(plan.margin_bytes)) + " to spare after " + gib(in.headroom_bytes) +
                   " headroom";
    return plan;
  }
  plan.deficit_bytes = static_cast<std::uint64_t>(-plan.margin_bytes);
  // Whole chunks only on the device: a chunk is one physical handle.
  const std::uint64_t device_bytes = available > 0 ? static_cast<std::uint64_t>(available) : 0;
  plan.device_chunks = in.chunk_bytes ? std::min(total_chunks, device_bytes / in.chunk_bytes) : 0;
  if (in.deficit_mode == DeficitMode::host && in.host_vmm_supported) {
    plan.verdict = CommitVerdict::host_tail;
    plan.host_chunks = total_chunks - plan.device_chunks;
    plan.message = "commit: " + gib(in.kv_bytes) + " of KV does not fit (" + gib(plan.deficit_bytes) + " short with " +
                   gib(in.headroom_bytes) + " headroom): " + std::to_string(plan.host_chunks) + " of " +
                   std::to_string(total_chunks) +
                   " chunks on host memory; next start: " + fix_hint(in, plan.deficit_bytes);
    return plan;
  }
  plan.verdict = CommitVerdict::fail;
  plan.message = "kvremap: the KV cache (" + gib(in.kv_bytes) + ") does not fit: " + gib(plan.deficit_bytes) +
                 " missing on the device with " + gib(in.headroom_bytes) + " headroom" +
                 (in.deficit_mode == DeficitMode::host ? " and no host memory tier on this device" : "") + "; " +
                 fix_hint(in, plan.deficit_bytes);
  return plan;
}

std::optional<double> gpu_memory_utilization_from(std::string_view cmdline) {
  static constexpr std::string_view kFlag = "--gpu-memory-utilization";
  std::size_t at = cmdline.find(kFlag);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = cmdline.substr(at + kFlag.size());
  if (rest.empty() || (rest.front() != '=' && rest.front() != ' ')) return std::nullopt;
  rest.remove_prefix(1);
  const std::size_t end = rest.find(' ');
  auto value = parse_fraction(rest.substr(0, end));
  if (!value || *value <= 0) return std::nullopt;
  return value;
}

}  // namespace kvremap::policy
