// Unit tests for policy/commit_trigger over the start-up sequences vLLM V1, SGLang and eager engines run.
#include "policy/commit_trigger.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t kMain = 0;          // the legacy default stream, where vLLM's model runner works
constexpr std::uint64_t kCapture = 0x5100;  // graph_capture()'s side stream
constexpr std::uint64_t kForward = 0x5200;  // SGLang's overlap-scheduler forward stream

// One step of an engine's sequence after the KV burst, as the interposer reports it.
struct Step {
  enum Kind { launch, graph_launch, capture_begin, capture_end, kv_access, stream_destroyed };
  Step(Kind k, std::uint64_t s = kMain, std::string w = "", KvReach r = KvReach::none)
      : kind(k), stream(s), what(std::move(w)), reach(r) {}
  Kind kind;
  std::uint64_t stream;
  std::string what;  // the engine's own name for the step, for failure messages
  KvReach reach;     // what a launch's parameters reach
};

// The engine's main and forward streams ran kernels before the deferral; the others are first used after.
StreamAge age_of(std::uint64_t stream) {
  return stream == kMain || stream == kForward ? StreamAge::in_use_before : StreamAge::new_since;
}

// Feeds `steps` after arming; returns the index of the step that committed (-1: none) and its reason.
std::pair<int, CommitReason> run(TriggerConfig config, const std::vector<Step>& steps) {
  CommitTrigger t(config);
  t.arm();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CommitReason r = CommitReason::none;
    switch (steps[i].kind) {
      case Step::launch:
        r = t.on_kernel_launch(steps[i].stream, steps[i].reach, age_of(steps[i].stream));
        break;
      case Step::stream_destroyed:
        t.stream_destroyed(steps[i].stream);
        break;
      case Step::graph_launch:
        r = t.on_graph_launch();
        break;
      case Step::kv_access:
        r = t.on_kv_access();
        break;
      case Step::capture_begin:
        t.capture_began(steps[i].stream);
        break;
      case Step::capture_end:
        t.capture_ended(steps[i].stream);
        break;
    }
    if (r != CommitReason::none) return {static_cast<int>(i), r};
  }
  return {-1, CommitReason::none};
}

void append_capture_loop(std::vector<Step>& s, int sizes, int warmups, bool piecewise = false) {
  for (int size = 0; size < sizes; ++size) {
    for (int w = 0; w < warmups; ++w) s.push_back({Step::launch, kCapture, "capture warm-up forward"});
    s.push_back({Step::capture_begin, kCapture, "capture begin"});
    s.push_back({Step::launch, kCapture, "captured kernel"});
    s.push_back({Step::capture_end, kCapture, "capture end"});
    if (piecewise) {  // attention runs eagerly between the pieces, on the same stream
      s.push_back({Step::launch, kCapture, "eager attention between pieces"});
      s.push_back({Step::capture_begin, kCapture, "next piece"});
      s.push_back({Step::capture_end, kCapture, "next piece end"});
    }
  }
}

// vLLM V1 graph mode (gpu_worker.compile_or_warm_up_model → capture_model): compile-size dummy runs
// and kernel autotuning on the main stream, then the capture loop on graph_capture()'s side stream.
std::vector<Step> vllm_graph_start_up(bool piecewise = false) {
  std::vector<Step> s;
  for (int i = 0; i < 6; ++i) s.push_back({Step::launch, kMain, "compile-size warm-up / autotune"});
  append_capture_loop(s, 5, 2, piecewise);
  return s;
}

constexpr TriggerConfig kGraphEngine{TriggerMode::automatic, true};
constexpr TriggerConfig kEagerEngine{TriggerMode::automatic, false};
constexpr TriggerConfig kGraphServer{TriggerMode::automatic, true, true};

}  // namespace

