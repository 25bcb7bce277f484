// The start-up phase rules of phases.h, applied one event at a time.
#include "policy/phases.h"

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

#include "policy/trace_schema.h"
#include "policy/units.h"

namespace kvremap::policy {

std::string_view to_string(Phase phase) {
  const auto i = static_cast<std::size_t>(phase);
  return i < kPhaseNames.size() ? kPhaseNames[i] : std::string_view("?");
}

PhaseChange PhaseTracker::move_to(Phase to, std::string reason, std::uint64_t since_ns) {
  PhaseChange change{phase_, to, std::move(reason), since_ns};
  phase_ = to;
  return change;
}

std::optional<PhaseChange> PhaseTracker::observe(const Event& event) {
  last_event_ns_ = event.time_ns;
  seen_event_ = true;
  return std::visit(
      [&](const auto& kind) -> std::optional<PhaseChange> {
        using T = std::decay_t<decltype(kind)>;
        if constexpr (std::is_same_v<T, Alloc>) return on_alloc(event, kind);
        if constexpr (std::is_same_v<T, MemoryQuery>) return on_query(event, kind);
        if constexpr (std::is_same_v<T, KernelLaunch>) return on_kernel(event);
        if constexpr (std::is_same_v<T, CaptureBegin>) return on_capture_begin(event, kind);
        if constexpr (std::is_same_v<T, CaptureEnd>) {
          if (open_captures_.erase(kind.capture_id) != 0 && phase_ == Phase::capture) ++captures_ended_;
          reopen_after_graph_profiling();
          return std::nullopt;
        }
        if constexpr (std::is_same_v<T, GraphLaunch>) return on_graph_launch(event);
        if constexpr (std::is_same_v<T, ModuleLoad>) {
          if (phase_ == Phase::kv_allocation)
            return move_to(Phase::post_kv_warmup, "module load after the KV burst", event.time_ns);
          return std::nullopt;
        }
        return std::nullopt;  // Free, GraphInstantiate
      },
      event.kind);
}

void PhaseTracker::observe_allocated_bytes(std::uint64_t bytes, std::uint64_t time_ns) {
  last_event_ns_ = std::max(last_event_ns_, time_ns);
  seen_event_ = true;
  if (open_captures_.empty()) bytes_since_query_ += bytes;  // as on_alloc: graph pools do not count
}

bool PhaseTracker::window_opened() const {
  return (phase_ == Phase::loading && sizing_query_seen_) || (phase_ == Phase::profiling && profiling_query_seen_);
}

void PhaseTracker::reopen_after_graph_profiling() {
  if (!kv_window_closed_ || !open_captures_.empty() || !window_opened() || !graph_profiling_) return;
  kv_window_closed_ = false;
  eager_kernels_in_window_ = 0;
}

bool PhaseTracker::kv_eligible() const { return open_captures_.empty() && !kv_window_closed_ && window_opened(); }

std::optional<PhaseChange> PhaseTracker::on_alloc(const Event& event, const Alloc& alloc) {
  if (phase_ == Phase::init) {
    bytes_since_query_ += alloc.bytes;
    return move_to(Phase::loading, "first allocation", event.time_ns);
  }
  // Graph-pool memory belongs to the capture, not to the loading/profiling bookkeeping.
  if (!open_captures_.empty()) return std::nullopt;
  bytes_since_query_ += alloc.bytes;

  if (phase_ == Phase::kv_allocation) {
    if (alloc.bytes == run_.bytes) {
      run_.kernels_since_last = 0;
      return std::nullopt;
    }
    return move_to(Phase::post_kv_warmup, "allocation of " + format_bytes(alloc.bytes) + " after the KV burst",
                   event.time_ns);
  }
  if (!kv_eligible()) return std::nullopt;

  if (alloc.bytes < rules_.kv_min_bytes || alloc.bytes != run_.bytes) {
    run_ = {};
    if (alloc.bytes < rules_.kv_min_bytes) return std::nullopt;
    run_.bytes = alloc.bytes;
    run_.first_ns = event.time_ns;
  }
  ++run_.count;
  run_.kernels_since_last = 0;

  const double free = static_cast<double>(last_query_free_);
  const double total = static_cast<double>(run_.bytes) * run_.count;
  const bool burst = run_.count >= rules_.kv_min_allocations && total >= rules_.kv_min_free_fraction * free;
  const bool whole_cache =
      run_.count == 1 && last_query_free_ > 0 && total >= rules_.kv_single_min_free_fraction * free;
  if (!burst && !whole_cache) return std::nullopt;

  kv_tensor_bytes_ = run_.bytes;
  if (whole_cache)
    return move_to(Phase::kv_allocation,
                   "one allocation of " + format_bytes(run_.bytes) + " (" +
                       std::to_string(static_cast<int>(100.0 * total / free)) +
                       "% of the free memory the sizing query returned) after the sizing memory query",
                   run_.first_ns);
  return move_to(
      Phase::kv_allocation,
      std::to_string(run_.count) + " allocations of " + format_bytes(run_.bytes) + " after the sizing memory query",
      run_.first_ns);
}

std::optional<PhaseChange> PhaseTracker::on_query(const Event&, const MemoryQuery& query) {
  const bool written = !query.copied_to_device_bytes || *query.copied_to_device_bytes >= rules_.weights_min_bytes ||
                       kernels_since_query_ >= rules_.profiling_min_kernels;
  const bool weights_query =
      phase_ == Phase::loading && queries_ > 0 && bytes_since_query_ >= rules_.weights_min_bytes && written;
  if (phase_ == Phase::loading && weights_in_) sizing_query_seen_ = true;
  if (weights_query) weights_in_ = true;
  if (phase_ == Phase::profiling) profiling_query_seen_ = true;
  // Graph-memory profiling is vLLM's, after its profiling forward: SGLang (no profiling phase) never reopens.
  if (window_opened() && ++queries_in_window_ == 2 && !kv_window_closed_ && phase_ == Phase::profiling)
    graph_profiling_ = true;
  ++queries_;
  bytes_since_query_ = 0;
  kernels_since_query_ = 0;
  last_query_free_ = query.returned_free;
  run_ = {};  // a KV burst follows its sizing query
  return std::nullopt;
}

std::optional<PhaseChange> PhaseTracker::on_kernel(const Event& event) {
  if (kernels_since_query_++ == 0) first_kernel_since_query_ns_ = event.time_ns;
  if (open_captures_.empty() && kv_eligible() && ++eager_kernels_in_window_ >= rules_.profiling_min_kernels)
    kv_window_closed_ = true;
  const bool run_broken = run_.count > 0 && ++run_.kernels_since_last > rules_.kv_max_kernels_between;
  if (phase_ == Phase::kv_allocation) {
    if (!run_broken) return std::nullopt;
    return move_to(Phase::post_kv_warmup, "kernel launches after the KV burst", event.time_ns);
  }
  if (run_broken) run_ = {};

  if (phase_ == Phase::loading && weights_in_ && open_captures_.empty() &&
      kernels_since_query_ >= rules_.profiling_min_kernels) {
    return move_to(Phase::profiling,
                   std::to_string(kernels_since_query_) + " kernel launches after the post-weights memory query",
                   first_kernel_since_query_ns_);
  }
  return std::nullopt;
}

std::optional<PhaseChange> PhaseTracker::on_capture_begin(const Event& event, const CaptureBegin& begin) {
  open_captures_.insert(begin.capture_id);
  if (phase_ != Phase::kv_allocation && phase_ != Phase::post_kv_warmup) return std::nullopt;
  captures_ended_ = 0;
  return move_to(Phase::capture, "first graph capture after the KV burst", event.time_ns);
}

std::optional<PhaseChange> PhaseTracker::on_graph_launch(const Event& event) {
  if (phase_ != Phase::capture || !open_captures_.empty() || captures_ended_ == 0) return std::nullopt;
  return move_to(Phase::serving, "graph launch after capture ended", event.time_ns);
}

std::optional<PhaseChange> PhaseTracker::rearm_kv(std::uint64_t now_ns) {
  const bool after_burst =
      phase_ == Phase::kv_allocation || phase_ == Phase::post_kv_warmup || phase_ == Phase::capture;
  if (!after_burst || !open_captures_.empty()) return std::nullopt;
  kv_tensor_bytes_ = 0;
  run_ = {};
  kv_window_closed_ = false;
  eager_kernels_in_window_ = 0;
  captures_ended_ = 0;
  // The burst came from profiling when a query was taken there (only profiling sets that), else from loading.
  return move_to(profiling_query_seen_ ? Phase::profiling : Phase::loading,
                 "every KV tensor was freed before its commit (a profiling KV cache): the KV burst is looked for again",
                 now_ns);
}

std::optional<PhaseChange> PhaseTracker::observe_idle(std::uint64_t now_ns) {
  const bool after_kv =
      phase_ == Phase::post_kv_warmup || (phase_ == Phase::capture && open_captures_.empty() && captures_ended_ > 0);
  if (!after_kv || !seen_event_ || now_ns < last_event_ns_ || now_ns - last_event_ns_ < rules_.idle_quiet_ns)
    return std::nullopt;
  return move_to(Phase::serving,
                 "no CUDA activity for " + std::to_string((now_ns - last_event_ns_) / 1'000'000) + " ms", now_ns);
}

}  // namespace kvremap::policy
