// The streamed per-process trace file: events buffered per thread, written as whole lines.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "interpose/base/hot_path.h"
#include "interpose/base/thread_hot.h"
#include "interpose/base/tick_clock.h"

namespace kvremap::interpose {

enum HotRecordKind : std::uint8_t { kHotAlloc = 0, kHotFree = 1, kHotCounter = 2 };

// A hot event (an allocation, a free, a counter sample) as the hook leaves it: a 32-byte record
// appended to the thread's ring, formatted to its JSON line only when the buffer is written out —
// normally by the background writer thread, so the hook pays for neither formatting nor the write.
// Two records share a cache line: the writer reads each line the hook wrote from the other core, so
// every byte of a record is traffic between the two.
struct HotRecord {
  std::uint64_t ticks = 0;  // when, in tick_clock.h ticks
  std::uint64_t ptr = 0;
  const char* api = "";      // the hook's name literal (static storage)
  std::uint64_t packed = 0;  // the fields below, see pack()

  static constexpr unsigned kBytesBits = 48;  // sizes up to 256 TiB; a larger one goes the cold way
  static constexpr std::uint64_t kMaxBytes = (std::uint64_t{1} << kBytesBits) - 1;
  // device < 64, category < 8, phase < 16, kind < 4.
  static constexpr std::uint64_t pack(std::uint64_t bytes, int device, HotRecordKind kind, std::uint8_t category,
                                      std::uint8_t phase) {
    return bytes | static_cast<std::uint64_t>(device & 63) << 48 | static_cast<std::uint64_t>(category & 7) << 54 |
           static_cast<std::uint64_t>(phase & 15) << 57 | static_cast<std::uint64_t>(kind & 3) << 61;
  }
  // The bits that describe the object (bytes, device, category), the same in its alloc and its free.
  static constexpr std::uint64_t kObjectBits = (std::uint64_t{1} << 57) - 1;
  std::uint64_t bytes() const { return packed & kMaxBytes; }
  int device() const { return static_cast<int>(packed >> 48 & 63); }
  std::uint8_t category() const { return static_cast<std::uint8_t>(packed >> 54 & 7); }
  std::uint8_t phase() const { return static_cast<std::uint8_t>(packed >> 57 & 15); }
  HotRecordKind kind() const { return static_cast<HotRecordKind>(packed >> 61 & 3); }
};
static_assert(sizeof(HotRecord) == 32);
// A counter sample is a kHotCounter record followed by three slots of words, stored as the slots' bytes: live
// bytes per category (in policy::Category order; the KV category as the device holds it), then, where kvremap
// placed the KV cache (kCounterKvPlaced is 1), where that cache lies.
constexpr std::size_t kCounterWords = 12;
constexpr std::size_t kCounterSlots = 4;
constexpr std::size_t kCounterKvReserved = 7;  // the KV cache's size as the engine sees it
constexpr std::size_t kCounterKvDevice = 8;    // its bytes backed by device memory
constexpr std::size_t kCounterKvScratch = 9;   // its bytes deferred onto the scratch
constexpr std::size_t kCounterKvHost = 10;     // its bytes on host memory
constexpr std::size_t kCounterKvPlaced = 11;

namespace trace_detail {
// A thread's pending hot records: a single-producer ring. Only the owner thread advances `head`;
// consumers (holding the owner's buffer lock) advance `tail`. 64 KiB: more than a background writer
// period's worth of records at a few hundred thousand allocations per second. The owner adds
// records through its cursor in t_hot (thread_hot.h) and only stores `head` here.
constexpr std::size_t kRingRecords = 2048;
struct HotRing {
  HotRecord* slots = nullptr;
  std::atomic<std::uint64_t> head{0};
  std::atomic<std::uint64_t> tail{0};
};
// Out of line: creates the calling thread's buffer, or re-reads the consumers' tail and, when the
// ring is still full, writes it out; on return the cursor in t_hot has room for `slots` records.
void ring_with_room(std::size_t slots);
}  // namespace trace_detail

// A hot record as the writer hands it to be formatted, its times already on the trace's time base.
struct HotLine {
  const HotRecord* record = nullptr;
  // A counter sample's kCounterWords words; for an allocation or a free, null or its size when
  // above kMaxBytes (such records are formatted at once, never queued).
  const std::uint64_t* extra = nullptr;
  // The free that ended this allocation, when the thread recorded nothing in between (is_lifetime):
  // the two become one complete event from ts_ns to end_ns.
  const HotRecord* freed = nullptr;
  std::uint64_t ts_ns = 0;
  std::uint64_t end_ns = 0;
  int tid = 0;  // the thread that made the record
};
// Writes the JSON object of `line` into out[0, capacity); returns its length, or 0 when it does not
// fit (the record is then dropped). Must not allocate.
using HotFormatter = std::size_t (*)(const HotLine& line, char* out, std::size_t capacity);

// Whether `free` is the release of allocation `alloc` (the same object: address, size, device and
// category), so that the pair can be written as one complete event spanning the object's lifetime.
// The writer only pairs records that are adjacent in one thread's ring: nothing else the thread
// recorded lies inside the span, so lifetimes on a thread's track always nest (viewers require it).
inline bool is_lifetime(const HotRecord& alloc, const HotRecord& free) {
  return alloc.kind() == kHotAlloc && free.kind() == kHotFree && alloc.ptr == free.ptr &&
         ((alloc.packed ^ free.packed) & HotRecord::kObjectBits) == 0;
}

// The file is a Chrome trace-event JSON array: "[" then one event per line, every line after the
// first starting with ",", and "]" at a clean close. Buffers only ever hold whole lines and are
// written with one write() each, so a process killed at any point leaves a loadable prefix.
class TraceWriter {
 public:
  // Creates `path`, which must not exist yet, and writes the opening bracket, the first event and the
  // header event in one write, then the events kept before the file opened (see event()). False, with
  // errno, if the file cannot be created (EEXIST: it exists; the caller tries another name, or logs it
  // and turns tracing off) or cannot take its header whole (then no file is left).
  bool open(const std::string& path, std::string_view first_event, std::string_view header_event);
  // The process gives its trace up before opening one (tracing off, no file could be created): the
  // events kept for it are dropped, and no more are kept.
  void forget_early_events();
  bool is_open() const { return fd_ >= 0; }