TEST(CommitTrigger, VllmGraphModeCommitsAtTheSamplerWarmUpAfterTheCaptureLoop) {
  auto s = vllm_graph_start_up();
  const int first_after = static_cast<int>(s.size());
  s.push_back({Step::launch, kMain, "_dummy_sampler_run"});
  s.push_back({Step::graph_launch, kMain, "first decode replay"});
  EXPECT_EQ(run(kGraphEngine, s), std::make_pair(first_after, CommitReason::launch_off_capture_streams));
}

TEST(CommitTrigger, VllmFirstRequestAnEagerPrefillAboveTheLargestCaptureCommitsBeforeIt) {
  auto s = vllm_graph_start_up();
  const int prefill = static_cast<int>(s.size());
  s.push_back({Step::launch, kMain, "eager prefill of 8192 tokens"});
  EXPECT_EQ(run(kGraphEngine, s).first, prefill);
}

TEST(CommitTrigger, VllmPiecewiseCaptureKeepsEagerAttentionBetweenPiecesDeferred) {
  auto s = vllm_graph_start_up(true);
  const int serving = static_cast<int>(s.size());
  s.push_back({Step::graph_launch, kMain, "piecewise replay"});
  EXPECT_EQ(run(kGraphEngine, s), std::make_pair(serving, CommitReason::graph_launch));
}

TEST(CommitTrigger, EnforceEagerCommitsBeforeTheFirstLaunchAfterTheBurst) {
  std::vector<Step> s = {{Step::launch, kMain, "warm-up dummy run"}, {Step::launch, kMain, "serving prefill"}};
  EXPECT_EQ(run(kEagerEngine, s), std::make_pair(0, CommitReason::launch_without_graphs));
}

// SGLang (cuda_graph_runner.capture): per batch size a memory query (no decision), two eager
// warm-ups on the capture stream, then the capture; after start-up the server's own warm-up request
// prefills eagerly on the default stream (or the overlap scheduler's forward stream).
TEST(CommitTrigger, SglangWarmUpRequestCommitsBeforeItsPrefill) {
  for (std::uint64_t serving_stream : {kMain, kForward}) {
    std::vector<Step> s = {{Step::launch, kMain, "torch.zeros of the graph runner's buffers"}};
    append_capture_loop(s, 4, 2);
    const int prefill = static_cast<int>(s.size());
    s.push_back({Step::launch, serving_stream, "warm-up request prefill"});
    s.push_back({Step::graph_launch, serving_stream, "decode replay"});
    EXPECT_EQ(run(kGraphEngine, s), std::make_pair(prefill, CommitReason::launch_off_capture_streams))
        << serving_stream;
  }
}

TEST(CommitTrigger, SglangDisableCudaGraphCommitsAtTheFirstLaunch) {
  std::vector<Step> s = {{Step::launch, kMain, "warm-up request prefill"}};
  EXPECT_EQ(run(kEagerEngine, s).first, 0);
}

TEST(CommitTrigger, GraphLaunchesAndKvAccessCommitInEveryMode) {
  for (TriggerMode mode : {TriggerMode::automatic, TriggerMode::first_launch, TriggerMode::manual}) {
    EXPECT_EQ(run({mode, true}, {{Step::graph_launch}}).second, CommitReason::graph_launch) << to_string(mode);
    EXPECT_EQ(run({mode, true}, {{Step::kv_access}}).second, CommitReason::kv_access) << to_string(mode);
  }
}

TEST(CommitTrigger, NothingCommitsWhileACaptureIsOpen) {
  std::vector<Step> s = {{Step::capture_begin, kCapture},
                         {Step::launch, kMain, "launch on another stream"},
                         {Step::graph_launch},
                         {Step::kv_access}};
  for (TriggerConfig c : {kGraphEngine, kEagerEngine, TriggerConfig{TriggerMode::first_launch, true}})
    EXPECT_EQ(run(c, s).first, -1);
  s.push_back({Step::capture_end, kCapture});
  s.push_back({Step::launch, kMain, "after the capture"});
  EXPECT_EQ(run(kGraphEngine, s).first, 5);
}

