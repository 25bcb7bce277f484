// When to commit the deferred KV cache: a pure state machine over start-up milestones and launches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

enum class TriggerMode : std::uint8_t {
  // Every mode commits before a graph launch outside capture: a replayed graph reads the KV cache.
  automatic,     // "auto": that, or a kernel launch after quiet_ns without start-up activity
  first_query,   // "first-query": that, or the first memory query outside capture once armed
  graph_launch,  // "graph-launch": only that
  quiet,         // "quiet:<ms>": that, or a kernel launch after <ms> without start-up activity
  manual,        // "manual": that, or kvremap_commit()
};

struct TriggerConfig {
  TriggerMode mode = TriggerMode::automatic;
  std::uint64_t quiet_ns = 5'000'000'000ULL;  // KVREMAP_QUIET_MS; "quiet:<ms>" sets it too
};

// "auto", "first-query", "graph-launch", "quiet:250", "manual"; nullopt for anything else.
// `quiet_ms_default` is used by "auto" (KVREMAP_QUIET_MS).
std::optional<TriggerConfig> parse_trigger(std::string_view text, std::uint64_t quiet_ms_default);
std::string_view to_string(TriggerMode mode);

// Fed by the interposer, on the engine's thread, in event order. Times are nanoseconds on one clock.
//
// Why "auto" is a launch, never a memory query: engines query between captures (SGLang logs the
// memory left after each batch size), and both vLLM and SGLang run eager warm-up kernels before
// every capture, so neither a query nor a plain kernel launch marks the end of start-up. A graph
// launch outside capture is serving (graphs are only replayed once captured); an engine that never
// captures (eager mode) is committed at its first kernel launch after quiet_ns without start-up
// activity (KV deferral, a capture, a module load, an allocation), because compilation and
// autotuning load modules and allocate right before they launch.
// The invariant this serves: every decision point is a call the interposer sees before it reaches
// the driver, so the commit happens before the launch that would read scratch-backed KV.
class CommitTrigger {
 public:
  explicit CommitTrigger(TriggerConfig config) : config_(config) {}

  // The KV burst is over and its backing deferred: from now on a decision point may commit.
  void arm(std::uint64_t now_ns);
  // Start-up activity: resets the quiet clock. Captures also block committing while open.
  void capture_began(std::uint64_t now_ns);
  void capture_ended(std::uint64_t now_ns);
  void start_up_activity(std::uint64_t now_ns);  // a module load or an allocation

  // Decision points: true means "commit now, before this call goes on". Never true while a capture
  // is open (committing synchronises, which a capture forbids), before arm(), or after commit.
  bool on_memory_query(std::uint64_t now_ns);
  bool on_graph_launch(std::uint64_t now_ns);
  bool on_kernel_launch(std::uint64_t now_ns);
  // kvremap_commit(): true unless not armed yet, a capture is open, or already committed.
  bool on_manual_commit();

  void committed() { state_ = State::committed; }
  bool armed() const { return state_ == State::armed; }
  bool is_committed() const { return state_ == State::committed; }
  int open_captures() const { return open_captures_; }

 private:
  enum class State : std::uint8_t { waiting, armed, committed };
  bool can_commit() const { return state_ == State::armed && open_captures_ == 0; }
  bool quiet_since(std::uint64_t now_ns) const { return now_ns >= last_activity_ns_ + config_.quiet_ns; }

  TriggerConfig config_;
  State state_ = State::waiting;
  int open_captures_ = 0;
  std::uint64_t last_activity_ns_ = 0;
};

}  // namespace kvremap::policy
