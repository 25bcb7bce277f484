// An engine's share of device memory: lowered by a number of bytes, and written as the engine's flags take it.
#pragma once

#include <cstdint>
#include <string>

namespace kvremap::policy {

// `share` lowered by `shrink_bytes` of a device of `total` bytes (raised, for a negative shrink),
// rounded down to `decimals` decimals, or 0 where nothing is left: a suggested share must fit, not just
// nearly. The small epsilon keeps 0.95 - 0.05 at 0.90 despite binary fractions.
double lowered_share(double share, double shrink_bytes, std::uint64_t total, int decimals);

// A next-start hint's target: the engine's KV cache shrunk by `shrink_bytes` to `kv_fit_bytes` on a device of
// `device_total_bytes` (0: unknown), for a start under kvremap or one without it.
struct KvShrink {
  std::uint64_t shrink_bytes = 0;
  std::uint64_t kv_fit_bytes = 0;
  std::uint64_t device_total_bytes = 0;
  bool under_kvremap = false;
};

// "0.85" (decimals 2), "0.8512" (decimals 4).
std::string share_text(double share, int decimals);

}  // namespace kvremap::policy