TEST(CommitTrigger, FirstLaunchModeCommitsEvenWhenGraphsAreExpected) {
  EXPECT_EQ(run({TriggerMode::first_launch, true}, vllm_graph_start_up()),
            std::make_pair(0, CommitReason::first_launch));
}

TEST(CommitTrigger, ManualModeWaitsForTheEngineButNotForAReplay) {
  CommitTrigger t({TriggerMode::manual, false});
  EXPECT_EQ(t.on_manual_commit(), CommitReason::none) << "not armed yet";
  t.arm();
  EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none);
  t.capture_began(kCapture);
  EXPECT_EQ(t.on_manual_commit(), CommitReason::none) << "a capture is open";
  t.capture_ended(kCapture);
  EXPECT_EQ(t.on_manual_commit(), CommitReason::manual);
  t.committed();
  EXPECT_EQ(t.on_manual_commit(), CommitReason::none);
  EXPECT_EQ(t.on_graph_launch(), CommitReason::none) << "committed once, for good";
}

TEST(CommitTrigger, NothingBeforeTheBurstIsOver) {
  CommitTrigger t(kEagerEngine);
  EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none);
  EXPECT_EQ(t.on_graph_launch(), CommitReason::none);
  EXPECT_EQ(t.on_kv_access(), CommitReason::none);
}

TEST(CommitTrigger, StreamsBeyondTheTableAreServingStreams) {
  CommitTrigger t(kGraphEngine);
  t.arm();
  for (std::uint64_t s = 1; s <= 40; ++s) {
    t.capture_began(s);
    t.capture_ended(s);
  }
  EXPECT_EQ(t.on_kernel_launch(3, KvReach::none, StreamAge::in_use_before), CommitReason::none) << "a capture stream";
  EXPECT_EQ(t.on_kernel_launch(39, KvReach::none, StreamAge::in_use_before), CommitReason::launch_off_capture_streams)
      << "never recorded";
}

// vLLM's graph-memory estimate captures on a side stream while profiling, before the KV burst; the
// warm-ups after the burst run on the main stream and must not be taken for serving.
TEST(CommitTrigger, CapturesBeforeTheBurstDoNotCount) {
  CommitTrigger t(kGraphEngine);
  t.capture_began(kForward);
  t.capture_ended(kForward);
  t.arm();
  EXPECT_FALSE(t.captured());
  EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none)
      << "autotune after the burst";
}

// vLLM when its attention backend cannot capture and attention is not compiled piecewise: it sets
// cudagraph_mode=NONE on its own (config/compilation.py:1433-1438), so no capture ever comes while its
// flags said graphs. The compile warm-ups stay start-up work; once the server listens on its port
// (vLLM's API server only after the engine core is ready), the first kernel — serving — commits, in
// every mode, and not while a capture is open.
TEST(CommitTrigger, TheServingPortOpeningEndsEveryStartUpWindow) {
  for (TriggerMode mode : {TriggerMode::automatic, TriggerMode::manual}) {
    SCOPED_TRACE(to_string(mode));
    CommitTrigger t({mode, true});
    t.arm();
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none)
          << "compile warm-up";
    t.serving_started();
    t.capture_began(kCapture);
    EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none)
        << "a capture is open";
    t.capture_ended(kCapture);
    EXPECT_EQ(t.on_kernel_launch(kCapture, KvReach::none, StreamAge::in_use_before), CommitReason::serving_port_open)
        << "even on a capture stream";
  }
  CommitTrigger waiting({TriggerMode::automatic, true});
  waiting.serving_started();
  EXPECT_EQ(waiting.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none)
      << "nothing deferred yet";
  waiting.arm();
  EXPECT_EQ(waiting.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::serving_port_open);
  EXPECT_EQ(to_string(CommitReason::serving_port_open), "kernel launch after the serving port opened");
}

