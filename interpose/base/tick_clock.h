// Timestamps for the allocation hot path: the CPU's time-stamp counter where the kernel keeps time with it.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "interpose/base/hot_path.h"

namespace kvremap::interpose {

// A hook stamps its event with ticks() and leaves the conversion to nanoseconds for later (the
// writer thread, the summary): in a VM, clock_gettime(CLOCK_MONOTONIC) costs 25 ns against 10 ns for
// reading the counter, twice per cudaMalloc+cudaFree pair. The counter is used only where the kernel
// itself derives CLOCK_MONOTONIC from it (clocksource "tsc", which Linux picks only for an invariant,
// synchronised counter); elsewhere a tick is a CLOCK_MONOTONIC nanosecond.
enum class TickSource : std::uint8_t { kUndecided, kTsc, kMonotonic };

// A point where both clocks were read, and the clock rate measured up to it: maps ticks near it to
// CLOCK_MONOTONIC nanoseconds.
struct TickAnchor {
  std::uint64_t ticks = 0;
  std::uint64_t ns = 0;
  double ns_per_tick = 1.0;
};
// Pure: the CLOCK_MONOTONIC time of `ticks` by `anchor`'s line (before or after it).
inline std::uint64_t monotonic_ns_at(const TickAnchor& anchor, std::uint64_t ticks) {
  // Signed conversions only: the unsigned ones cost a branch sequence each.
  const double offset = static_cast<double>(static_cast<std::int64_t>(ticks - anchor.ticks)) * anchor.ns_per_tick;
  const auto rounded = static_cast<std::int64_t>(offset < 0 ? offset - 0.5 : offset + 0.5);
  if (rounded < 0 && static_cast<std::uint64_t>(-rounded) > anchor.ns) return 0;
  return anchor.ns + static_cast<std::uint64_t>(rounded);  // modulo 2^64: also right for a negative offset
}
// Pure: the anchor that follows `previous` at the reading (ticks, ns), its rate measured from `base`
// (an earlier anchor) when at least `min_span_ticks` separate them; otherwise the previous rate.
TickAnchor next_anchor(const TickAnchor& base, const TickAnchor& previous, std::uint64_t ticks, std::uint64_t ns,
                       std::uint64_t min_span_ticks);

inline std::uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

namespace tick_detail {
inline constinit std::atomic<TickSource> g_source{TickSource::kUndecided};
std::uint64_t decide_then_read();  // the first read: picks the source and calibrates it
}  // namespace tick_detail

// The hot-path timestamp: raw counter ticks or CLOCK_MONOTONIC nanoseconds, by the source in use.
[[gnu::always_inline]] inline std::uint64_t ticks() {
  const TickSource source = tick_detail::g_source.load(std::memory_order_relaxed);
#if defined(__x86_64__)
  if (KVREMAP_LIKELY(source == TickSource::kTsc)) return __rdtsc();
#endif
  if (source == TickSource::kMonotonic) return monotonic_now_ns();
  return tick_detail::decide_then_read();
}

// CLOCK_MONOTONIC nanoseconds of a tick value taken in this process; async-signal-safe.
std::uint64_t monotonic_ns_of(std::uint64_t ticks);
// About this many ticks per millisecond (for throttling intervals).
std::uint64_t ticks_per_ms();
// Re-reads both clocks so that later conversions extrapolate over little time (the background
// writer calls it every period; conversions do it themselves when the last anchor is old).
void refresh_tick_anchor();
TickSource tick_source();

// A forked child may have been forked while another thread refreshed: it starts unlocked.
void tick_clock_child_after_fork();
// For tests: starts over with `source` (kTsc is kMonotonic where the CPU has no counter; kUndecided
// decides as a first read does).
void reset_tick_clock_for_testing(TickSource source);

}  // namespace kvremap::interpose
