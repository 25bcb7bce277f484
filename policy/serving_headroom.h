// The headroom a commit keeps free beside the KV cache for serving: measured where kvremap can, the engine's own
// estimate where it cannot yet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "policy/engine.h"

namespace kvremap::policy {

struct HeadroomInputs {
  EngineKind engine = EngineKind::other;
  std::uint64_t floor_bytes = 0;  // KVREMAP_HEADROOM: never less
  // vLLM (and any engine that profiles): the activation peak of its profiling forward.
  std::uint64_t profiled_peak_bytes = 0;
  // SGLang: the memory it leaves beside weights and KV ((1 - --mem-fraction-static) x total, or what it
  // left free when it sized its pool) less what post-KV work keeps resident, and its own activation
  // estimate for prefill (sglang_prefill_estimate).
  std::uint64_t sglang_reserve_bytes = 0;
  std::uint64_t sglang_prefill_estimate_bytes = 0;
  std::string sglang_prefill_basis;
  // Whether the start-up got here only through the deferral: the post-KV work's transient peak would not
  // have fitted beside the whole KV cache (a start without kvremap runs out of memory before serving).
  // Otherwise the commit leaves what such a start would have had, and the engine's share stands as given.
  bool deferral_carried_start_up = false;
  // What serving needed beyond the commit in an earlier start of this configuration (its profile's
  // serving_peak_bytes: the peak, or what was live plus the ask at an out-of-memory); none without one.
  std::optional<std::uint64_t> learned_serving_bytes;
  // A commit made at a kernel launch while start-up work still runs (before any capture, no serving port open: an
  // engine named only by KVREMAP_ENGINE whose compile warm-up launches attention, an eager engine's first kernel):
  // what that work holds at the commit beyond its level at the KV burst's end. Already allocated, it counts toward
  // the headroom once: only the rest is kept free (the engine's allocator reuses those blocks, or frees them,
  // before it serves). SGLang's reserve already counts what is held (sglang_reserve_bytes), so it does not apply there.
  std::uint64_t live_start_up_bytes = 0;
};

// Appended to the headroom's source where what start-up work held at the commit counted toward it.
inline constexpr const char* kLiveStartUpSuffix = ", less what start-up work held at the commit";

struct Headroom {
  std::uint64_t bytes = 0;
  // The part that rests on measurement only: `bytes` without an estimate kvremap could not yet check
  // (SGLang's prefill estimate before any start served). Learned sizing moves the next start by the
  // difference once serving has been measured.
  std::uint64_t measured_bytes = 0;
  std::string source;  // the trace's headroom_source
};

// vLLM/other: the profiled peak, or the learned serving need where larger, never below the floor, less what
// start-up work holds live at an early commit (live_start_up_bytes). SGLang: its reserve less what stayed
// resident; where the deferral carried the start-up and no start of the configuration measured serving yet, at
// least SGLang's prefill estimate; the learned need where larger. Never below the floor.
Headroom serving_headroom(const HeadroomInputs& in);

}  // namespace kvremap::policy
