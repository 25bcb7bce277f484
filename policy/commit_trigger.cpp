// The commit trigger's rules, per mode; see commit_trigger.h for why each decision point is one.
#include "policy/commit_trigger.h"

#include <charconv>

namespace kvremap::policy {

std::optional<TriggerConfig> parse_trigger(std::string_view text, std::uint64_t quiet_ms_default) {
  TriggerConfig c;
  c.quiet_ns = quiet_ms_default * 1'000'000ULL;
  if (text == "auto") {
    c.mode = TriggerMode::automatic;
  } else if (text == "first-query") {
    c.mode = TriggerMode::first_query;
  } else if (text == "graph-launch") {
    c.mode = TriggerMode::graph_launch;
  } else if (text == "manual") {
    c.mode = TriggerMode::manual;
  } else if (text.rfind("quiet:", 0) == 0) {
    const std::string_view ms = text.substr(6);
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(ms.data(), ms.data() + ms.size(), value);
    if (ms.empty() || ec != std::errc() || end != ms.data() + ms.size() || value > 24ULL * 3600 * 1000)
      return std::nullopt;
    c.mode = TriggerMode::quiet;
    c.quiet_ns = value * 1'000'000ULL;
  } else {
    return std::nullopt;
  }
  return c;
}

std::string_view to_string(TriggerMode mode) {
  switch (mode) {
    case TriggerMode::automatic:
      return "auto";
    case TriggerMode::first_query:
      return "first-query";
    case TriggerMode::graph_launch:
      return "graph-launch";
    case TriggerMode::quiet:
      return "quiet";
    case TriggerMode::manual:
      return "manual";
  }
  return "auto";
}

void CommitTrigger::arm(std::uint64_t now_ns) {
  if (state_ != State::waiting) return;
  state_ = State::armed;
  last_activity_ns_ = now_ns;
}

void CommitTrigger::capture_began(std::uint64_t now_ns) {
  ++open_captures_;
  last_activity_ns_ = now_ns;
}

void CommitTrigger::capture_ended(std::uint64_t now_ns) {
  if (open_captures_ > 0) --open_captures_;
  last_activity_ns_ = now_ns;
}

void CommitTrigger::start_up_activity(std::uint64_t now_ns) { last_activity_ns_ = now_ns; }

bool CommitTrigger::on_memory_query(std::uint64_t) { return can_commit() && config_.mode == TriggerMode::first_query; }

bool CommitTrigger::on_graph_launch(std::uint64_t) {
  // In every mode: a replayed graph reads the KV cache, so it must never find it on scratch.
  return can_commit();
}

bool CommitTrigger::on_kernel_launch(std::uint64_t now_ns) {
  if (!can_commit()) return false;
  switch (config_.mode) {
    case TriggerMode::automatic:
    case TriggerMode::quiet:
      return quiet_since(now_ns);
    case TriggerMode::first_query:
    case TriggerMode::graph_launch:
    case TriggerMode::manual:
      return false;
  }
  return false;
}

bool CommitTrigger::on_manual_commit() { return can_commit(); }

}  // namespace kvremap::policy
