// The live-object map behind every allocation hook: exact put/take/update semantics, under churn and threads.
#include "interpose/track/live_map.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using kvremap::interpose::tracker_detail::Live;
using kvremap::interpose::tracker_detail::LiveMap;
using kvremap::policy::Category;

TEST(LiveMap, PutTakeAndUpdateOneKey) {
  LiveMap map;
  EXPECT_FALSE(map.take(0x7f0000200000).has_value());
  EXPECT_FALSE(map.put(0x7f0000200000, Live{4096, 1, Category::other}).has_value());
  EXPECT_TRUE(map.update(0x7f0000200000, [](Live& l) { l.category = Category::kv; }));
  const auto taken = map.take(0x7f0000200000);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->bytes, 4096u);
  EXPECT_EQ(taken->device, 1);
  EXPECT_EQ(taken->category, Category::kv);
  EXPECT_FALSE(map.take(0x7f0000200000).has_value());
  EXPECT_FALSE(map.update(0x7f0000200000, [](Live&) {}));
}

TEST(LiveMap, ReusedKeyReturnsTheEntryItReplaces) {
  LiveMap map;
  map.put(0x1000, Live{10, 0, Category::other});
  const auto previous = map.put(0x1000, Live{20, 0, Category::graph_pool});
  ASSERT_TRUE(previous.has_value());
  EXPECT_EQ(previous->bytes, 10u);
  EXPECT_EQ(map.take(0x1000)->bytes, 20u);
}

TEST(LiveMap, KeyZeroIsAnOrdinaryKey) {
  LiveMap map;
  EXPECT_FALSE(map.put(0, Live{7, 0, Category::module}).has_value());
  EXPECT_EQ(map.put(0, Live{8, 0, Category::module})->bytes, 7u);
  EXPECT_TRUE(map.update(0, [](Live& l) { l.bytes = 9; }));
  EXPECT_EQ(map.take(0)->bytes, 9u);
  EXPECT_FALSE(map.take(0).has_value());
}

// Random puts, takes and updates, checked step by step against std::unordered_map; keys are
// granule-aligned device-like addresses drawn from a small range, so probe runs collide, wrap and
// are shifted back by deletions all the time, and tables grow several times.
TEST(LiveMap, MatchesAReferenceMapUnderRandomChurn) {
  LiveMap map;
  std::unordered_map<std::uint64_t, std::uint64_t> reference;
  std::mt19937_64 rng(42);
  for (int step = 0; step < 400000; ++step) {
    const std::uint64_t key = 0x7f0000000000ULL + (rng() % 20000) * 0x200000ULL;
    const std::uint64_t bytes = rng() % 1000000 + 1;
    switch (rng() % 3) {
      case 0: {
        const auto previous = map.put(key, Live{bytes, 0, Category::other});
        const auto it = reference.find(key);
        ASSERT_EQ(previous.has_value(), it != reference.end()) << "step " << step;
        if (previous) {
          ASSERT_EQ(previous->bytes, it->second);
        }
        reference[key] = bytes;
        break;
      }
      case 1: {
        const auto taken = map.take(key);
        const auto it = reference.find(key);
        ASSERT_EQ(taken.has_value(), it != reference.end()) << "step " << step;
        if (taken) {
          ASSERT_EQ(taken->bytes, it->second);
          reference.erase(it);
        }
        break;
      }
      default: {
        const bool found = map.update(key, [&](Live& l) { l.bytes = bytes; });
        const auto it = reference.find(key);
        ASSERT_EQ(found, it != reference.end()) << "step " << step;
        if (found) it->second = bytes;
      }
    }
  }
  for (const auto& [key, bytes] : reference) {
    const auto taken = map.take(key);
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(taken->bytes, bytes);
  }
}

TEST(LiveMap, ThreadsInsertingAndTakingAtOnceLoseNothing) {
  LiveMap map;
  constexpr int kThreads = 8;
  constexpr std::uint64_t kKeys = 20000;
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> taken_bytes(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::uint64_t base = 0x7f0000000000ULL + static_cast<std::uint64_t>(t) * kKeys * 0x1000ULL;
      for (int round = 0; round < 3; ++round) {
        for (std::uint64_t i = 0; i < kKeys; ++i) map.put(base + i * 0x1000, Live{i + 1, t, Category::other});
        for (std::uint64_t i = 0; i < kKeys; ++i) {
          const auto live = map.take(base + i * 0x1000);
          if (live && live->device == t) taken_bytes[static_cast<std::size_t>(t)] += live->bytes;
        }
      }
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(taken_bytes[static_cast<std::size_t>(t)], 3 * kKeys * (kKeys + 1) / 2);
}

}  // namespace
