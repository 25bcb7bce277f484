// The map of live tracked objects (allocations, VMM handles, graph execs, modules) shared by all hooks.
#pragma once

#include <tbb/spin_mutex.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>

#include "interpose/base/hot_path.h"
#include "policy/events.h"

namespace kvremap::interpose::tracker_detail {

struct Live {
  std::uint64_t bytes = 0;
  int device = 0;
  policy::Category category = policy::Category::other;
};

// A concurrent map made of shards, each an open-addressing table (linear probing, backward-shift
// deletion, so no tombstones) behind a oneTBB spin lock. The hooks only ever insert a key, take it
// out again, or change one entry, each for a few instructions, so a short per-shard lock is all the
// concurrency they need; an insert or a take touches one or two cache lines, with no node allocation
// and no division (docs/benchmarks.md has the per-pair instruction counts). Threads allocating at
// once almost always hit different shards: keys are spread by a multiplicative hash.
class LiveMap {
 public:
  LiveMap() = default;
  LiveMap(const LiveMap&) = delete;
  LiveMap& operator=(const LiveMap&) = delete;
  ~LiveMap() {
    for (Shard& s : shards_) std::free(s.slots);
  }

  // Records key → value. If the key was still present (a free that was never seen), returns what it
  // held, which the caller must retire. Throws std::bad_alloc when the table cannot grow.
  [[gnu::always_inline]] std::optional<Live> put(std::uint64_t key, const Live& value) {
    const std::uint64_t h = hash(key);
    Shard& s = shard(h);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    if (KVREMAP_UNLIKELY(key == 0)) return s.put_zero(value);
    if (KVREMAP_UNLIKELY((s.used + 1) * 2 > s.mask + 1)) s.grow();
    for (std::uint64_t i = home(h, s.mask);; i = (i + 1) & s.mask) {
      Slot& slot = s.slots[i];
      if (slot.key == key) {
        const Live previous = slot.value;
        slot.value = value;
        return previous;
      }
      if (slot.key == 0) {
        slot.key = key;
        slot.value = value;
        ++s.used;
        return std::nullopt;
      }
    }
  }

  // Removes the key; returns what it held, or nothing when it was not tracked.
  [[gnu::always_inline]] std::optional<Live> take(std::uint64_t key) {
    const std::uint64_t h = hash(key);
    Shard& s = shard(h);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    if (KVREMAP_UNLIKELY(key == 0)) return s.take_zero();
    Slot* slot = s.find(key, h);
    if (!slot) return std::nullopt;
    const Live live = slot->value;
    s.erase(static_cast<std::uint64_t>(slot - s.slots));
    return live;
  }

  // Calls change(Live&) on the key's entry under its shard's lock; false when it is not tracked.
  template <typename Change>
  bool update(std::uint64_t key, Change&& change) {
    const std::uint64_t h = hash(key);
    Shard& s = shard(h);
    std::lock_guard<tbb::spin_mutex> g(s.lock);
    Live* live = s.value_of(key, h);
    if (!live) return false;
    change(*live);
    return true;
  }

 private:
  static constexpr int kShardBits = 6;
  static constexpr std::uint64_t kInitialSlots = 64;  // per shard, allocated at its first insertion

  struct Slot {
    std::uint64_t key = 0;  // 0: empty (the key 0 itself is kept beside the table)
    Live value;
  };

  struct alignas(64) Shard {
    tbb::spin_mutex lock;
    Slot* slots = nullptr;
    std::uint64_t mask = 0;  // slot count - 1 once allocated
    std::uint64_t used = 0;
    bool zero_present = false;
    Live zero_value;

    Slot* find(std::uint64_t key, std::uint64_t h) {
      if (!slots) return nullptr;
      for (std::uint64_t i = home(h, mask);; i = (i + 1) & mask) {
        if (slots[i].key == key) return &slots[i];
        if (slots[i].key == 0) return nullptr;
      }
    }
    Live* value_of(std::uint64_t key, std::uint64_t h) {
      if (key == 0) return zero_present ? &zero_value : nullptr;
      Slot* slot = find(key, h);
      return slot ? &slot->value : nullptr;
    }
    // Empties slot i and moves later entries of its probe run back, so every entry stays
    // reachable from its home slot without tombstones.
    void erase(std::uint64_t i) {
      for (std::uint64_t j = (i + 1) & mask; slots[j].key != 0; j = (j + 1) & mask) {
        const std::uint64_t want = home(hash(slots[j].key), mask);
        // slots[j] may move to i only if its home is not cyclically within (i, j].
        if (((j - want) & mask) >= ((j - i) & mask)) {
          slots[i] = slots[j];
          i = j;
        }
      }
      slots[i].key = 0;
      --used;
    }
    void grow() {
      const std::uint64_t count = slots ? (mask + 1) * 2 : kInitialSlots;
      auto* fresh = static_cast<Slot*>(std::calloc(count, sizeof(Slot)));
      if (!fresh) throw std::bad_alloc();
      Slot* old = slots;
      const std::uint64_t old_count = slots ? mask + 1 : 0;
      slots = fresh;
      mask = count - 1;
      for (std::uint64_t k = 0; k < old_count; ++k) {
        if (old[k].key == 0) continue;
        std::uint64_t i = home(hash(old[k].key), mask);
        while (slots[i].key != 0) i = (i + 1) & mask;
        slots[i] = old[k];
      }
      std::free(old);
    }
    std::optional<Live> put_zero(const Live& value) {
      std::optional<Live> previous;
      if (zero_present) previous = zero_value;
      zero_present = true;
      zero_value = value;
      return previous;
    }
    std::optional<Live> take_zero() {
      if (!zero_present) return std::nullopt;
      zero_present = false;
      return zero_value;
    }
  };

  // Fibonacci hashing: device pointers share their low (alignment) bits, so the product's high bits
  // pick the shard and the bits below them the home slot.
  static std::uint64_t hash(std::uint64_t key) { return key * 0x9E3779B97F4A7C15ULL; }
  static std::uint64_t home(std::uint64_t h, std::uint64_t mask) { return (h >> (32 - kShardBits)) & mask; }
  Shard& shard(std::uint64_t h) { return shards_[static_cast<std::size_t>(h >> (64 - kShardBits))]; }

  std::array<Shard, std::size_t{1} << kShardBits> shards_;
};

}  // namespace kvremap::interpose::tracker_detail
