// KV recognition: which allocations go into the KV arena, which of them are the KV cache, and when its burst is over.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/events.h"
#include "policy/phases.h"

namespace kvremap::policy {

// The innermost kvremap_tag_push() tag open on the allocating thread.
enum class KvTag : std::uint8_t { untagged, kv, not_kv };

struct PlacementQuery {
  std::uint64_t bytes = 0;
  KvTag tag = KvTag::untagged;
  bool capture_open = false;    // a capture on this thread, or a global-mode one anywhere
  bool kv_window = false;       // PhaseTracker::kv_window() of the allocating device
  bool burst_over = false;      // the device's KV cache has been deferred or committed already
  std::uint64_t min_bytes = 0;  // KVREMAP_KV_MIN_BYTES
  std::uint64_t tensor_override = 0;  // KVREMAP_KV_TENSOR_BYTES (0: recognise)
  std::uint64_t recognised_bytes = 0; // PhaseTracker::kv_tensor_bytes(): the burst's size, once known
};

// At allocation time: may this allocation be KV cache, so that it goes into the arena?
// Never while a capture is open (graph-pool memory is captured by address and belongs to the graph)
// nor once the device's burst is over; a "kv" tag says yes and a "none" tag no; otherwise an
// allocation inside the KV window (after the sizing query, see phases.h) of at least min_bytes, or
// of exactly the size KVREMAP_KV_TENSOR_BYTES names (never outside the window: a loading-phase weight
// of that size is not KV). Once the burst is recognised, or the override names the size, only
// allocations of that size are placed: anything else cannot be KV, and left out of the arena it stays
// ordinary (legacy-IPC capable) memory.
// Weights come before the sizing query and IPC-shared buffers are either small or made during
// capture, so neither is placed; whatever else is placed and turns out not to be KV stays backed.
bool place_in_arena(const PlacementQuery& query);

// Cheap pre-check for the allocation hook, before any lock: false means place_in_arena is false
// whatever the phase says.
inline bool may_place_in_arena(std::uint64_t bytes, KvTag tag, std::uint64_t min_bytes,
                               std::uint64_t tensor_override = 0) {
  return tag == KvTag::kv ||
         (tag == KvTag::untagged && (bytes >= min_bytes || (tensor_override != 0 && bytes == tensor_override)));
}

// An allocation placed in the arena, as the end of the burst sees it.
struct ArenaPlacement {
  std::uint64_t requested = 0;  // bytes the engine asked for
  bool tagged = false;          // made under a "kv" tag
};

// The KV tensor size in force: KVREMAP_KV_TENSOR_BYTES when set (non-zero), else the size of the
// burst phase inference recognised (0 when none was).
std::uint64_t kv_tensor_size(std::uint64_t recognised_bytes, std::uint64_t override_bytes);

// Is an arena placement part of the KV cache? Tagged ones are, by the engine's own word; untagged
// ones when their size is the KV tensor size.
bool is_kv(const ArenaPlacement& placement, std::uint64_t tensor_bytes);

struct BurstEndQuery {
  bool launch = false;            // the call is a kernel or graph launch
  bool have_placements = false;   // the arena holds placements on this device
  bool kv_tag_open = false;       // the calling thread is still inside kvremap_tag_push("kv")
  bool any_tagged = false;        // some placement was tagged
  bool burst_recognised = false;  // phase inference reached kv_allocation on this device
  std::uint64_t tensor_bytes = 0; // kv_tensor_size(): non-zero when an override names the size
  bool placement_of_tensor_size = false;  // some placement has exactly tensor_bytes
};

// Is the KV burst over now, before this call reaches the driver? Only a call that is not a launch
// ends it: torch.zeros launches one fill kernel per KV tensor inside the burst. A tagged burst ends
// once its tag is closed; an untagged one once phase inference recognised it (or, with an
// override, once a placement of the named size exists).
bool kv_burst_over(const BurstEndQuery& query);

// Replays one device's events through phase inference and the rules above (no tags): the
// allocations that would be placed in the arena, and those of them that form the KV cache at the
// end of the burst. Used by the unit tests on vLLM- and SGLang-like sequences and by trace replay.
struct KvRecognition {
  std::vector<std::uint64_t> placed;  // pointers, in allocation order
  std::vector<std::uint64_t> kv;      // the subset that is KV cache
  std::uint64_t tensor_bytes = 0;
  bool burst_ended = false;  // a call after the burst ended it (deferral would have happened)
};
struct RecognitionConfig {
  PhaseRules rules{};
  std::uint64_t min_bytes = 64ull << 20;  // KVREMAP_KV_MIN_BYTES
  std::uint64_t tensor_override = 0;      // KVREMAP_KV_TENSOR_BYTES
};
KvRecognition recognise_kv(const std::vector<Event>& events, const RecognitionConfig& config);

}  // namespace kvremap::policy
