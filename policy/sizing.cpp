// Learned sizing: the shift of the sizing query from a profile, bounded and banded so repeated starts settle.
#include "policy/sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "policy/sglang_model.h"
#include "policy/units.h"
#include "policy/vllm_model.h"

namespace kvremap::policy {
namespace {

// Byte counts beyond 2^61 are no real device's; clamped there, the sum or difference of two never wraps.
constexpr std::int64_t kLimit = std::int64_t{1} << 61;
std::int64_t clamp_signed(std::int64_t v) { return std::clamp(v, -kLimit, kLimit); }
// a + b and a - b of clamped values are within ±2^62, so exact, then clamped again.
std::int64_t add(std::int64_t a, std::int64_t b) { return clamp_signed(clamp_signed(a) + clamp_signed(b)); }
std::int64_t sub(std::int64_t a, std::int64_t b) { return clamp_signed(clamp_signed(a) - clamp_signed(b)); }
std::int64_t as_signed(std::uint64_t v) { return static_cast<std::int64_t>(std::min<std::uint64_t>(v, kLimit)); }

std::string signed_bytes(std::int64_t v) { return format_bytes_signed(v); }

}  // namespace

std::optional<std::string> sizing_not_applicable(const EngineProfile& engine) {
  return vllm_sizing_not_applicable(engine);
}

std::optional<double> memory_share(const EngineProfile& engine) { return vllm_memory_share(engine); }

SizingStep next_sizing(const Profile& previous, SizingWhen mode, std::optional<double> share,
                       std::uint64_t device_total) {
  SizingStep step;
  // The headroom this start will keep (policy/serving_headroom.h): once serving was measured, what the
  // last start kept on measurement or what serving needed where more, an estimate it kept beyond that
  // handed back; before, the same headroom again.
  const std::uint64_t serving = previous.serving_peak_bytes.value_or(0);
  const std::uint64_t measured = std::min(previous.headroom_measured_bytes.value_or(previous.headroom_bytes), previous.headroom_bytes);
  const std::uint64_t next_headroom =
      previous.serving_peak_bytes ? std::max(measured, serving) : previous.headroom_bytes;
  const std::int64_t headroom_moved = sub(as_signed(previous.headroom_bytes), as_signed(next_headroom));
  step.slack_bytes = add(previous.margin_bytes, headroom_moved);
  std::int64_t prev = clamp_signed(previous.sizing_shift_bytes);
  // Another share: the engine asks for (share - previous share) x total more KV than the profile's
  // start did; the shift it needed grows by as much (shrinks, for a lower share).
  std::string moved;
  if (share && previous.memory_share && *share != *previous.memory_share && device_total != 0) {
    const double delta = (*share - *previous.memory_share) * static_cast<double>(std::min<std::uint64_t>(device_total, kLimit));
    prev = add(prev, static_cast<std::int64_t>(std::llround(delta)));
    char buf[96];
    std::snprintf(buf, sizeof buf, " (%.4g then, %.4g now)", *previous.memory_share, *share);
    moved = buf;
  }
  if (mode == SizingWhen::engine) {
    step.reason = "KVREMAP_SIZING=engine: the engine sizes its KV cache alone";
    return step;
  }
  const std::int64_t kv = as_signed(previous.kv_requested_bytes);
  const std::uint64_t tensors = std::max<std::uint64_t>(previous.kv_tensors, 1);
  const std::uint64_t granule = std::max<std::uint64_t>(previous.granularity_bytes, 1);
  step.step_bytes = std::min<std::uint64_t>(tensors * std::min<std::uint64_t>(granule, kLimit), kLimit);
  const std::int64_t fits = sub(add(kv, step.slack_bytes), as_signed(kSizingCushionBytes));
  const std::int64_t unit = as_signed(step.step_bytes);
  const std::int64_t target = fits > 0 ? fits / unit * unit : 0;
  step.target_kv_bytes = static_cast<std::uint64_t>(target);
  std::int64_t shift = add(prev, sub(kv, target));
  const bool clamped = mode == SizingWhen::learned && shift < 0;
  if (clamped) shift = 0;
  step.shift_bytes = shift;
  const std::string what =
      step.slack_bytes < 0 ? "its KV cache lacked " + format_bytes(static_cast<std::uint64_t>(-step.slack_bytes)) + " on the device"
                           : "the device held " + format_bytes(static_cast<std::uint64_t>(step.slack_bytes)) + " more KV";
  const std::string told = shift == 0 ? "is left as the driver reports it"
                           : shift > 0 ? "reports " + format_bytes(static_cast<std::uint64_t>(shift)) +
                                             " less free memory than the driver"
                                       : "reports " + format_bytes(static_cast<std::uint64_t>(-shift)) +
                                             " more free memory than the driver";
  step.reason = "the last start was shifted by " + signed_bytes(clamp_signed(previous.sizing_shift_bytes)) +
                (moved.empty() ? "" : ", " + signed_bytes(sub(prev, previous.sizing_shift_bytes)) + " more for the share" + moved) +
                " and " + what +
                (headroom_moved < 0
                     ? " (serving needed " + signed_bytes(-headroom_moved) + " beyond its headroom)"
                 : headroom_moved > 0
                     ? " (serving needed " + format_bytes(serving) + " of the " + format_bytes(previous.headroom_bytes) +
                           " headroom it kept)"
                     : "") +
                (clamped ? ": this start's sizing query " + told + " (learned sizing never gives more KV than the engine asks for)"
                         : ": for " + format_bytes(step.target_kv_bytes) + " of KV this start's sizing query " + told);
  return step;
}

std::uint64_t shifted_free(std::uint64_t driver_free, std::int64_t shift_bytes, std::uint64_t device_total) {
  const std::int64_t free = as_signed(driver_free);
  const std::int64_t told = sub(free, shift_bytes);
  if (told <= 0) return 0;
  const auto out = static_cast<std::uint64_t>(told);
  return device_total != 0 ? std::min(out, device_total) : out;
}

std::string same_start_flags(const EngineProfile& engine, std::int64_t shift_bytes, std::uint64_t kv_bytes,
                             std::uint64_t device_total) {
  if (shift_bytes == 0) return "";
  switch (engine.kind) {
    case EngineKind::vllm:
      return vllm_same_start_flags(kv_bytes);
    case EngineKind::sglang:
      return sglang_same_start_flags(engine, shift_bytes, device_total);
    case EngineKind::other:
      break;
  }
  return "";
}

}  // namespace kvremap::policy
