// The commit decision: how the deferred KV cache is backed once start-up work is over (pure arithmetic).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

enum class DeficitMode : std::uint8_t { host, fail };

// What the interposer measured when it is time to commit.
struct CommitInputs {
  std::uint64_t kv_bytes = 0;           // the KV cache the engine holds (chunk-aligned)
  std::uint64_t chunk_bytes = 0;        // physical handle size; KV is backed chunk by chunk
  std::uint64_t device_free_bytes = 0;  // driver's free memory now, KV still on scratch
  std::uint64_t device_total_bytes = 0;
  std::uint64_t headroom_bytes = 0;  // kept free after the commit (KVREMAP_HEADROOM)
  bool host_vmm_supported = false;   // CU_MEM_LOCATION_TYPE_HOST(_NUMA) handles work here
  DeficitMode deficit_mode = DeficitMode::host;
  // The engine's --gpu-memory-utilization, when its command line says (for the fix-it message).
  std::optional<double> gpu_memory_utilization;
};

enum class CommitVerdict : std::uint8_t {
  all_device,  // every chunk on the device
  host_tail,   // the last chunks on host memory (slower, correct)
  fail,        // not enough memory and no host tier: stop with the message
};

struct CommitPlan {
  CommitVerdict verdict = CommitVerdict::fail;
  std::uint64_t device_chunks = 0;
  std::uint64_t host_chunks = 0;
  // device_free - kv - headroom: what the next start can hand back (> 0) or must take away (< 0).
  std::int64_t margin_bytes = 0;
  std::uint64_t deficit_bytes = 0;  // KV bytes that do not fit on the device with the headroom kept
  std::string message;              // one line for the log; for fail, what to change
};

// Decides the backing. KV bytes that are not a whole number of chunks count as a (partial) last
// chunk. With kv_bytes == 0 the plan is all_device with no chunks. chunk_bytes must be > 0.
CommitPlan plan_commit(const CommitInputs& in);

// "--gpu-memory-utilization 0.95" / "--gpu-memory-utilization=0.95" in a command line.
std::optional<double> gpu_memory_utilization_from(std::string_view cmdline);

}  // namespace kvremap::policy
