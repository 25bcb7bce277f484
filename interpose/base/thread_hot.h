// The calling thread's allocation-path state, gathered in one thread-local object.
#pragma once

#include <atomic>
#include <cstdint>

namespace kvremap::interpose {

struct HotRecord;
namespace trace_detail {
struct HotRing;
}
namespace tracker_detail {
struct OwnCaptures;
}

// A hook reaches a thread-local through a GOT entry holding its offset, then its line in the
// thread's TLS block: spread over four thread-locals, this state would cost a cudaMalloc+cudaFree
// pair four GOT lines and two TLS lines, each a cache miss after the driver's system calls; one
// object costs one of each.
struct alignas(64) ThreadHot {
  // guard.h: above 0 while a hook runs on this thread. Written only by this thread (relaxed loads
  // and stores, plain moves); read by the exit drain on another (exit_handlers.cpp).
  std::atomic<int> hook_depth{0};
  int last_device = 0;  // tracker.cpp: the device of this thread's last tracked call
  tracker_detail::OwnCaptures* own_captures = nullptr;  // tracking_state.h
  // trace_writer.h: the thread's record ring as its only producer sees it. `ring_head` is the
  // ring's head; records may be added up to `ring_room_end` without reading the consumers' tail,
  // a line the background writer keeps writing.
  HotRecord* ring_slots = nullptr;
  std::uint64_t ring_head = 0;
  std::uint64_t ring_room_end = 0;
  trace_detail::HotRing* ring = nullptr;  // null until the thread's buffer exists
  bool hook_registered = false;           // guard.h: this thread's hook_depth is in the exit drain's list
  // stream_ages.h: the stream of this thread's last kernel launch in defer mode (none yet: no stream key).
  std::uint64_t last_launch_stream = ~std::uint64_t{0};
};
static_assert(sizeof(ThreadHot) == 64);

inline constinit thread_local ThreadHot t_hot;

}  // namespace kvremap::interpose
