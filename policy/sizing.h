// Learned sizing: how far a start's sizing memory query moves, from what the previous start of the same configuration measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "policy/engine.h"
#include "policy/options.h"
#include "policy/profile.h"

namespace kvremap::policy {

// Why a start's sizing query cannot be moved, or nothing when it can: the engine's KV size does not
// come from a memory query (vLLM `--kv-cache-memory`).
std::optional<std::string> sizing_not_applicable(const EngineProfile& engine);

// Both engines size their KV cache linearly from the free memory their sizing query returns
// (vLLM: through the non-torch memory growth since its first snapshot; SGLang: what is free after
// the weights less its reserve), so reporting S bytes less free memory there gives S bytes less KV,
// rounded down to the engine's step: whole blocks, whole granules per tensor.
//
// A start's commit measured how much KV the device held beside the headroom: its KV cache plus its
// margin, less what serving needed beyond the headroom, plus what an estimate kept beyond the
// measured headroom once serving showed the measurement was enough (policy/serving_headroom.h). The next start aims at the largest multiple
// of the KV step at least kSizingCushionBytes below that, and since the engine rounds down from
// where the last start's shift left it, moving the shift by exactly (last KV - target) lands the
// engine on the target whatever the remainder was: one step, then no further change. The step is
// the tensors' count times the VMM granularity (the arena's tensors are multiples of it), at least
// as coarse as any engine's block; the cushion covers finer engine blocks and run-to-run noise in
// the driver's free memory.
inline constexpr std::uint64_t kSizingCushionBytes = std::uint64_t{8} << 20;

struct SizingStep {
  // How much less free memory than the driver's figure the sizing query reports (negative: more).
  std::int64_t shift_bytes = 0;
  std::int64_t slack_bytes = 0;       // the margin plus the last headroom less this start's
  std::uint64_t target_kv_bytes = 0;  // the KV cache this start should get
  std::uint64_t step_bytes = 0;       // the KV step the target is a multiple of
  std::string reason;                 // one line: what the profile measured and what follows
};

// The share of the device that sizes this engine's KV cache, as Profile::memory_share records it:
// vLLM's --gpu-memory-utilization (its default where not given). Nothing for SGLang, whose serving
// reserve (1 - --mem-fraction-static) moves with its KV cache, so its shift carries over unchanged,
// and for other engines.
std::optional<double> memory_share(const EngineProfile& engine);

// The shift for a start of the configuration `previous` measured, started with `share` of a device
// of `device_total` bytes: a larger share than the profile's makes the engine ask for that much more
// KV, so the shift grows by the difference. `engine` mode: always 0.
SizingStep next_sizing(const Profile& previous, SizingWhen mode, std::optional<double> share = std::nullopt,
                       std::uint64_t device_total = 0);

// The free memory the engine is told at its sizing query: the driver's figure less `shift_bytes`,
// never below 0 and never above the device's total.
std::uint64_t shifted_free(std::uint64_t driver_free, std::int64_t shift_bytes, std::uint64_t device_total);

// The engine's own flags that give a start sized like this one without kvremap's shift: vLLM
// `--kv-cache-memory <KV bytes>`; SGLang `--mem-fraction-static` lowered (or raised) by shift / total,
// to four decimals, rounded towards less KV. Empty when nothing was shifted or the engine is not one of them.
std::string same_start_flags(const EngineProfile& engine, std::int64_t shift_bytes, std::uint64_t kv_bytes,
                             std::uint64_t device_total);

}  // namespace kvremap::policy
