// Unit tests for policy/commit_trigger over start-up sequences modelled on vLLM, SGLang and eager engines.
#include "policy/commit_trigger.h"

#include <gtest/gtest.h>

using namespace kvremap::policy;

namespace {
constexpr std::uint64_t kMs = 1'000'000ULL;

TriggerConfig mode(const char* text) {
  auto c = parse_trigger(text, 5000);
  EXPECT_TRUE(c.has_value()) << text;
  return c.value_or(TriggerConfig{});
}

// vLLM: query before the capture loop, per size eager warm-ups then one capture, query after the
// loop, then serving replays graphs. Returns the step at which the trigger fired (-1: never).
int vllm_sequence(CommitTrigger& t, int sizes) {
  std::uint64_t now = 10 * kMs;
  int step = 0;
  t.arm(now);
  if (t.on_memory_query(now += kMs)) return step;
  ++step;
  for (int s = 0; s < sizes; ++s) {
    for (int w = 0; w < 3; ++w, ++step)
      if (t.on_kernel_launch(now += kMs)) return step;
    t.capture_began(now += kMs);
    if (t.on_kernel_launch(now += kMs) || t.on_memory_query(now)) return step;  // inside capture
    t.capture_ended(now += kMs);
    ++step;
  }
  if (t.on_memory_query(now += kMs)) return step;
  ++step;
  if (t.on_graph_launch(now += kMs)) return step;
  return -1;
}
}  // namespace

TEST(CommitTrigger, ParsesEveryModeAndRejectsOthers) {
  EXPECT_EQ(mode("auto").mode, TriggerMode::automatic);
  EXPECT_EQ(mode("auto").quiet_ns, 5000 * kMs);
  EXPECT_EQ(mode("first-query").mode, TriggerMode::first_query);
  EXPECT_EQ(mode("graph-launch").mode, TriggerMode::graph_launch);
  EXPECT_EQ(mode("manual").mode, TriggerMode::manual);
  EXPECT_EQ(mode("quiet:250").mode, TriggerMode::quiet);
  EXPECT_EQ(mode("quiet:250").quiet_ns, 250 * kMs);
  for (const char* bad : {"", "Auto", "quiet:", "quiet:x", "quiet:-1", "graph", "quiet:99999999999"})
    EXPECT_FALSE(parse_trigger(bad, 5000)) << bad;
}

TEST(CommitTrigger, AutoCommitsVllmAtTheFirstGraphReplayNotBefore) {
  CommitTrigger t(mode("auto"));
  const int sizes = 67;
  // The last step, the replay: no warm-up launch, no query before or between captures commits.
  EXPECT_EQ(vllm_sequence(t, sizes), 1 + sizes * 4 + 1);
}

TEST(CommitTrigger, AQueryBetweenCapturesIsNotTheEnd) {
  // SGLang queries after every capture; warm-up launches follow before the next one.
  CommitTrigger t(mode("auto"));
  std::uint64_t now = 0;
  t.arm(now);
  for (int s = 0; s < 5; ++s) {
    EXPECT_FALSE(t.on_kernel_launch(now += kMs));
    t.capture_began(now += kMs);
    t.capture_ended(now += kMs);
    EXPECT_FALSE(t.on_memory_query(now += kMs)) << "capture " << s;
  }
  EXPECT_TRUE(t.on_graph_launch(now += kMs));
}

TEST(CommitTrigger, NothingCommitsWhileACaptureIsOpenOrBeforeArming) {
  CommitTrigger t(mode("first-query"));
  EXPECT_FALSE(t.on_memory_query(kMs)) << "not armed: the KV burst is not over";
  EXPECT_FALSE(t.on_graph_launch(kMs));
  t.arm(2 * kMs);
  t.capture_began(3 * kMs);
  EXPECT_FALSE(t.on_memory_query(4 * kMs));
  EXPECT_FALSE(t.on_graph_launch(4 * kMs)) << "a launch into a capture is recorded, not run";
  EXPECT_FALSE(t.on_manual_commit());
  t.capture_ended(5 * kMs);
  EXPECT_TRUE(t.on_memory_query(6 * kMs));
  t.committed();
  EXPECT_FALSE(t.on_graph_launch(7 * kMs)) << "committed once";
  EXPECT_TRUE(t.is_committed());
}

TEST(CommitTrigger, EagerEnginesCommitAtTheFirstLaunchAfterTheQuietTime) {
  CommitTrigger t(mode("auto"));
  std::uint64_t now = 0;
  t.arm(now);
  // Autotuning: modules load and buffers are allocated right before their launches.
  for (int i = 0; i < 20; ++i) {
    t.start_up_activity(now += 3000 * kMs);  // even seconds apart, activity resets the clock
    EXPECT_FALSE(t.on_kernel_launch(now += kMs)) << i;
  }
  EXPECT_FALSE(t.on_kernel_launch(now += 4998 * kMs)) << "just under the quiet time";
  EXPECT_TRUE(t.on_kernel_launch(now += 2 * kMs));
}

TEST(CommitTrigger, GraphLaunchModeIgnoresQueriesAndQuietLaunches) {
  CommitTrigger t(mode("graph-launch"));
  t.arm(0);
  EXPECT_FALSE(t.on_memory_query(kMs));
  EXPECT_FALSE(t.on_kernel_launch(1'000'000 * kMs));
  EXPECT_TRUE(t.on_graph_launch(1'000'001 * kMs));
}

TEST(CommitTrigger, QuietModeUsesItsOwnTime) {
  CommitTrigger t(mode("quiet:100"));
  t.arm(0);
  EXPECT_FALSE(t.on_memory_query(500 * kMs));
  EXPECT_FALSE(t.on_kernel_launch(99 * kMs));
  EXPECT_TRUE(t.on_kernel_launch(100 * kMs));
}

TEST(CommitTrigger, ManualModeWaitsForTheCallButNeverLetsAGraphReadScratch) {
  CommitTrigger t(mode("manual"));
  t.arm(0);
  EXPECT_FALSE(t.on_memory_query(kMs));
  EXPECT_FALSE(t.on_kernel_launch(1'000'000 * kMs));
  EXPECT_TRUE(t.on_manual_commit());
  CommitTrigger u(mode("manual"));
  u.arm(0);
  EXPECT_TRUE(u.on_graph_launch(kMs)) << "the invariant beats the mode";
}
