// The hot-path tick clock: its conversion arithmetic, and agreement with CLOCK_MONOTONIC for each source.
#include "interpose/base/tick_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace kvremap::interpose {
namespace {

TEST(TickClock, AnchorLineMapsTicksOnBothSidesOfTheAnchor) {
  const TickAnchor a{1000, 5000, 0.5};
  EXPECT_EQ(monotonic_ns_at(a, 1000), 5000u);
  EXPECT_EQ(monotonic_ns_at(a, 3000), 6000u);
  EXPECT_EQ(monotonic_ns_at(a, 0), 4500u);  // before the anchor
  EXPECT_EQ(monotonic_ns_at(TickAnchor{1'000'000, 10, 1.0}, 0), 0u);  // never below zero
  // A day of 3 GHz ticks past the anchor stays exact to the nanosecond's rounding.
  const std::uint64_t day = 86'400ULL * 3'000'000'000ULL;
  EXPECT_EQ(monotonic_ns_at(TickAnchor{7, 0, 1.0 / 3.0}, 7 + day), 86'400'000'000'000ULL);
}

TEST(TickClock, NextAnchorMeasuresTheRateFromTheBaseOnlyOverALongEnoughSpan) {
  const TickAnchor base{100, 1000, 0.25};
  const TickAnchor previous{300, 1050, 0.25};
  // 1000 ticks after the base, 2000 ns later: 2 ns per tick.
  const TickAnchor far = next_anchor(base, previous, 1100, 3000, 500);
  EXPECT_EQ(far.ticks, 1100u);
  EXPECT_EQ(far.ns, 3000u);
  EXPECT_DOUBLE_EQ(far.ns_per_tick, 2.0);
  // Too close to the base for a rate: the previous one is kept, the reading becomes the anchor.
  const TickAnchor near = next_anchor(base, previous, 400, 1075, 500);
  EXPECT_EQ(near.ticks, 400u);
  EXPECT_EQ(near.ns, 1075u);
  EXPECT_DOUBLE_EQ(near.ns_per_tick, 0.25);
}

// Converting a tick must land between CLOCK_MONOTONIC readings taken just before and just after it
// (a thread preempted in between only widens the bracket); the slack covers the calibration's
// error over the at most one millisecond a conversion extrapolates.
void expect_agrees_with_monotonic(std::uint64_t slack_ns) {
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t before = monotonic_now_ns();
    const std::uint64_t t = ticks();
    const std::uint64_t after = monotonic_now_ns();
    const std::uint64_t ns = monotonic_ns_of(t);
    ASSERT_GE(ns + slack_ns, before) << "iteration " << i;
    ASSERT_LE(ns, after + slack_ns) << "iteration " << i;
  }
}

// Old ticks, converted after the anchor moved on, keep their time.
void expect_old_ticks_keep_their_time(std::uint64_t slack_ns) {
  std::vector<std::uint64_t> before, stamp, after;
  for (int i = 0; i < 20; ++i) {
    before.push_back(monotonic_now_ns());
    stamp.push_back(ticks());
    after.push_back(monotonic_now_ns());
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  refresh_tick_anchor();
  for (std::size_t i = 0; i < stamp.size(); ++i) {
    const std::uint64_t ns = monotonic_ns_of(stamp[i]);
    EXPECT_GE(ns + slack_ns, before[i]) << "stamp " << i;
    EXPECT_LE(ns, after[i] + slack_ns) << "stamp " << i;
  }
}

TEST(TickClock, MonotonicSourceTicksAreNanoseconds) {
  reset_tick_clock_for_testing(TickSource::kMonotonic);
  EXPECT_EQ(tick_source(), TickSource::kMonotonic);
  EXPECT_EQ(ticks_per_ms(), 1'000'000u);
  expect_agrees_with_monotonic(0);
  expect_old_ticks_keep_their_time(0);
}

TEST(TickClock, CounterSourceAgreesWithMonotonicRightAfterCalibrationAndLater) {
  reset_tick_clock_for_testing(TickSource::kTsc);
#if defined(__x86_64__)
  ASSERT_EQ(tick_source(), TickSource::kTsc);
  // Right after the 50 µs calibration the rate is least certain.
  expect_agrees_with_monotonic(2'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  refresh_tick_anchor();  // now the rate is measured over 20 ms
  expect_agrees_with_monotonic(500);
  expect_old_ticks_keep_their_time(1'000);
  // A millisecond of ticks is a plausible counter rate (between 100 MHz and 10 GHz).
  EXPECT_GT(ticks_per_ms(), 100'000u);
  EXPECT_LT(ticks_per_ms(), 10'000'000u);
#else
  EXPECT_EQ(tick_source(), TickSource::kMonotonic);  // no counter: nanoseconds
  expect_agrees_with_monotonic(0);
#endif
}

TEST(TickClock, FirstReadChoosesTheCounterOnlyWhereTheKernelKeepsTimeWithIt) {
  // A fresh process decides on its first read; this one already has: the decision must match the
  // kernel's clock source.
  reset_tick_clock_for_testing(TickSource::kUndecided);
  const TickSource chosen = tick_source();
  EXPECT_NE(chosen, TickSource::kUndecided);
  bool kernel_uses_tsc = false;
  if (FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
    char name[32] = {};
    kernel_uses_tsc = std::fgets(name, sizeof name, f) && std::string(name) == "tsc\n";
    std::fclose(f);
  }
#if defined(__x86_64__)
  EXPECT_EQ(chosen == TickSource::kTsc, kernel_uses_tsc);
#else
  EXPECT_EQ(chosen, TickSource::kMonotonic);
#endif
  expect_agrees_with_monotonic(2'000);
}

}  // namespace
}  // namespace kvremap::interpose
