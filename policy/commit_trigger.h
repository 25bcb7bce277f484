// When to commit the deferred KV cache: a pure state machine over captures, launches and KV accesses.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kvremap::policy {

// KVREMAP_COMMIT's values (`auto`, `first-launch`, `manual`), in the options table's order.
enum class TriggerMode : std::uint8_t {
  automatic,     // "auto": start-up windows proven from captures and the engine's flags (below)
  first_launch,  // "first-launch": before the first launch of any kind after the KV burst
  manual,        // "manual": the engine calls kvremap_commit(); graph launches and KV accesses still commit
};
std::string_view to_string(TriggerMode mode);

struct TriggerConfig {
  TriggerMode mode = TriggerMode::automatic;
  // Captures follow the KV burst (a recognised engine in graph mode: policy/engine.h). Without that
  // knowledge no launch after the burst can be told from serving.
  bool graphs_expected = false;
  // The engine is a server whose serving port kvremap read from its command line (EngineProfile's
  // serving_port or serving_socket): its listen commits before the first request, so start-up launches
  // before the first capture may reach the KV cache (vLLM's FlashInfer attention warm-up, SGLang's eager
  // warm-up). Without one, such a launch commits.
  bool serving_port_commits = false;
};

// What a kernel launch's parameters say of the deferred KV cache (policy/kernel_arguments.h).
enum class KvReach : std::uint8_t {
  none,     // no parameter carries an address of a deferred KV tensor
  kv,       // one does
  unknown,  // the driver could not describe the kernel's parameters
};

// When a stream carried its first kernel in this process, relative to the KV deferral (arm()).
enum class StreamAge : std::uint8_t {
  in_use_before,  // it ran kernels before the deferral (the engine's main stream, its forward stream), or
                  // kvremap cannot tell (its table of streams is full, or the handle was destroyed and reused)
  new_since,      // its first kernel came after the deferral
};

// Why a decision point commits, for the trace and the log.
enum class CommitReason : std::uint8_t {
  none,                        // not now
  graph_launch,                // a graph replay outside capture reads the KV cache
  kv_access,                   // a copy, memset, IPC handle, export or range query touching a KV tensor
  launch_off_capture_streams,  // after captures, a kernel on a stream neither they nor their warm-ups ran on: serving
  launch_without_graphs,       // a kernel after the burst of an engine that will not capture
  kv_launch_before_capture,    // a kernel reaching KV before any capture, no serving port to wait for
  first_launch,                // KVREMAP_COMMIT=first-launch
  manual,                      // kvremap_commit()
  serving_port_open,           // a kernel after the engine's server began listening: serving, whatever the flags said
};
std::string_view to_string(CommitReason reason);
// Whether a commit for `reason` happens where serving begins (a replay, a kernel off the capture streams
// or reaching KV with no capture to come, the server listening), rather than before start-up work that
// may still follow it (an eager engine's first kernel, KVREMAP_COMMIT=first-launch, kvremap_commit(), a
// copy into KV).
bool commits_at_serving(CommitReason reason);

// The commit invariant: no work that could be serving runs on deferred KV. Work on deferred KV is
// allowed only in start-up windows this machine can prove:
// - with graphs expected and no capture yet: kernel launches (compile warm-ups, autotuning) — both
//   vLLM and SGLang capture before they serve, and neither serves before its capture loop. A launch
//   whose parameters reach the KV cache (or cannot be read) is allowed there only for a server whose
//   port kvremap knows: an engine that drops its graphs on its own and has no port to wait for
//   (vLLM's offline LLM class, `vllm bench`, SGLang's Engine) serves eagerly with attention kernels
//   that take KV addresses, and the first of them commits; compile warm-ups and autotuning, which
//   skip attention, stay deferred;
// - once a capture has begun: kernel launches on the streams captures ran on (the warm-up forwards
//   each engine runs on its capture stream before every capture), and on the streams whose first
//   kernel came after the deferral and before the first capture: the stream graph_capture() makes
//   current for the capture loop, where Model Runner V2 runs the warm-ups of FULL graphs it captures
//   on PyTorch's process-wide capture stream (vLLM v1/worker/gpu/cudagraph_utils.py:321-365). vLLM's
//   and SGLang's serving runs on streams in use before the deferral (the stream the model ran on while
//   loading and profiling) or first used once serving begins (SGLang's overlap forward stream), so its
//   first kernel commits;
// - while any capture is open: everything (a capture records work rather than running it, and
//   committing would synchronise, which a capture forbids).
// Any graph launch outside capture, and any access to a KV tensor by copy, memset, export or range
// query, commits. Without graphs expected the first launch after the burst commits. Once the engine's
// server listens on its serving port (in any process of the engine: serving_started()), every kernel
// launch commits in every mode: the engines listen only after their start-up, so no window extends
// past it, however the flags misjudged the captures. Memory queries never decide: engines query
// between captures.
class CommitTrigger {
 public:
  explicit CommitTrigger(TriggerConfig config) : config_(config) {}

  // The KV burst is over and its backing deferred: from now on a decision point may commit.
  void arm();
  void capture_began(std::uint64_t stream);
  void capture_ended(std::uint64_t stream);
  // The engine destroyed `stream`: a stream created later may get its handle, and is not its warm-ups.
  void stream_destroyed(std::uint64_t stream);
  // The engine's server listens: no start-up window is open from here on.
  void serving_started() { serving_ = true; }

  // Decision points, each before the call reaches the driver. Never a commit while a capture is
  // open, before arm(), or after committed().
  // Whether the next on_kernel_launch depends on what the launch's parameters reach: only then need the
  // caller read them.
  bool needs_kernel_reach() const;
  CommitReason on_kernel_launch(std::uint64_t stream, KvReach reach, StreamAge age);
  CommitReason on_graph_launch();
  CommitReason on_kv_access();
  CommitReason on_manual_commit();

  void committed() { state_ = State::committed; }
  bool armed() const { return state_ == State::armed; }
  bool is_committed() const { return state_ == State::committed; }
  int open_captures() const { return open_captures_; }
  bool captured() const { return captured_; }

 private:
  enum class State : std::uint8_t { waiting, armed, committed };
  bool can_commit() const { return state_ == State::armed && open_captures_ == 0; }
  // A stream captures ran on, or the capture loop's warm-up stream.
  bool is_start_up_stream(std::uint64_t stream) const;

  TriggerConfig config_;
  State state_ = State::waiting;
  int open_captures_ = 0;
  bool serving_ = false;
  bool captured_ = false;  // a capture began after arm()
  // Streams captures began on after arm(), and streams new since arm() that ran kernels before the first
  // capture (engines use one to three); beyond the table, a further stream makes its launches commit,
  // which is never wrong.
  static constexpr std::size_t kMaxStartUpStreams = 16;
  std::array<std::uint64_t, kMaxStartUpStreams> start_up_streams_{};
  std::size_t start_up_streams_used_ = 0;
  void remember_start_up_stream(std::uint64_t stream);
};

}  // namespace kvremap::policy
