// The commit trigger's rules; commit_trigger.h states the invariant they keep.
#include "policy/commit_trigger.h"

#include <algorithm>

namespace kvremap::policy {

std::string_view to_string(TriggerMode mode) {
  switch (mode) {
    case TriggerMode::automatic:
      return "auto";
    case TriggerMode::first_launch:
      return "first-launch";
    case TriggerMode::manual:
      return "manual";
  }
  return "auto";
}

bool commits_at_serving(CommitReason reason) {
  switch (reason) {
    case CommitReason::graph_launch:
    case CommitReason::launch_off_capture_streams:
    case CommitReason::kv_launch_before_capture:
    case CommitReason::serving_port_open:
      return true;
    case CommitReason::none:
    case CommitReason::kv_access:
    case CommitReason::launch_without_graphs:
    case CommitReason::first_launch:
    case CommitReason::manual:
      break;
  }
  return false;
}

std::string_view to_string(CommitReason reason) {
  switch (reason) {
    case CommitReason::none:
      return "none";
    case CommitReason::graph_launch:
      return "graph launch";
    case CommitReason::kv_access:
      return "KV access";
    case CommitReason::launch_off_capture_streams:
      return "kernel launch off the capture streams";
    case CommitReason::launch_without_graphs:
      return "kernel launch, no captures expected";
    case CommitReason::kv_launch_before_capture:
      return "kernel launch reaching KV before any capture, no serving port";
    case CommitReason::first_launch:
      return "first launch";
    case CommitReason::manual:
      return "kvremap_commit";
    case CommitReason::serving_port_open:
      return "kernel launch after the serving port opened";
  }
  return "none";
}

void CommitTrigger::arm() {
  if (state_ == State::waiting) state_ = State::armed;
}

void CommitTrigger::capture_began(std::uint64_t stream) {
  ++open_captures_;
  // Captures before the KV burst (vLLM's graph-memory estimate while profiling) say nothing of
  // where the warm-ups after it run.
  if (state_ != State::armed) return;
  captured_ = true;
  remember_start_up_stream(stream);
}

void CommitTrigger::remember_start_up_stream(std::uint64_t stream) {
  if (is_start_up_stream(stream) || start_up_streams_used_ == kMaxStartUpStreams) return;
  start_up_streams_[start_up_streams_used_++] = stream;
}

void CommitTrigger::stream_destroyed(std::uint64_t stream) {
  const auto end = start_up_streams_.begin() + static_cast<std::ptrdiff_t>(start_up_streams_used_);
  const auto kept = std::remove(start_up_streams_.begin(), end, stream);
  start_up_streams_used_ = static_cast<std::size_t>(kept - start_up_streams_.begin());
}

void CommitTrigger::capture_ended(std::uint64_t) {
  if (open_captures_ > 0) --open_captures_;
}

bool CommitTrigger::is_start_up_stream(std::uint64_t stream) const {
  const auto end = start_up_streams_.begin() + static_cast<std::ptrdiff_t>(start_up_streams_used_);
  return std::find(start_up_streams_.begin(), end, stream) != end;
}

bool CommitTrigger::needs_kernel_reach() const {
  return can_commit() && !serving_ && config_.mode == TriggerMode::automatic && config_.graphs_expected &&
         !config_.serving_port_commits && !captured();
}

CommitReason CommitTrigger::on_kernel_launch(std::uint64_t stream, KvReach reach, StreamAge age) {
  if (!can_commit()) return CommitReason::none;
  if (serving_) return CommitReason::serving_port_open;
  switch (config_.mode) {
    case TriggerMode::first_launch:
      return CommitReason::first_launch;
    case TriggerMode::manual:
      return CommitReason::none;
    case TriggerMode::automatic:
      if (!config_.graphs_expected) return CommitReason::launch_without_graphs;
      if (needs_kernel_reach() && reach != KvReach::none) return CommitReason::kv_launch_before_capture;
      if (!captured()) {
        // Before the first capture, a stream new since the deferral is the capture loop's (graph_capture()
        // makes it current right before the loop); the engine's serving streams were in use before.
        if (age == StreamAge::new_since) remember_start_up_stream(stream);
        return CommitReason::none;
      }
      if (is_start_up_stream(stream)) return CommitReason::none;
      return CommitReason::launch_off_capture_streams;
  }
  return CommitReason::none;
}

CommitReason CommitTrigger::on_graph_launch() { return can_commit() ? CommitReason::graph_launch : CommitReason::none; }

CommitReason CommitTrigger::on_kv_access() { return can_commit() ? CommitReason::kv_access : CommitReason::none; }

CommitReason CommitTrigger::on_manual_commit() { return can_commit() ? CommitReason::manual : CommitReason::none; }

}  // namespace kvremap::policy
