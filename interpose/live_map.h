// The map of live tracked objects (allocations, VMM handles, graph execs, modules) shared by all hooks.
#pragma once

#include <tbb/spin_mutex.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policy/events.h"

namespace kvremap::interpose::tracker_detail {

struct Live {
  std::uint64_t bytes = 0;
  int device = 0;
  policy::Category category = policy::Category::other;
};

// A concurrent map made of shards, each a std::unordered_map behind a oneTBB spin lock. The hooks
// only ever insert a key, take it out again, or change one entry, each for a few instructions, so a
// short per-shard lock is all the concurrency they need. oneTBB's concurrent_hash_map, measured on
// the cudaMalloc+cudaFree path, cost about 600 instructions per pair (bucket and per-element
// reader-writer locks, accessor bookkeeping, a node allocation); this costs about a quarter of that. Threads allocating
// at once almost always hit different shards (keys are spread by a multiplicative hash).
class LiveMap {
 public:
  // Records key → value. If the key was still present (a free that was never seen), returns what it
  // held, which the caller must retire.
  std::optional<Live> put(std::uint64_t key, const Live& value) {
    Shard& s = shard(key);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    if (s.spare.empty()) {
      auto [it, inserted] = s.map.try_emplace(key, value);
      if (inserted) return std::nullopt;
      const Live previous = it->second;
      it->second = value;
      return previous;
    }
    Map::node_type node = std::move(s.spare.back());
    s.spare.pop_back();
    node.key() = key;
    node.mapped() = value;
    auto result = s.map.insert(std::move(node));
    if (result.inserted) return std::nullopt;
    s.spare.push_back(std::move(result.node));
    const Live previous = result.position->second;
    result.position->second = value;
    return previous;
  }

  // Removes the key; returns what it held, or nothing when it was not tracked.
  std::optional<Live> take(std::uint64_t key) {
    Shard& s = shard(key);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    const Live live = it->second;
    Map::node_type node = s.map.extract(it);
    if (s.spare.size() < kSpareNodes) s.spare.push_back(std::move(node));
    return live;
  }

  // Calls change(Live&) on the key's entry under its shard's lock; false when it is not tracked.
  template <typename Change>
  bool update(std::uint64_t key, Change&& change) {
    Shard& s = shard(key);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    auto it = s.map.find(key);
    if (it == s.map.end()) return false;
    change(it->second);
    return true;
  }

 private:
  static constexpr int kShardBits = 6;
  // Nodes of taken entries kept for the next insertion, so the allocate/free churn of a
  // steady-state engine does not cost a heap allocation and free per pair.
  static constexpr std::size_t kSpareNodes = 16;
  using Map = std::unordered_map<std::uint64_t, Live>;
  struct alignas(64) Shard {
    Shard() { spare.reserve(kSpareNodes); }  // keeping a node never allocates
    tbb::spin_mutex lock;
    Map map;
    std::vector<Map::node_type> spare;
  };
  Shard& shard(std::uint64_t key) {
    // Fibonacci hashing: device pointers share their low (alignment) bits, so the high bits of the
    // product pick the shard.
    return shards_[static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> (64 - kShardBits))];
  }
  std::array<Shard, std::size_t{1} << kShardBits> shards_;
};

}  // namespace kvremap::interpose::tracker_detail
