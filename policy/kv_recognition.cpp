// The KV recognition rules of kv_recognition.h, and their replay over one device's events.
#include "policy/kv_recognition.h"

#include <algorithm>
#include <type_traits>
#include <utility>

namespace kvremap::policy {

bool place_in_arena(const PlacementQuery& q) {
  if (q.capture_open || q.burst_over) return false;
  if (!may_place_in_arena(q.bytes, q.tag, q.min_bytes, q.tensor_override)) return false;
  if (q.tag == KvTag::kv) return true;
  const std::uint64_t tensor = kv_tensor_size(q.recognised_bytes, q.tensor_override);
  // KVREMAP_KV_TENSOR_BYTES names a size, not a phase: a weight or workspace of that size made while
  // loading must stay an ordinary allocation, so the override too applies only inside the KV window.
  if (tensor != 0) return q.bytes == tensor && q.kv_window;
  return q.kv_window;
}

std::uint64_t kv_tensor_size(std::uint64_t recognised_bytes, std::uint64_t override_bytes) {
  return override_bytes != 0 ? override_bytes : recognised_bytes;
}

bool is_kv(const ArenaPlacement& placement, std::uint64_t tensor_bytes) {
  return placement.tagged || (tensor_bytes != 0 && placement.requested == tensor_bytes);
}

bool kv_burst_over(const BurstEndQuery& q) {
  if (q.launch || !q.have_placements || q.kv_tag_open) return false;
  if (q.any_tagged || q.burst_recognised) return true;
  return q.tensor_bytes != 0 && q.placement_of_tensor_size;
}

KvRecognition recognise_kv(const std::vector<Event>& events, const RecognitionConfig& config) {
  KvRecognition out;
  PhaseTracker tracker(config.rules);
  std::vector<ArenaPlacement> placements;
  int open_captures = 0;
  auto end_burst_if_over = [&](bool launch) {
    if (out.burst_ended || open_captures > 0) return;
    const std::uint64_t tensor = kv_tensor_size(tracker.kv_tensor_bytes(), config.tensor_override);
    BurstEndQuery q;
    q.launch = launch;
    q.have_placements = !placements.empty();
    q.burst_recognised = tracker.current() >= Phase::kv_allocation;
    q.tensor_bytes = config.tensor_override != 0 ? tensor : 0;
    q.placement_of_tensor_size = std::any_of(placements.begin(), placements.end(),
                                             [&](const ArenaPlacement& p) { return p.requested == tensor; });
    if (!kv_burst_over(q)) return;
    out.burst_ended = true;
    out.tensor_bytes = tensor;
    for (std::size_t i = 0; i < placements.size(); ++i)
      if (is_kv(placements[i], tensor)) out.kv.push_back(out.placed[i]);
  };
  for (const Event& event : events) {
    std::visit(
        [&](const auto& kind) {
          using T = std::decay_t<decltype(kind)>;
          if constexpr (std::is_same_v<T, Alloc>) {
            PlacementQuery q;
            q.bytes = kind.bytes;
            q.capture_open = open_captures > 0;
            q.kv_window = tracker.kv_window();
            q.burst_over = out.burst_ended;
            q.min_bytes = config.min_bytes;
            q.tensor_override = config.tensor_override;
            q.recognised_bytes = tracker.kv_tensor_bytes();
            if (place_in_arena(q)) {
              out.placed.push_back(kind.ptr);
              placements.push_back(ArenaPlacement{kind.bytes, false});
            } else {
              end_burst_if_over(false);
            }
          } else if constexpr (std::is_same_v<T, MemoryQuery> || std::is_same_v<T, ModuleLoad>) {
            end_burst_if_over(false);
          } else if constexpr (std::is_same_v<T, CaptureBegin>) {
            end_burst_if_over(false);
            ++open_captures;
          } else if constexpr (std::is_same_v<T, CaptureEnd>) {
            if (open_captures > 0) --open_captures;
          }
        },
        event.kind);
    tracker.observe(event);
  }
  return out;
}

}  // namespace kvremap::policy
