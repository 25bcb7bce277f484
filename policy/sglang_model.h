// What kvremap knows of how SGLang sizes its own memory: its activation estimate for prefill.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "policy/engine.h"

namespace kvremap::policy {

// SGLang's own estimate of the activation memory a prefill needs, as it reserves it when it chooses
// --mem-fraction-static itself (python/sglang/srt/server_args.py, SGLang main 2026-08-21,
// `_handle_gpu_memory_settings`, lines 3557-3571): 1.5 MiB per token of the largest prefill batch, at
// least 2048 tokens. The batch is --chunked-prefill-size when chunking is on (a positive value); with
// chunking off (-1, or 0) it is --max-prefill-tokens (default 16384, line 659-668). Without the flag, the
// chunk size follows the device's memory (lines 3431-3488): 2048 below 35 GiB, 4096 below 60 GiB, 8192
// below 160 GiB, 16384 from there. SGLang's figure is in MiB of its device-memory reading, which is
// the driver's total in MiB.
struct SglangPrefillEstimate {
  std::uint64_t tokens = 0;  // the prefill batch the estimate is for (before the 2048-token minimum)
  std::uint64_t bytes = 0;
  std::string basis;  // "--chunked-prefill-size 8192, its default on a 79.19 GiB device"
};
SglangPrefillEstimate sglang_prefill_estimate(const EngineProfile& engine, std::uint64_t device_total);

// SGLang's default --chunked-prefill-size for a device of `device_total` bytes.
std::uint64_t sglang_default_chunked_prefill(std::uint64_t device_total);

inline constexpr std::uint64_t kSglangMinEstimateTokens = 2048;
inline constexpr std::uint64_t kSglangDefaultMaxPrefillTokens = 16384;
// 1.5 MiB per token.
inline constexpr std::uint64_t kSglangActivationBytesPerToken = 3 * (std::uint64_t{1} << 19);

}  // namespace kvremap::policy
