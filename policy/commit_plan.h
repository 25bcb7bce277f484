// The commit decision: how the deferred KV cache is backed once start-up work is over (pure arithmetic, in bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/engine.h"

namespace kvremap::policy {

enum class DeficitMode : std::uint8_t { host, fail };

// What the interposer measured when it is time to commit.
struct CommitInputs {
  // Each KV tensor (arena region) in bytes, in the order the caller commits them; each a multiple
  // of the granularity.
  std::vector<std::uint64_t> tensor_bytes;
  std::uint64_t granularity = 0;        // VMM granularity: host shares are multiples of it (0 counts as 1)
  std::uint64_t chunk_bytes = 0;        // physical handle size of the arena (reported, not planned with)
  std::uint64_t device_free_bytes = 0;  // driver's free memory now, KV still on scratch
  std::uint64_t device_total_bytes = 0;
  std::uint64_t headroom_bytes = 0;  // kept free after the commit
  bool host_vmm_supported = false;   // CU_MEM_LOCATION_TYPE_HOST(_NUMA) handles work here
  DeficitMode deficit_mode = DeficitMode::host;
  // What start-up work after the KV burst needed beyond what it still holds: over the categories,
  // peak since the burst ended minus live now. A start without kvremap needs it beside its KV.
  std::uint64_t post_kv_transient_bytes = 0;
  // The engine and its own memory-share flags, for the next-start hints.
  EngineKind engine = EngineKind::other;
  std::optional<double> gpu_memory_utilization;  // vLLM --gpu-memory-utilization
  std::optional<double> mem_fraction_static;     // SGLang --mem-fraction-static
  std::optional<std::uint64_t> kv_cache_memory;  // vLLM --kv-cache-memory
};

enum class CommitVerdict : std::uint8_t {
  all_device,  // every KV byte on the device
  host_tail,   // the end of every tensor on host memory (slower, correct)
  fail,        // not enough memory and no host tier: stop with the message
};

// "all_device", "host_tail", "fail": the trace's `verdict`.
std::string_view to_string(CommitVerdict verdict);

// One tensor's split: its first device_bytes on the device, the last host_bytes on host memory.
struct TensorSplit {
  std::uint64_t device_bytes = 0;
  std::uint64_t host_bytes = 0;
};

struct CommitPlan {
  CommitVerdict verdict = CommitVerdict::fail;
  std::uint64_t kv_bytes = 0;               // sum of the tensors
  std::uint64_t device_bytes = 0;           // sum of the tensors' device parts
  std::uint64_t host_bytes = 0;             // sum of the tensors' host parts: the deficit rounded up per tensor
  std::vector<TensorSplit> tensors;         // one per input tensor, same order (fail: all on the device)
  std::uint64_t host_bytes_per_tensor = 0;  // the largest tensor's host share (all of them when equal)
  // device_free - kv - headroom: what the next start can hand back (> 0) or must take away (< 0).
  std::int64_t margin_bytes = 0;
  std::uint64_t deficit_bytes = 0;  // KV bytes that do not fit on the device with the headroom kept
  std::string message;              // one line for the log; for fail, the missing bytes and what to change
  std::string next_start_hint;      // the engine flags that would fit the next start; empty: none needed
};

// Decides the backing. The deficit goes to host memory at the end of every tensor: each tensor's
// host share is ceil(deficit / n) rounded up to the granularity; a tensor smaller than that goes to
// host whole and the share is recomputed over the others for what it could not hold. No tensors:
// all_device with no bytes.
CommitPlan plan_commit(const CommitInputs& in);

// While the KV cache is deferred, the free memory a query reports: what would be free with the KV
// cache fully backed (the scratch stands in for all of it). `short_bytes`: how far below nothing that
// would be (the engine's start-up needs more than its sizing left); the answer is then 0.
struct FreeWhileDeferred {
  std::uint64_t free_bytes = 0;
  std::uint64_t short_bytes = 0;
};
FreeWhileDeferred free_while_deferred(std::uint64_t driver_free, std::uint64_t deferred_bytes,
                                      std::uint64_t scratch_bytes);

// What to run next time so the KV cache fits, naming the engine's own flags: vLLM
// `--gpu-memory-utilization` / `--kv-cache-memory`, SGLang `--mem-fraction-static`, both engines'
// for `other`. Both engines' KV size is linear in their share, so S bytes less KV is the share
// lowered by S / total, rounded down to two decimals. A start under kvremap must shrink the KV by
// the deficit (-margin_bytes, if positive); one without it by post_kv_transient_bytes - margin_bytes
// (the transient had to fit beside the KV); both are given when they differ. Empty when neither
// has to shrink.
std::string next_start_hint(const CommitInputs& in, std::int64_t margin_bytes);

}  // namespace kvremap::policy