  // Appends one event (a JSON object without separators) to the calling thread's buffer; writes
  // the buffer out when it is large, or at once when `flush_now`. Before the file opens (a process
  // that has made no tracked CUDA call yet) the event is kept, and open() writes it after the header.
  void event(std::string_view json_object, bool flush_now = false);
  // Appends a hot record to the calling thread's buffer, after its earlier events. No lock, and
  // no load from the ring: the cursor in t_hot says where the record goes and whether it fits.
  [[gnu::always_inline]] void hot(std::uint64_t ticks, std::uint64_t ptr, const char* api, std::uint64_t packed) {
    if (fd_ < 0) return;
    ThreadHot& t = t_hot;
    if (KVREMAP_UNLIKELY(t.ring_head == t.ring_room_end)) trace_detail::ring_with_room(1);
    HotRecord& slot = t.ring_slots[t.ring_head % trace_detail::kRingRecords];
    slot.ticks = ticks;
    slot.ptr = ptr;
    slot.api = api;
    slot.packed = packed;
    t.ring->head.store(++t.ring_head, std::memory_order_release);
  }
  // A boundary of a slice on the calling thread's track (a capture window's begin or end) at trace
  // time `ns`: formats the thread's pending hot records first, so no allocation lifetime straddles
  // it, and returns the time to stamp it with — `ns`, or the end of the last lifetime written for
  // the thread if that is later (the two clocks' readings may disagree by the tick conversion's
  // error); later lifetimes on the track start no earlier. Slices on a track must nest.
  std::uint64_t fence_thread(std::uint64_t ns);
  // The same on the track of thread `tid` (a capture ended by another thread than the one that
  // began it, where CUDA allows that); `ns` when that thread has no buffer.
  std::uint64_t fence_thread(std::uint64_t ns, int tid);
  // Appends a counter sample: live bytes per category (kCounterWords, the unused ones zero).
  void hot_counter(std::uint64_t ticks, int device, const std::uint64_t (&live)[kCounterWords]);
  // How hot records become lines; set before the first hot().
  void set_hot_formatter(HotFormatter formatter);

  // Writes out every thread's buffer. Called at phase changes, before fork, at exit, and every
  // few milliseconds by the background writer (started by open(), one per process).
  void flush_all();

  // Writes the final event and the closing bracket, then closes the file.
  void close(std::string_view last_event);
  // Async-signal-safe: runs `task` on the background writer thread (which blocks every signal, so
  // it may allocate and take locks) and waits for it at most `timeout_ms`. False when this process
  // has no writer or the task did not finish in time.
  bool run_on_writer(void (*task)(), int timeout_ms);

  // pthread_atfork handlers: before fork everything is written and the writer's locks are held, so
  // the child inherits them in a known state; the child then forgets the parent's file and the
  // other threads' buffers (those threads do not exist there) and starts without a file.
  void prepare_fork();
  void parent_after_fork();
  // The first step before a fork and the last after it in the parent: the background writer waits
  // between two flushes, so no thread but the forking one is inside the memory allocator when the
  // address space is copied. Allocators without fork handlers (GCC 12's AddressSanitizer runtime, whose
  // leak check at the child's exit takes every allocator lock) would otherwise leave a lock the writer
  // held locked for ever in the child. Waits at most half a second.
  void park_writer();
  void unpark_writer();
  void child_after_fork();

 private:
  int fd_ = -1;
};

// Constant-initialised (usable before any constructor runs) and never destroyed in effect.
extern TraceWriter g_trace_writer;
inline TraceWriter& trace() { return g_trace_writer; }

// Microseconds since the library was loaded, the trace's time base.
double trace_now_us();
namespace trace_detail {
extern std::atomic<std::uint64_t> g_start_ns;  // set at load, or by the first hook
std::uint64_t first_start_ns();
}  // namespace trace_detail
inline std::uint64_t trace_start_ns() {
  const std::uint64_t start = trace_detail::g_start_ns.load(std::memory_order_relaxed);
  return start != 0 ? start : trace_detail::first_start_ns();
}
inline std::uint64_t trace_now_ns() { return monotonic_now_ns() - trace_start_ns(); }
// The trace time of a hot-path timestamp (tick_clock.h).
inline std::uint64_t trace_ns_of_ticks(std::uint64_t t) {
  const std::uint64_t ns = monotonic_ns_of(t);
  const std::uint64_t start = trace_start_ns();
  return ns > start ? ns - start : 0;
}
int current_tid();

}  // namespace kvremap::interpose