// An offline engine (no serving port) whose flags say graphs but which captures nothing (vLLM sets
// cudagraph_mode NONE itself when its attention backend cannot capture, config/compilation.py:1433-1438):
// compile warm-ups and autotuning skip attention and stay deferred; its first forward's attention kernel
// takes the KV cache's address and commits before it runs.
TEST(CommitTrigger, AnOfflineEngineThatCapturesNothingCommitsAtItsFirstKernelReachingKv) {
  std::vector<Step> s;
  for (int i = 0; i < 6; ++i) s.push_back({Step::launch, kMain, "compile-size warm-up / autotune"});
  const int attention = static_cast<int>(s.size());
  s.push_back({Step::launch, kMain, "first forward's attention", KvReach::kv});
  s.push_back({Step::launch, kMain, "the next kernel"});
  EXPECT_EQ(run(kGraphEngine, s), std::make_pair(attention, CommitReason::kv_launch_before_capture));
  // A kernel the driver cannot describe might be that attention kernel.
  s[static_cast<std::size_t>(attention)].reach = KvReach::unknown;
  EXPECT_EQ(run(kGraphEngine, s), std::make_pair(attention, CommitReason::kv_launch_before_capture));
}

// A server keeps its start-up launches that reach KV before the first capture deferred (vLLM's 16-token
// FlashInfer attention warm-up, model_executor/warmup/kernel_warmup.py; SGLang's eager warm-up): its port's
// opening commits before any request, in every case.
TEST(CommitTrigger, AServerKeepsItsKvWarmUpBeforeCaptureDeferred) {
  std::vector<Step> s = {{Step::launch, kMain, "FlashInfer attention warm-up", KvReach::kv},
                         {Step::launch, kMain, "autotune", KvReach::unknown}};
  append_capture_loop(s, 3, 2);
  const int sampler = static_cast<int>(s.size());
  s.push_back({Step::launch, kMain, "_dummy_sampler_run"});
  EXPECT_EQ(run(kGraphServer, s), std::make_pair(sampler, CommitReason::launch_off_capture_streams));
  CommitTrigger t(kGraphServer);
  t.arm();
  EXPECT_FALSE(t.needs_kernel_reach()) << "a server's launches need not be read";
}

// Once a capture ran, the capture streams' warm-ups reach KV (FULL graphs hold attention) without
// committing, with or without a port; the reach is read only before the first capture.
TEST(CommitTrigger, KvReachMattersOnlyBeforeTheFirstCaptureOfAnEngineWithoutAPort) {
  std::vector<Step> s;
  append_capture_loop(s, 1, 0);
  s.push_back({Step::launch, kCapture, "FULL warm-up with attention", KvReach::kv});
  EXPECT_EQ(run(kGraphEngine, s).first, -1);
  CommitTrigger t(kGraphEngine);
  EXPECT_FALSE(t.needs_kernel_reach()) << "not armed";
  t.arm();
  EXPECT_TRUE(t.needs_kernel_reach());
  t.capture_began(kCapture);
  EXPECT_FALSE(t.needs_kernel_reach()) << "a capture is open";
  t.capture_ended(kCapture);
  EXPECT_FALSE(t.needs_kernel_reach()) << "a capture ran";
  for (TriggerConfig c :
       {kEagerEngine, TriggerConfig{TriggerMode::first_launch, true}, TriggerConfig{TriggerMode::manual, true}}) {
    CommitTrigger other(c);
    other.arm();
    EXPECT_FALSE(other.needs_kernel_reach()) << to_string(c.mode) << " " << c.graphs_expected;
  }
  EXPECT_EQ(run({TriggerMode::manual, true}, {{Step::launch, kMain, "attention", KvReach::kv}}).first, -1)
      << "manual waits for kvremap_commit()";
}

