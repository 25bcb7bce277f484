// SGLang's activation estimate for prefill, from its flags and the device's memory (see sglang_model.h).
#include "policy/sglang_model.h"

#include <algorithm>

#include "policy/units.h"

namespace kvremap::policy {

std::uint64_t sglang_default_chunked_prefill(std::uint64_t device_total) {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  if (device_total < 35 * kGiB) return 2048;
  if (device_total < 60 * kGiB) return 4096;
  if (device_total < 160 * kGiB) return 8192;
  return 16384;
}

SglangPrefillEstimate sglang_prefill_estimate(const EngineProfile& engine, std::uint64_t device_total) {
  SglangPrefillEstimate e;
  const std::int64_t chunk = engine.chunked_prefill_size.value_or(-2);
  if (chunk > 0) {
    e.tokens = static_cast<std::uint64_t>(chunk);
    e.basis = "--chunked-prefill-size " + std::to_string(chunk);
  } else if (!engine.chunked_prefill_size) {
    e.tokens = sglang_default_chunked_prefill(device_total);
    e.basis = "--chunked-prefill-size " + std::to_string(e.tokens) + ", its default on a " +
              format_bytes(device_total) + " device";
  } else {
    e.tokens = engine.max_prefill_tokens.value_or(kSglangDefaultMaxPrefillTokens);
    e.basis = "--max-prefill-tokens " + std::to_string(e.tokens) + ", chunked prefill off";
  }
  const std::uint64_t tokens = std::max(e.tokens, kSglangMinEstimateTokens);
  // Token counts beyond 2^40 are no engine's; the product then stays within 64 bits.
  e.bytes = std::min<std::uint64_t>(tokens, std::uint64_t{1} << 40) * kSglangActivationBytesPerToken;
  return e;
}

}  // namespace kvremap::policy
