// The tracker in-process: accounting by category and device, peaks, the live maps, captures and what kv_queries answer.
#include "interpose/track/tracker.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

#include "interpose/track/tracking_state.h"
#include "policy/events.h"

namespace {

using namespace kvremap::interpose;
using kvremap::policy::Category;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

// No driver is loaded in this process, so every call the tracker attributes itself lands on device 0.
constexpr int kQueryDevice = 0;

// A category's live bytes and peak on a device, signed as the tracker keeps them.
std::int64_t live(int device, Category c) { return post_kv_windows(device)[tracker_detail::index_of(c)].live; }

std::int64_t peak(int device, Category c) {
  const auto& stats = tracker_detail::S().devices[static_cast<std::size_t>(device)].categories;
  return stats[tracker_detail::index_of(c)].peak.load();
}

// `n` MiB as the tracker's signed byte counts.
constexpr std::int64_t mib(std::int64_t n) { return n << 20; }

class Tracker : public ::testing::Test {
 protected:
  // Each test starts from a fresh state, as a forked child does. It is marked started, so no trace
  // file is opened and no exit handler installed; the earlier states stay reachable through it.
  void SetUp() override {
    auto* fresh = new tracker_detail::State;
    fresh->forked_from = tracker_detail::g_state.peek();
    fresh->trace_opened.store(true);
    tracker_detail::g_state.replace(fresh);
    ASSERT_TRUE(tracking());
  }
};

TEST_F(Tracker, EachKindOfAllocationHasItsCategory) {
  on_alloc(0x1000, 10 * kMiB, AllocKind::kPlain, "cuMemAlloc", nullptr, 1);
  on_alloc(0x2000, 20 * kMiB, AllocKind::kStreamOrdered, "cuMemAllocAsync", nullptr, 1);
  on_alloc(0x3000, 30 * kMiB, AllocKind::kVmmHandle, "cuMemCreate", nullptr, 1);
  on_alloc(0x4000, 40 * kMiB, AllocKind::kKvArena, "cudaMalloc", nullptr, 1);
  EXPECT_EQ(live(1, Category::other), mib(10));
  EXPECT_EQ(live(1, Category::async_pool), mib(20));
  EXPECT_EQ(live(1, Category::vmm), mib(30));
  EXPECT_EQ(live(1, Category::kv), mib(40));
  EXPECT_EQ(live(1, Category::graph_pool), 0);
}

TEST_F(Tracker, DevicesAreAccountedApart) {
  on_alloc(0x1000, 8 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 2);
  on_alloc(0x2000, 3 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 5);
  EXPECT_EQ(live(2, Category::other), mib(8));
  EXPECT_EQ(live(5, Category::other), mib(3));
  EXPECT_EQ(live(3, Category::other), 0);
  EXPECT_TRUE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
  EXPECT_EQ(live(2, Category::other), 0);
  EXPECT_EQ(live(5, Category::other), mib(3));
}

TEST_F(Tracker, AFreeReturnsTheBytesOnceAndOnlyForATrackedPointer) {
  on_alloc(0x1000, 5 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  EXPECT_FALSE(on_free(0x9000, AllocKind::kPlain, "cudaFree"));
  EXPECT_TRUE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
  EXPECT_FALSE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
  EXPECT_EQ(live(0, Category::other), 0);
}

TEST_F(Tracker, HandlesAndPointersAreKeptInSeparateMaps) {
  on_alloc(0x1000, 4 * kMiB, AllocKind::kVmmHandle, "cuMemCreate", nullptr, 0);
  EXPECT_FALSE(on_free(0x1000, AllocKind::kPlain, "cuMemFree"));
  EXPECT_EQ(live(0, Category::vmm), mib(4));
  EXPECT_TRUE(on_free(0x1000, AllocKind::kVmmHandle, "cuMemRelease"));
  EXPECT_EQ(live(0, Category::vmm), 0);
}

TEST_F(Tracker, ANullPointerIsNotAnAllocation) {
  on_alloc(0, 7 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  EXPECT_EQ(live(0, Category::other), 0);
  EXPECT_FALSE(on_free(0, AllocKind::kPlain, "cudaFree"));
}

TEST_F(Tracker, AReusedPointerRetiresItsEarlierRecord) {
  // The driver handed the address out again: the free in between was not seen.
  on_alloc(0x1000, 6 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_alloc(0x1000, 2 * kMiB, AllocKind::kStreamOrdered, "cudaMallocAsync", nullptr, 0);
  EXPECT_EQ(live(0, Category::other), 0);
  EXPECT_EQ(live(0, Category::async_pool), mib(2));
  EXPECT_TRUE(on_free(0x1000, AllocKind::kStreamOrdered, "cudaFreeAsync"));
  EXPECT_EQ(live(0, Category::async_pool), 0);
}

TEST_F(Tracker, PeaksKeepTheHighestLiveBytes) {
  on_alloc(0x1000, 100 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_alloc(0x2000, 50 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_free(0x1000, AllocKind::kPlain, "cudaFree");
  on_alloc(0x3000, 20 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  EXPECT_EQ(live(0, Category::other), mib(70));
  EXPECT_EQ(peak(0, Category::other), mib(150));
  EXPECT_EQ(peak(0, Category::kv), 0);
}

TEST_F(Tracker, AFailedReleaseKeepsTheObjectTracked) {
  on_alloc(0x1000, 9 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  constexpr int kOk = 0, kFailed = 1;
  EXPECT_EQ(tracked_free(0x1000, Held::kAllocation, "cudaFree", kOk, [] { return kFailed; }), kFailed);
  EXPECT_EQ(live(0, Category::other), mib(9));
  EXPECT_EQ(tracked_free(0x1000, Held::kAllocation, "cudaFree", kOk, [] { return kOk; }), kOk);
  EXPECT_EQ(live(0, Category::other), 0);
  EXPECT_FALSE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
}

TEST_F(Tracker, DuringAReleaseItsEntryIsOutOfTheMap) {
  on_alloc(0x1000, 9 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  // Another thread given the address as soon as the driver released it records it afresh.
  tracked_free(0x1000, Held::kAllocation, "cudaFree", 0, [] {
    on_alloc(0x1000, 1 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
    return 0;
  });
  EXPECT_EQ(live(0, Category::other), mib(1));
  EXPECT_TRUE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
}

TEST_F(Tracker, GraphExecsAndModulesHoldMemoryUntilReleased) {
  on_graph_instantiate(0xe000, 12 * kMiB, "cuGraphInstantiateWithFlags");
  on_module_load(0xa000, 3 * kMiB, "cuModuleLoadData");
  EXPECT_EQ(live(kQueryDevice, Category::graph_exec), mib(12));
  EXPECT_EQ(live(kQueryDevice, Category::module), mib(3));
  tracked_free(0xe000, Held::kGraphExec, "cuGraphExecDestroy", 0, [] { return 0; });
  tracked_free(0xa000, Held::kModule, "cuModuleUnload", 0, [] { return 0; });
  EXPECT_EQ(live(kQueryDevice, Category::graph_exec), 0);
  EXPECT_EQ(live(kQueryDevice, Category::module), 0);
}

TEST_F(Tracker, ReclassifyMovesBytesBetweenOtherAndKv) {
  on_alloc(0x1000, 64 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  reclassify(0x1000, true);
  EXPECT_EQ(live(0, Category::other), 0);
  EXPECT_EQ(live(0, Category::kv), mib(64));
  reclassify(0x1000, false);
  EXPECT_EQ(live(0, Category::other), mib(64));
  EXPECT_EQ(live(0, Category::kv), 0);
  reclassify(0x9000, true);  // not tracked: nothing moves
  EXPECT_EQ(live(0, Category::kv), 0);
  // The free takes the bytes out of the category the allocation is in now.
  reclassify(0x1000, true);
  EXPECT_TRUE(on_free(0x1000, AllocKind::kPlain, "cudaFree"));
  EXPECT_EQ(live(0, Category::kv), 0);
  EXPECT_EQ(live(0, Category::other), 0);
}

TEST_F(Tracker, AllocationsInsideAGlobalCaptureGoToTheGraphPool) {
  EXPECT_FALSE(capture_open());
  on_capture_begin(0x5000, 0);
  EXPECT_TRUE(capture_open());
  bool open_elsewhere = false;
  std::thread([&] { open_elsewhere = capture_open(); }).join();
  EXPECT_TRUE(open_elsewhere);
  on_alloc(0x1000, 32 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_alloc(0x2000, 8 * kMiB, AllocKind::kStreamOrdered, "cudaMallocAsync", nullptr, 0);
  on_capture_end(0x5000, true);
  EXPECT_FALSE(capture_open());
  on_alloc(0x3000, 1 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  EXPECT_EQ(live(0, Category::graph_pool), mib(40));
  EXPECT_EQ(live(0, Category::async_pool), 0);
  EXPECT_EQ(live(0, Category::other), mib(1));
  EXPECT_EQ(tracker_detail::S().capture_count.load(), 1u);
}

TEST_F(Tracker, AThreadLocalCaptureIsOpenOnlyForItsThread) {
  on_capture_begin(0x5000, 1);
  EXPECT_TRUE(capture_open());
  bool open_elsewhere = true;
  std::thread([&] {
    open_elsewhere = capture_open();
    on_alloc(0x2000, 2 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  }).join();
  EXPECT_FALSE(open_elsewhere);
  on_alloc(0x1000, 4 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 0);
  on_capture_end(0x5000, false);  // invalidated: the window closes all the same
  EXPECT_FALSE(capture_open());
  EXPECT_EQ(live(0, Category::graph_pool), mib(4));
  EXPECT_EQ(live(0, Category::other), mib(2));
}

TEST_F(Tracker, EndingAStreamThatNeverBeganChangesNothing) {
  on_capture_begin(0x5000, 0);
  on_capture_end(0x6000, true);
  EXPECT_TRUE(capture_open());
  on_capture_end(0x5000, true);
  EXPECT_FALSE(capture_open());
}

TEST_F(Tracker, TheSizingQueryIsTheLastOneBeforeTheKvBurst) {
  EXPECT_FALSE(sizing_query(kQueryDevice).has_value());
  UpcomingQuery upcoming = upcoming_memory_query(kQueryDevice);
  EXPECT_EQ(upcoming.index, 0u);
  EXPECT_EQ(upcoming.phase, "init");
  EXPECT_TRUE(upcoming.before_kv);

  on_memory_query("cudaMemGetInfo", 70 * kGiB, 80 * kGiB, 69 * kGiB, 80 * kGiB);
  std::optional<SizingQueryInfo> sizing = sizing_query(kQueryDevice);
  ASSERT_TRUE(sizing.has_value());
  EXPECT_EQ(sizing->index, 0u);
  EXPECT_EQ(sizing->phase, "init");
  EXPECT_EQ(sizing->driver_free, 70 * kGiB);
  EXPECT_EQ(sizing_free_bytes(kQueryDevice), 69 * kGiB);

  on_memory_query("cuMemGetInfo", 60 * kGiB, 80 * kGiB, 60 * kGiB, 80 * kGiB);
  sizing = sizing_query(kQueryDevice);
  ASSERT_TRUE(sizing.has_value());
  EXPECT_EQ(sizing->index, 1u);
  EXPECT_EQ(sizing->driver_free, 60 * kGiB);
  EXPECT_EQ(sizing_free_bytes(kQueryDevice), 60 * kGiB);
  EXPECT_EQ(upcoming_memory_query(kQueryDevice).index, 2u);
}

// An SGLang-like start-up fed through the tracker: weights between two queries, a query that
// sizes the KV pool, then a burst of same-sized tensors (the rules are policy::PhaseTracker's).
TEST_F(Tracker, ThePhaseFeedRecognisesAKvBurst) {
  constexpr std::uint64_t kTensor = 512 * kMiB;
  on_alloc(0x10000, 1 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, kQueryDevice);
  on_memory_query("cudaMemGetInfo", 79 * kGiB, 80 * kGiB, 79 * kGiB, 80 * kGiB);
  on_alloc(0x20000, 2 * kGiB, AllocKind::kPlain, "cudaMalloc", nullptr, kQueryDevice);
  on_copy_into_device(2 * kGiB);  // the weights, copied in from the checkpoint
  on_memory_query("cudaMemGetInfo", 77 * kGiB, 80 * kGiB, 77 * kGiB, 80 * kGiB);
  EXPECT_FALSE(kv_burst_recognised(kQueryDevice));
  on_memory_query("cudaMemGetInfo", 77 * kGiB, 80 * kGiB, 77 * kGiB, 80 * kGiB);
  EXPECT_TRUE(kv_window(kQueryDevice));
  for (std::uint64_t i = 0; i < 8; ++i)
    on_alloc(0x100000000 + i * kTensor, kTensor, AllocKind::kPlain, "cudaMalloc", nullptr, kQueryDevice);
  EXPECT_TRUE(kv_burst_recognised(kQueryDevice));
  EXPECT_EQ(kv_tensor_bytes(kQueryDevice), kTensor);
  EXPECT_FALSE(upcoming_memory_query(kQueryDevice).before_kv);
  const std::optional<SizingQueryInfo> sizing = sizing_query(kQueryDevice);
  ASSERT_TRUE(sizing.has_value());
  EXPECT_EQ(sizing->index, 2u);
  EXPECT_EQ(sizing->phase, "loading");
}

TEST_F(Tracker, PostKvWindowsMeasureFromTheEndOfTheBurst) {
  on_alloc(0x1000, 100 * kMiB, AllocKind::kKvArena, "cudaMalloc", nullptr, 3);
  on_alloc(0x2000, 10 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 3);
  start_post_kv_peaks(3, true);
  on_alloc(0x3000, 30 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 3);  // comes and goes
  on_free(0x3000, AllocKind::kPlain, "cudaFree");
  on_alloc(0x4000, 5 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 3);  // stays
  const auto other = post_kv_windows(3)[tracker_detail::index_of(Category::other)];
  EXPECT_EQ(other.at_start, mib(10));
  EXPECT_EQ(other.peak, mib(40));
  EXPECT_EQ(other.live, mib(15));
  const PostKvNeeds needs = post_kv_needs(3);
  EXPECT_EQ(needs.resident_growth, 5 * kMiB);
  EXPECT_EQ(needs.transient, 25 * kMiB);
  const auto kv = post_kv_windows(3)[tracker_detail::index_of(Category::kv)];
  EXPECT_EQ(kv.at_start, mib(100));
  EXPECT_EQ(kv.peak, mib(100));
  // Everything beside the KV cache at once: 10 MiB then, 40 MiB at the peak.
  EXPECT_EQ(post_kv_combined_rise(3), 30 * kMiB);
  // From the commit on (combined false) only the per-category peaks move.
  start_post_kv_peaks(3, false);
  on_alloc(0x5000, 50 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 3);
  EXPECT_EQ(post_kv_combined_rise(3), 0u);
  EXPECT_EQ(post_kv_windows(3)[tracker_detail::index_of(Category::other)].peak, mib(65));
}

// A sleep and wake: a VMM handle the wake created moves to KV, and the peaks start again from what is live,
// each category's level at the window's start kept (what came and went while the KV slept is gone from them).
TEST_F(Tracker, AWakesHandleIsKvAndThePeaksRestartFromWhatIsLive) {
  on_alloc(0x10, 64 * kMiB, AllocKind::kVmmHandle, "cuMemCreate", nullptr, 2);  // the weights
  start_post_kv_peaks(2, false);
  on_alloc(0x3000, 30 * kMiB, AllocKind::kPlain, "cudaMalloc", nullptr, 2);  // while asleep: a trainer's
  on_free(0x3000, AllocKind::kPlain, "cudaFree");
  on_alloc(0x20, 100 * kMiB, AllocKind::kVmmHandle, "cuMemCreate", nullptr, 2);  // the wake's KV tensor
  EXPECT_EQ(post_kv_windows(2)[tracker_detail::index_of(Category::vmm)].peak, mib(164));
  reclassify_handle(0x20, Category::kv);
  EXPECT_EQ(live(2, Category::vmm), mib(64));
  EXPECT_EQ(live(2, Category::kv), mib(100));
  restart_post_kv_peaks(2);
  const auto vmm = post_kv_windows(2)[tracker_detail::index_of(Category::vmm)];
  EXPECT_EQ(vmm.at_start, mib(64));
  EXPECT_EQ(vmm.peak, mib(64));
  EXPECT_EQ(post_kv_windows(2)[tracker_detail::index_of(Category::other)].peak, 0);
  // Released, the handle's bytes leave the category it is in now.
  tracked_free(0x20, Held::kVmmHandle, "cuMemRelease", 0, [] { return 0; });
  EXPECT_EQ(live(2, Category::kv), 0);
  EXPECT_EQ(live(2, Category::vmm), mib(64));
}

TEST_F(Tracker, NothingIsKnownOfADeviceNeverSeen) {
  EXPECT_FALSE(kv_window(7));
  EXPECT_FALSE(kv_burst_recognised(7));
  EXPECT_EQ(kv_tensor_bytes(7), 0u);
  EXPECT_EQ(profiling_peak_bytes(7), 0u);
  EXPECT_EQ(sizing_free_bytes(7), 0u);
  EXPECT_FALSE(sizing_query(7).has_value());
  for (const CategoryWindow& w : post_kv_windows(7)) EXPECT_EQ(w.live, 0);
}

}  // namespace
