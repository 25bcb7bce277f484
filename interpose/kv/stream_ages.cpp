// The table of streams and the epoch of their first kernel (stream_ages.h).
#include "interpose/kv/stream_ages.h"

#include <array>
#include <atomic>
#include <mutex>

namespace kvremap::interpose {

namespace {

// Epoch 0 marks a destroyed stream's handle: in use before every deferral.
constexpr std::uint64_t kRetired = 0;

struct StreamEntry {
  std::atomic<std::uint64_t> stream{0};
  std::atomic<std::uint64_t> epoch{kRetired};
};

// PyTorch creates 32 pool streams per priority and device on first use; engines add a few of their own.
constexpr std::size_t kMaxStreams = 1024;
constinit std::array<StreamEntry, kMaxStreams> g_entries{};
constinit std::atomic<std::size_t> g_count{0};
constinit std::atomic<std::uint64_t> g_epoch{1};
constinit std::mutex g_insert;

// Entries are appended, never moved: a reader sees every entry below the count it loaded.
StreamEntry* find(std::uint64_t stream) {
  const std::size_t n = g_count.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i)
    if (g_entries[i].stream.load(std::memory_order_relaxed) == stream) return &g_entries[i];
  return nullptr;
}

// Under g_insert: a new entry, published by the count; a full table keeps none (the stream is then in use before).
void append_locked(std::uint64_t stream, std::uint64_t epoch) {
  const std::size_t n = g_count.load(std::memory_order_relaxed);
  if (n == kMaxStreams) return;
  g_entries[n].stream.store(stream, std::memory_order_relaxed);
  g_entries[n].epoch.store(epoch, std::memory_order_relaxed);
  g_count.store(n + 1, std::memory_order_release);
}

}  // namespace

namespace stream_ages_detail {

void note_first_launch(std::uint64_t stream) {
  if (find(stream) != nullptr) return;
  std::lock_guard<std::mutex> g(g_insert);
  if (find(stream) == nullptr) append_locked(stream, g_epoch.load(std::memory_order_relaxed));
}

}  // namespace stream_ages_detail

std::uint64_t begin_stream_epoch() {
  std::lock_guard<std::mutex> g(g_insert);
  return g_epoch.fetch_add(1, std::memory_order_relaxed) + 1;
}

policy::StreamAge stream_age(std::uint64_t stream, std::uint64_t epoch) {
  const StreamEntry* e = find(stream);
  if (e == nullptr) return policy::StreamAge::in_use_before;
  const std::uint64_t first = e->epoch.load(std::memory_order_relaxed);
  return first != kRetired && first >= epoch ? policy::StreamAge::new_since : policy::StreamAge::in_use_before;
}

void note_stream_destroyed(std::uint64_t stream) {
  std::lock_guard<std::mutex> g(g_insert);
  if (StreamEntry* e = find(stream)) {
    e->epoch.store(kRetired, std::memory_order_relaxed);
    return;
  }
  // Destroyed before it ran a kernel: its handle, reused, must not look new either.
  append_locked(stream, kRetired);
}

void stream_ages_prepare_fork() { g_insert.lock(); }

void stream_ages_after_fork() { g_insert.unlock(); }

}  // namespace kvremap::interpose
