// The hot-path tick clock: source choice, calibration against CLOCK_MONOTONIC, conversions.
#include "interpose/base/tick_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kvremap::interpose {
namespace {

// The first rate is measured over this long at the first read; refreshes replace it with the rate
// since that first reading, once at least a millisecond separates them.
constexpr std::uint64_t kCalibrationNs = 50'000;

// The current anchor, readable from any thread and from signal handlers without a lock: two slots,
// each with a sequence number (odd while being written); a refresh writes the inactive slot and
// then makes it the active one, so a reader (even one interrupting a refresh) finds a whole anchor.
struct AnchorSlot {
  std::atomic<std::uint32_t> sequence{0};
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> ns{0};
  std::atomic<double> ns_per_tick{1.0};
};
constinit AnchorSlot g_slots[2];
constinit std::atomic<unsigned> g_active{0};
constinit std::atomic_flag g_refreshing = ATOMIC_FLAG_INIT;  // one refresher at a time
constinit TickAnchor g_base{};                               // the first reading; written only by init
constinit std::atomic<std::uint64_t> g_ticks_per_ms{1'000'000};
// Counts anchor changes, so that a thread converting many ticks (the writer) reads the anchor once
// per change instead of once per conversion.
constinit std::atomic<std::uint64_t> g_generation{0};
struct CachedAnchor {
  std::uint64_t generation = ~0ULL;
  TickAnchor anchor;
};
constinit thread_local CachedAnchor t_cached;

TickAnchor read_anchor() {
  for (;;) {
    const AnchorSlot& s = g_slots[g_active.load(std::memory_order_acquire) & 1];
    const std::uint32_t before = s.sequence.load(std::memory_order_acquire);
    if (before & 1) continue;
    TickAnchor a{s.ticks.load(std::memory_order_relaxed), s.ns.load(std::memory_order_relaxed),
                 s.ns_per_tick.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.sequence.load(std::memory_order_relaxed) == before) return a;
  }
}

// Callers hold g_refreshing (or are initialising).
void write_anchor(const TickAnchor& a) {
  const unsigned next = (g_active.load(std::memory_order_relaxed) + 1) & 1;
  AnchorSlot& s = g_slots[next];
  const std::uint32_t sequence = s.sequence.load(std::memory_order_relaxed);
  s.sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.ticks.store(a.ticks, std::memory_order_relaxed);
  s.ns.store(a.ns, std::memory_order_relaxed);
  s.ns_per_tick.store(a.ns_per_tick, std::memory_order_relaxed);
  s.sequence.store(sequence + 2, std::memory_order_release);
  g_active.store(next, std::memory_order_release);
  g_generation.fetch_add(1, std::memory_order_release);
  const double per_ms = a.ns_per_tick > 0 ? 1e6 / a.ns_per_tick : 1e6;
  g_ticks_per_ms.store(per_ms >= 1 ? static_cast<std::uint64_t>(per_ms) : 1, std::memory_order_relaxed);
}

std::uint64_t read_counter() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return monotonic_now_ns();
#endif
}

// Both clocks at (nearly) one instant: the counter read on both sides of clock_gettime, the closest
// of three tries, the counter taken at its midpoint.
TickAnchor read_both() {
  TickAnchor best{};
  std::uint64_t best_width = ~0ULL;
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t t0 = read_counter();
    const std::uint64_t ns = monotonic_now_ns();
    const std::uint64_t t1 = read_counter();
    if (t1 - t0 < best_width) {
      best_width = t1 - t0;
      best.ticks = t0 + (t1 - t0) / 2;
      best.ns = ns;
    }
  }
  return best;
}

bool counter_is_kernel_clock() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID 0x80000007, EDX bit 8: the counter runs at a constant rate in every power state.
  if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8))) return false;
  // And the kernel trusts it for its own clock (it switches away when it finds it unstable or
  // unsynchronised between CPUs, e.g. after a VM migration).
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[32] = {};
  const ssize_t n = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
#else
  return false;
#endif
}