namespace {

constexpr std::uint64_t kDefaultCapture = 0x5300;  // PyTorch's process-wide torch.cuda.graph capture stream

// vLLM Model Runner V2's capture loop (v1/worker/gpu/cudagraph_utils.py:321-365, at 017e9f4): inside one
// graph_capture() — a side stream — PIECEWISE sizes first, warm-up and capture on that stream; then FULL
// sizes, warm-up on that stream and capture on PyTorch's default_capture_stream (torch.cuda.graph with no
// stream argument). Then warmup_kernels on the main stream.
std::vector<Step> mrv2_start_up(bool piecewise) {
  std::vector<Step> s;
  for (int i = 0; i < 4; ++i) s.push_back({Step::launch, kMain, "compile-size dummy run / kernel_warmup"});
  if (piecewise) append_capture_loop(s, 3, 1);
  for (int size = 0; size < 3; ++size) {
    s.push_back({Step::launch, kCapture, "FULL warm-up with attention", KvReach::kv});
    s.push_back({Step::capture_begin, kDefaultCapture, "FULL capture"});
    s.push_back({Step::launch, kDefaultCapture, "captured kernel"});
    s.push_back({Step::capture_end, kDefaultCapture, "FULL capture end"});
  }
  return s;
}

}  // namespace

// FULL graphs alone (FULL or FULL_DECODE_ONLY, forced by sequence parallelism or attention+quant fusion):
// the FULL warm-ups run on graph_capture()'s stream, which no capture ever runs on. It is the stream whose
// first kernel came after the deferral and before the first capture, so the warm-ups between captures stay
// start-up work and the commit comes at warmup_kernels on the main stream, after the last capture.
TEST(CommitTrigger, ModelRunnerV2sFullGraphWarmUpsStayDeferredUntilItsKernelWarmUp) {
  for (bool piecewise : {false, true}) {
    SCOPED_TRACE(piecewise ? "FULL_AND_PIECEWISE" : "FULL");
    auto s = mrv2_start_up(piecewise);
    const int warmup_kernels = static_cast<int>(s.size());
    s.push_back({Step::launch, kMain, "warmup_kernels: execute_model"});
    EXPECT_EQ(run(kGraphServer, s), std::make_pair(warmup_kernels, CommitReason::launch_off_capture_streams));
  }
}

// Only a stream first used before the first capture joins the warm-up streams: one the engine first uses
// once serving begins (SGLang's overlap forward stream, created early, first used by the warm-up request)
// is serving, as is a stream that was in use before the deferral.
TEST(CommitTrigger, AStreamFirstUsedAfterTheFirstCaptureIsServing) {
  constexpr std::uint64_t kLater = 0x5400;
  std::vector<Step> s;
  append_capture_loop(s, 2, 1);
  const int serving = static_cast<int>(s.size());
  s.push_back({Step::launch, kLater, "first kernel on a stream new since the deferral"});
  EXPECT_EQ(run(kGraphServer, s), std::make_pair(serving, CommitReason::launch_off_capture_streams));

  CommitTrigger t(kGraphServer);
  t.arm();
  EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before), CommitReason::none);
  t.capture_began(kCapture);
  t.capture_ended(kCapture);
  EXPECT_EQ(t.on_kernel_launch(kMain, KvReach::none, StreamAge::in_use_before),
            CommitReason::launch_off_capture_streams)
      << "the main stream ran kernels before the first capture, but it was in use before the deferral";
}

// A destroyed stream's handle can come back for a stream created later: that stream is neither the capture
// loop's nor a capture's, and its first kernel commits.
TEST(CommitTrigger, ADestroyedStartUpStreamsHandleIsServingWhenReused) {
  for (std::uint64_t destroyed : {kCapture, kDefaultCapture}) {
    auto s = mrv2_start_up(false);
    s.push_back({Step::stream_destroyed, destroyed, "the capture loop's stream destroyed"});
    const int reused = static_cast<int>(s.size());
    s.push_back({Step::launch, destroyed, "a new stream with the same handle"});
    EXPECT_EQ(run(kGraphServer, s), std::make_pair(reused, CommitReason::launch_off_capture_streams)) << destroyed;
  }
  CommitTrigger t(kGraphServer);
  t.arm();
  t.capture_began(kCapture);
  t.capture_ended(kCapture);
  t.stream_destroyed(kCapture);
  EXPECT_TRUE(t.captured()) << "a capture ran, whatever became of its stream";
}
