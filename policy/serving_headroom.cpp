// The serving headroom decision (see serving_headroom.h).
#include "policy/serving_headroom.h"

#include <algorithm>

#include "policy/sglang_model.h"

namespace kvremap::policy {

Headroom serving_headroom(const HeadroomInputs& in) {
  Headroom h;
  std::uint64_t measured = 0;
  std::uint64_t estimate = 0;
  if (in.engine == EngineKind::sglang) {
    measured = in.sglang_reserve_bytes;
    h.source = kSglangReserveSource;
    if (!in.learned_serving_bytes && in.deferral_carried_start_up) estimate = in.sglang_prefill_estimate_bytes;
  } else {
    measured = in.profiled_peak_bytes;
    h.source = "profiled activation peak";
  }
  if (in.learned_serving_bytes && *in.learned_serving_bytes > measured) {
    measured = *in.learned_serving_bytes;
    h.source = "serving need learned by the profile";
  }
  if (measured <= in.floor_bytes) {
    measured = in.floor_bytes;
    h.source = "KVREMAP_HEADROOM";
  }
  h.measured_bytes = measured;
  h.bytes = measured;
  if (estimate > measured) {
    h.bytes = estimate;
    h.source = sglang_prefill_estimate_source(in.sglang_prefill_basis);
  }
  if (in.engine != EngineKind::sglang && in.live_start_up_bytes > 0) {
    const std::uint64_t counted = std::min(in.live_start_up_bytes, h.bytes);
    h.bytes -= counted;
    h.measured_bytes = std::min(h.measured_bytes, h.bytes);
    h.source += kLiveStartUpSuffix;
  }
  return h;
}

}  // namespace kvremap::policy