void init(TickSource wanted) {
  TickSource source = wanted;
#if !defined(__x86_64__)
  source = TickSource::kMonotonic;
#endif
  if (source == TickSource::kTsc) {
    const TickAnchor first = read_both();
    while (monotonic_now_ns() - first.ns < kCalibrationNs) {
    }
    TickAnchor second = read_both();
    second.ns_per_tick = second.ticks > first.ticks ? static_cast<double>(second.ns - first.ns) /
                                                          static_cast<double>(second.ticks - first.ticks)
                                                    : 1.0;
    g_base = TickAnchor{first.ticks, first.ns, second.ns_per_tick};
    write_anchor(second);
  } else {
    source = TickSource::kMonotonic;
    g_base = TickAnchor{};
    write_anchor(TickAnchor{});  // ticks are nanoseconds: the identity line
  }
  tick_detail::g_source.store(source, std::memory_order_release);
}

}  // namespace

TickAnchor next_anchor(const TickAnchor& base, const TickAnchor& previous, std::uint64_t ticks, std::uint64_t ns,
                       std::uint64_t min_span_ticks) {
  TickAnchor next{ticks, ns, previous.ns_per_tick};
  if (ticks > base.ticks && ticks - base.ticks >= min_span_ticks && ns > base.ns)
    next.ns_per_tick = static_cast<double>(ns - base.ns) / static_cast<double>(ticks - base.ticks);
  return next;
}

namespace tick_detail {
std::uint64_t decide_then_read() {
  static std::once_flag once;
  std::call_once(once, [] { init(counter_is_kernel_clock() ? TickSource::kTsc : TickSource::kMonotonic); });
  return ticks();
}
}  // namespace tick_detail

void refresh_tick_anchor() {
  if (tick_detail::g_source.load(std::memory_order_acquire) != TickSource::kTsc) return;
  if (g_refreshing.test_and_set(std::memory_order_acquire)) return;  // another thread is at it
  const TickAnchor now = read_both();
  write_anchor(next_anchor(g_base, read_anchor(), now.ticks, now.ns, g_ticks_per_ms.load(std::memory_order_relaxed)));
  g_refreshing.clear(std::memory_order_release);
}

std::uint64_t monotonic_ns_of(std::uint64_t t) {
  if (tick_detail::g_source.load(std::memory_order_acquire) != TickSource::kTsc) return t;
  const auto current = [] {
    const std::uint64_t generation = g_generation.load(std::memory_order_acquire);
    if (t_cached.generation != generation) {
      // Invalid while being rewritten: a signal handler converting on this thread must not find a
      // half-written anchor under a valid generation. (It may be newer than `generation`: fine.)
      t_cached.generation = ~0ULL;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t_cached.anchor = read_anchor();
      std::atomic_signal_fence(std::memory_order_seq_cst);
      t_cached.generation = generation;
    }
    return t_cached.anchor;
  };
  TickAnchor a = current();
  // Far past the anchor the rate's small error adds up: read both clocks again first.
  if (t > a.ticks && t - a.ticks > g_ticks_per_ms.load(std::memory_order_relaxed)) {
    refresh_tick_anchor();
    a = current();
  }
  return monotonic_ns_at(a, t);
}

std::uint64_t ticks_per_ms() {
  return tick_source() == TickSource::kTsc ? g_ticks_per_ms.load(std::memory_order_relaxed) : 1'000'000;
}

TickSource tick_source() {
  if (tick_detail::g_source.load(std::memory_order_acquire) == TickSource::kUndecided) ticks();
  return tick_detail::g_source.load(std::memory_order_acquire);
}

void tick_clock_child_after_fork() { g_refreshing.clear(std::memory_order_release); }

void reset_tick_clock_for_testing(TickSource source) {
  while (g_refreshing.test_and_set(std::memory_order_acquire)) {
  }
  init(source == TickSource::kUndecided ? (counter_is_kernel_clock() ? TickSource::kTsc : TickSource::kMonotonic)
                                        : source);
  g_refreshing.clear(std::memory_order_release);
}

}  // namespace kvremap::interpose
