// Per-thread trace buffers and their ordered, whole-line writes to the trace file.
// Over 400 lines on purpose: the producer rings, the writer thread that drains them in order and the
// file's fault handling (disk full, signals, exec, fork) share one lock-free protocol, kept in one file
// so its invariants can be read and checked together.
#include "interpose/trace/trace_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <time.h>
#include <type_traits>
#include <vector>

#include "interpose/base/library.h"
#include "interpose/base/no_file_size_signal.h"
#include "interpose/base/process_object.h"

namespace kvremap::interpose {
namespace {

constexpr std::size_t kFlushBytes = 64 * 1024;
// Hot records a thread may have pending: trace_detail::kRingRecords (32 bytes each); a thread that
// outruns the background writer formats and writes its own records when its ring is full.
using trace_detail::kRingRecords;
// A counter sample's payload slots hold its words as the bytes of a record.
constexpr std::size_t kWordsPerSlot = sizeof(HotRecord) / sizeof(std::uint64_t);
static_assert(kWordsPerSlot * (kCounterSlots - 1) == kCounterWords && std::is_trivially_copyable_v<HotRecord>);
// The longest hot line (the formatter drops a record that does not fit).
constexpr std::size_t kMaxLine = 766;
// The background writer's period: how long a hot event may wait in memory before it is in the file.
constexpr long kWriterPeriodNs = 2'000'000;
std::atomic<HotFormatter> g_formatter{nullptr};

struct ThreadBuffer;

// Process objects (base/process_object.h): thread buffers may flush during exit, after static
// destructors, and a hook may fire before this library's dynamic initialisers have run.
constinit ProcessObject<std::mutex> g_registry_lock;
std::mutex& registry_lock() { return g_registry_lock.get(); }
constinit ProcessObject<std::vector<ThreadBuffer*>> g_registry;
std::vector<ThreadBuffer*>& registry() { return g_registry.get(); }
// Requires registry_lock. Buffers of exited threads, still registered (and empty), handed to the
// next new thread: engines start and end threads (and a benchmark does, many times), and a fresh
// buffer costs an allocation and page faults on its first records, which contend with the
// program's own mmap/munmap for the address-space lock.
constinit ProcessObject<std::vector<ThreadBuffer*>> g_idle_buffers;
std::vector<ThreadBuffer*>& idle_buffers() { return g_idle_buffers.get(); }
// Formatting buffers. Records are formatted into fixed buffers and written from there, never
// collected in a growing string: growth means fresh pages, and page faults contend with the
// program's own mmap/munmap for the address-space lock. flush_all (the background writer) reuses
// one large buffer, guarded by registry_lock; other paths (a thread whose ring is full, a thread's
// exit) use a 4 KiB chunk on their stack.
constexpr std::size_t kChunkBytes = 4 * 1024;
constexpr std::size_t kFlushAllBytes = 256 * 1024;
static_assert(kChunkBytes >= kMaxLine + 2, "a formatting buffer holds at least one line");
struct FlushAllBuffer {
  char bytes[kFlushAllBytes];
};
constinit ProcessObject<FlushAllBuffer> g_flush_all_buffer;
char* flush_all_buffer() { return g_flush_all_buffer.get().bytes; }
constinit ProcessObject<std::mutex> g_write_lock;
std::mutex& write_lock() { return g_write_lock.get(); }
std::atomic<int> g_fd{-1};

// Set at the first write the file refuses (disk full, file size limit, I/O error): from then on
// nothing more is written, so space freed later cannot append a torn line after a gap.
std::atomic<bool> g_write_failed{false};
// Bytes of whole lines in the trace file; every write_all call writes whole lines.
std::atomic<std::uint64_t> g_file_bytes{0};
// Bytes of the opening bracket and the two header lines: never cut.
std::atomic<std::uint64_t> g_head_bytes{0};

// Events made before the file opens (at the process's first tracked CUDA call, tracker.h): a process
// that has not used CUDA yet may already see something a later trace must hold (its server listening
// on the serving port), and one that never uses CUDA writes no file. Kept until open() writes them after
// the header, or until the process gives its trace up (forget_early_events); at most kEarlyBytes (a few
// events are expected; any beyond it are dropped).
constexpr std::size_t kEarlyBytes = 64 * 1024;
constinit ProcessObject<std::mutex> g_early_lock;
std::mutex& early_lock() { return g_early_lock.get(); }
constinit ProcessObject<std::string> g_early_events;
std::string& early_events() { return g_early_events.get(); }
std::atomic<bool> g_keep_early{true};

void keep_early(std::string_view json_object) {
  if (!g_keep_early.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> e(early_lock());
  std::string& early = early_events();
  if (!g_keep_early.load(std::memory_order_relaxed) || early.size() + json_object.size() + 2 > kEarlyBytes) return;
  early += ',';
  early.append(json_object);
  early += '\n';
}

// Async-signal-safe: one line, no allocation.
void report_write_failure(int error) {
  char line[256];
  const int n = std::snprintf(line, sizeof line,
                              "kvremap: [pid %d] trace file: %s; tracing stops here (the file keeps every event up "
                              "to this point), the program goes on\n",
                              static_cast<int>(getpid()), strerrordesc_np(error));
  if (n > 0) (void)!::write(2, line, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1));
}

// The end of the last whole line that ends at or before `limit`, or 0 when there is none in the 4 KiB
// before it.
off_t line_end_before(int fd, off_t limit) {
  if (limit <= 0) return 0;
  char tail[4096];
  const off_t from = std::max<off_t>(limit - static_cast<off_t>(sizeof tail), 0);
  const ssize_t n = ::pread(fd, tail, static_cast<std::size_t>(limit - from), from);
  for (ssize_t i = n - 1; i >= 0; --i)
    if (tail[i] == '\n') return from + i + 1;
  return 0;
}

// Ends the file with `line` (the "trace stopped" event) after its whole lines. `reached`: the end the
// file got to before it refused more, the room it had as far as anything shows. The room may end inside a
// line or on a line boundary and leave too little for the stop line: whole lines are then cut off the
// end, the fewest that make room for it, so that a reader always learns why the trace ends. The head
// stays. Updates g_file_bytes to the file's end.
void write_stop_line(int fd, const char* line, std::size_t size, off_t reached) {
  const auto head = static_cast<off_t>(g_head_bytes.load());
  const auto stop = static_cast<off_t>(size);
  off_t end = static_cast<off_t>(g_file_bytes.load());  // whole lines up to here
  off_t cut = end;  // where the file was last cut: whole lines up to there
  if (end + stop > reached) end = reached - stop >= head ? line_end_before(fd, reached - stop) : -1;
  while (end >= head) {
    if (::ftruncate(fd, end) != 0) break;
    cut = end;
    const ssize_t n = ::write(fd, line, size);  // O_APPEND: at the new end
    if (n == static_cast<ssize_t>(size)) {
      g_file_bytes = static_cast<std::uint64_t>(end + stop);
      return;
    }
    end = line_end_before(fd, end - stop);  // less room than that: one more line off
  }
  (void)!::ftruncate(fd, cut);  // no room even then: whole lines only
  g_file_bytes = static_cast<std::uint64_t>(cut);
}

// Writes p[0, size) at the file's end; returns how many bytes the file took (all of them, or as many
// as it took before it refused more), with errno set to the refusal's error when fewer. A file size
// limit refuses the write (EFBIG) without raising SIGXFSZ at the program.
std::size_t write_fully(int fd, const char* p, std::size_t size) {
  std::size_t done = 0;
  int error = 0;
  {
    const NoFileSizeSignal no_signal;  // its end may set errno: the write's error is kept apart
    while (done < size) {
      const ssize_t n = ::write(fd, p + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n == 0 ? ENOSPC : errno;
        break;
      }
      done += static_cast<std::size_t>(n);
    }
  }
  if (error != 0) errno = error;
  return done;
}

// Writes whole lines p[0, size) after the file's whole lines. At the first write the file refuses,
// tracing stops: the lines of this batch that reached the file whole stay (the refusal may come after a
// short write, in the middle of a line: only what follows the batch's last whole line is cut), and the
// "trace stopped" event ends the file.
void write_all(int fd, const char* p, std::size_t size) {
  if (fd < 0 || size == 0 || g_write_failed.load(std::memory_order_relaxed)) return;
  const std::size_t done = write_fully(fd, p, size);
  if (done == size) {
    g_file_bytes.fetch_add(size, std::memory_order_relaxed);
    return;
  }
  const int error = errno;
  if (g_write_failed.exchange(true)) return;
  report_write_failure(error);
  const NoFileSizeSignal no_signal;  // the cuts and the stop line below write too
  const std::uint64_t start = g_file_bytes.load();
  const auto reached = static_cast<off_t>(start + done);
  const void* last_newline = done > 0 ? ::memrchr(p, '\n', done) : nullptr;
  if (last_newline)
    g_file_bytes = start + static_cast<std::uint64_t>(static_cast<const char*>(last_newline) - p) + 1;
  char line[160];
  const int m = std::snprintf(line, sizeof line,
                              ",{\"ph\":\"i\",\"cat\":\"kvremap\",\"name\":\"trace stopped\",\"pid\":%d,"
                              "\"tid\":0,\"ts\":%.3f,\"s\":\"p\",\"args\":{\"error\":\"%s\"}}\n",
                              static_cast<int>(getpid()), trace_now_us(), strerrordesc_np(error));
  if (m > 0 && m < static_cast<int>(sizeof line)) {
    write_stop_line(fd, line, static_cast<std::size_t>(m), reached);
  } else {
    (void)!::ftruncate(fd, static_cast<off_t>(g_file_bytes.load()));
  }
}
void write_all(int fd, const std::string& data) { write_all(fd, data.data(), data.size()); }

int current_tid_uncached();

// The calling thread's trace buffer. Cold events are appended to `data` under `lock`; hot records go
// into a single-producer ring without any lock: only the owner thread writes `head`, and consumers
// (the owner's own cold events, the background writer, exit) read records from `tail` to `head`
// while holding `lock`, so they act as one consumer. Every cold event drains the ring first, so the
// ring only ever holds events later than everything in `data`.
struct ThreadBuffer {
  std::string data;
  // Cache-line aligned, so that each line holds two whole records.
  struct alignas(64) Slots {
    HotRecord record[kRingRecords];
  };
  std::unique_ptr<Slots> slots{new Slots};
  trace_detail::HotRing ring;
  int tid = 0;  // the owner's, for formatting its records on another thread
  std::mutex lock;
  // Requires `lock`. The end of the last allocation lifetime or capture boundary on this thread's
  // track (trace ns): the next slice starts no earlier.
  std::uint64_t slice_floor_ns = 0;

  ThreadBuffer() : tid(current_tid_uncached()) {
    ring.slots = slots->record;
    std::lock_guard<std::mutex> g(registry_lock());
    registry().push_back(this);
  }
  // Requires `lock`. Hands every pending record, oldest first, to sink(HotLine), then frees their
  // slots. An allocation directly followed by its own free goes as one lifetime (is_lifetime()),
  // placed on the thread's track after everything written there before.
  template <typename Sink>
  void drain_locked(Sink&& sink) {
    const std::uint64_t h = ring.head.load(std::memory_order_acquire);
    std::uint64_t t = ring.tail.load(std::memory_order_relaxed);
    HotLine line;
    line.tid = tid;
    while (t != h) {
      const HotRecord& r = ring.slots[t % kRingRecords];
      line.record = &r;
      line.ts_ns = trace_ns_of_ticks(r.ticks);
      line.extra = nullptr;
      line.freed = nullptr;
      if (r.kind() != kHotCounter) {
        const HotRecord* next = t + 1 != h ? &ring.slots[(t + 1) % kRingRecords] : nullptr;
        if (next && is_lifetime(r, *next)) {
          // Clamped to the track: the ticks of two records may be converted from different anchors.
          line.freed = next;
          line.ts_ns = std::max(line.ts_ns, slice_floor_ns);
          line.end_ns = std::max(trace_ns_of_ticks(next->ticks), line.ts_ns);
          slice_floor_ns = line.end_ns;
          t += 2;
        } else {
          ++t;
        }
        sink(line);
        continue;
      }
      if (h - t < kCounterSlots) break;  // never published partly; guards against reading past head
      std::uint64_t words[kCounterWords];
      for (std::size_t s = 0; s < kCounterSlots - 1; ++s)
        std::memcpy(&words[s * kWordsPerSlot], &ring.slots[(t + 1 + s) % kRingRecords], sizeof(HotRecord));
      line.extra = words;
      sink(line);
      t += kCounterSlots;
    }
    ring.tail.store(h, std::memory_order_release);
  }
  // Requires `lock`. Formats the pending records straight into buf[0, capacity) (at least one
  // line's room) and hands it to emit(buf, length) whenever the next line might not fit and at the
  // end: whole lines only, and no buffer grows.
  template <typename Emit>
  void format_records_locked(char* buf, std::size_t capacity, Emit&& emit) {
    if (ring.head.load(std::memory_order_acquire) == ring.tail.load(std::memory_order_relaxed)) return;
    const HotFormatter format = g_formatter.load(std::memory_order_acquire);
    std::size_t used = 0;
    drain_locked([&](const HotLine& line) {
      if (capacity - used < kMaxLine + 2) {
        emit(buf, used);
        used = 0;
      }
      const std::size_t n = format ? format(line, buf + used + 1, kMaxLine) : 0;
      if (n == 0) return;
      buf[used] = ',';  // the separator, the event, the newline
      buf[used + n + 1] = '\n';
      used += n + 2;
    });
    if (used > 0) emit(buf, used);
  }
  // Requires `lock`. Appends the pending records' lines to `data`, after its cold events. Not
  // inlined, here and in flush_locked(): each puts a chunk on the stack of a program thread, and
  // inlined into one caller they would take it twice.
  [[gnu::noinline]] void format_records_locked() {
    char chunk[kChunkBytes];
    format_records_locked(chunk, sizeof chunk, [&](const char* p, std::size_t n) { data.append(p, n); });
  }
  // Requires `lock`. Writes the cold events, then the pending records, formatted in a chunk on the stack.
  [[gnu::noinline]] void flush_locked() {
    char chunk[kChunkBytes];
    flush_locked(chunk, sizeof chunk);
  }
  // Requires `lock`. The same, formatted in `buf` (flush_all's reused buffer).
  void flush_locked(char* buf, std::size_t capacity) {
    const auto write_out = [](const char* p, std::size_t n) {
      std::lock_guard<std::mutex> w(write_lock());
      write_all(g_fd, p, n);
    };
    if (!data.empty()) write_out(data.data(), data.size());
    data.clear();
    format_records_locked(buf, capacity, write_out);
  }
  // Requires `lock`. TraceWriter::fence_thread for this buffer's track.
  std::uint64_t fence_locked(std::uint64_t ns) {
    format_records_locked();
    slice_floor_ns = std::max(slice_floor_ns, ns);
    return slice_floor_ns;
  }
  void flush(char* buf, std::size_t capacity) {
    std::lock_guard<std::mutex> g(lock);
    flush_locked(buf, capacity);
  }
  // In a forked child: the parent's pending events are not the child's.
  void forget() {
    data.clear();
    ring.tail.store(ring.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
};

// A heap object per thread, written out by a pthread key destructor when the thread exits and then
// kept for the next new thread (never destroyed). Not a thread_local object: the main thread's
// thread_local destructors run during exit() before the atexit handler that writes the summary,
// which still needs its buffer.
void release_thread_buffer(void* buffer);

pthread_key_t buffer_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k{};
    pthread_key_create(&k, release_thread_buffer);
    return k;
  }();
  return key;
}

constinit thread_local ThreadBuffer* t_buffer = nullptr;

[[gnu::noinline]] ThreadBuffer& create_thread_buffer() {
  ThreadBuffer* reused = nullptr;
  {
    std::lock_guard<std::mutex> g(registry_lock());
    if (!idle_buffers().empty()) {
      reused = idle_buffers().back();
      idle_buffers().pop_back();
    }
  }
  if (reused) {
    std::lock_guard<std::mutex> g(reused->lock);
    reused->tid = current_tid_uncached();
    reused->slice_floor_ns = 0;  // a new thread, a new track
  }
  t_buffer = reused ? reused : new ThreadBuffer;
  pthread_setspecific(buffer_key(), t_buffer);
  // The cursor starts with no room: the first record re-reads the tail (ring_with_room).
  t_hot.ring_slots = t_buffer->ring.slots;
  t_hot.ring_head = t_hot.ring_room_end = t_buffer->ring.head.load(std::memory_order_relaxed);
  t_hot.ring = &t_buffer->ring;
  return *t_buffer;
}

ThreadBuffer& thread_buffer() { return t_buffer ? *t_buffer : create_thread_buffer(); }

// Runs on the exiting thread; a hook called later by another destructor starts a new buffer.
void release_thread_buffer(void* buffer) {
  if (t_buffer == buffer) {
    t_buffer = nullptr;
    t_hot.ring_slots = nullptr;
    t_hot.ring_head = t_hot.ring_room_end = 0;  // no room: the next record creates a buffer
    t_hot.ring = nullptr;
  }
  auto* b = static_cast<ThreadBuffer*>(buffer);
  {
    std::lock_guard<std::mutex> g(b->lock);
    b->flush_locked();
    b->tid = 0;  // no thread's any more: a later thread given the same id by the kernel has its own
  }
  std::lock_guard<std::mutex> g(registry_lock());
  idle_buffers().push_back(b);
}

}  // namespace

namespace trace_detail {
void ring_with_room(std::size_t slots) {
  ThreadBuffer& b = thread_buffer();
  const auto room_end = [&] { return b.ring.tail.load(std::memory_order_acquire) + kRingRecords; };
  t_hot.ring_room_end = room_end();
  if (t_hot.ring_room_end - t_hot.ring_head < slots) {
    // The background writer fell behind (or is not running): this thread writes its own events.
    std::lock_guard<std::mutex> g(b.lock);
    b.flush_locked();
    t_hot.ring_room_end = room_end();
  }
}

// Set at load (the constructor asks for the time once) or by the first hook, whichever is first.
std::atomic<std::uint64_t> g_start_ns{0};
std::uint64_t first_start_ns() {
  std::uint64_t start = 0;
  const std::uint64_t now = monotonic_now_ns();
  return g_start_ns.compare_exchange_strong(start, now) ? now : start;
}
}  // namespace trace_detail

double trace_now_us() { return static_cast<double>(trace_now_ns()) / 1000.0; }

namespace {
thread_local int t_tid = 0;
int current_tid_uncached() { return static_cast<int>(syscall(SYS_gettid)); }

std::atomic<int> g_writer_pid{0};
std::atomic<bool> g_closed{false};
// TraceWriter::run_on_writer's hand-over: the task, and whether it has run.
std::atomic<void (*)()> g_writer_task{nullptr};
std::atomic<bool> g_writer_task_done{false};
// TraceWriter::park_writer's hand-over: forks under way, and whether the writer is parked for them.
std::atomic<int> g_park_requests{0};
std::atomic<bool> g_writer_parked{false};
// How long a fork waits for the writer to park (it parks within one period unless a lock the
// forking program holds keeps it inside a flush); past that, the fork goes on as without it.
constexpr int kParkWaitUs = 500'000;

void* writer_loop(void*) {
  const timespec period{0, kWriterPeriodNs};
  const timespec park_step{0, 20'000};
  while (!g_closed.load(std::memory_order_relaxed)) {
    nanosleep(&period, nullptr);
    if (g_park_requests.load(std::memory_order_acquire) > 0) {
      // Parked between two flushes: outside every lock, the allocator's included, until the forks end.
      g_writer_parked.store(true, std::memory_order_release);
      while (g_park_requests.load(std::memory_order_acquire) > 0) nanosleep(&park_step, nullptr);
      g_writer_parked.store(false, std::memory_order_release);
      continue;
    }
    if (void (*task)() = g_writer_task.exchange(nullptr)) {
      task();
      g_writer_task_done.store(true, std::memory_order_release);
      continue;
    }
    refresh_tick_anchor();  // the records about to be formatted are converted from a fresh anchor
    if (g_fd.load(std::memory_order_relaxed) >= 0) trace().flush_all();
  }
  return nullptr;
}

// One background writer per process (a forked child starts its own when it opens its trace). It
// blocks every signal, so the program's handlers (and kvremap's SIGTERM/SIGINT chaining) always
// run on the program's own threads. If it cannot be started, buffers are written by their threads.
void start_writer() {
  const int pid = getpid();
  if (g_writer_pid.exchange(pid) == pid) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread{};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_create(&thread, &attr, writer_loop, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
}  // namespace

int current_tid() {
  if (t_tid == 0) t_tid = current_tid_uncached();
  return t_tid;
}

constinit TraceWriter g_trace_writer;

bool TraceWriter::open(const std::string& path, std::string_view first_event, std::string_view header_event) {
  // Never truncates: an image exec'd by a traced process has its pid, and its trace must not end that one's.
  // Readable too: a trace that fills its disk is cut back to a line boundary found by reading it.
  // Private unless KVREMAP_TRACE_MODE says otherwise: the header holds the command line and host name.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
                  static_cast<mode_t>(options().trace_mode));
  if (fd < 0) return false;
  std::string head = "[\n";
  head.append(first_event);
  head += "\n,";
  head.append(header_event);
  head += '\n';
  // The file holds its header from its first write, or it goes: a file system too full for the header
  // (or a file-size limit below it) leaves no file at all, never an empty one or a torn header.
  if (write_fully(fd, head.data(), head.size()) != head.size()) {
    const int error = errno;
    (void)!::unlink(path.c_str());  // created here (O_EXCL): the name is this process's
    ::close(fd);
    errno = error;
    return false;
  }
  std::string early;
  {
    std::lock_guard<std::mutex> e(early_lock());
    early.swap(early_events());
    g_keep_early = false;
  }
  std::lock_guard<std::mutex> w(write_lock());
  g_write_failed = false;
  g_head_bytes = head.size();
  g_file_bytes = head.size();
  write_all(fd, early);  // whole lines after the header, with the same stop rule as every later write
  fd_ = fd;
  g_fd = fd;
  g_closed = false;
  start_writer();
  return true;
}

void TraceWriter::forget_early_events() {
  std::lock_guard<std::mutex> e(early_lock());
  std::string().swap(early_events());
  g_keep_early = false;
}

void TraceWriter::set_hot_formatter(HotFormatter formatter) { g_formatter.store(formatter, std::memory_order_release); }

void TraceWriter::event(std::string_view json_object, bool flush_now) {
  if (fd_ < 0) {
    keep_early(json_object);
    return;
  }
  ThreadBuffer& b = thread_buffer();
  std::lock_guard<std::mutex> g(b.lock);
  b.format_records_locked();  // this thread's earlier hot events come first
  b.data += ',';
  b.data.append(json_object);
  b.data += '\n';
  if (flush_now || b.data.size() >= kFlushBytes) b.flush_locked();
}

std::uint64_t TraceWriter::fence_thread(std::uint64_t ns) {
  if (fd_ < 0) return ns;
  ThreadBuffer& b = thread_buffer();
  std::lock_guard<std::mutex> g(b.lock);
  return b.fence_locked(ns);
}

std::uint64_t TraceWriter::fence_thread(std::uint64_t ns, int tid) {
  if (fd_ < 0) return ns;
  if (tid == current_tid()) return fence_thread(ns);
  std::lock_guard<std::mutex> r(registry_lock());
  for (ThreadBuffer* b : registry()) {
    std::lock_guard<std::mutex> g(b->lock);
    if (b->tid == tid) return b->fence_locked(ns);  // consumers may drain any thread's ring under its lock
  }
  return ns;
}

void TraceWriter::hot_counter(std::uint64_t ticks, int device, const std::uint64_t (&live)[kCounterWords]) {
  if (fd_ < 0) return;
  ThreadHot& t = t_hot;
  if (t.ring_room_end - t.ring_head < kCounterSlots) trace_detail::ring_with_room(kCounterSlots);
  const std::uint64_t h = t.ring_head;
  HotRecord* const slots = t.ring_slots;
  HotRecord& head = slots[h % kRingRecords];
  head.ticks = ticks;
  head.ptr = 0;
  head.api = "";
  head.packed = HotRecord::pack(0, device, kHotCounter, 0, 0);
  for (std::size_t s = 0; s < kCounterSlots - 1; ++s)
    std::memcpy(static_cast<void*>(&slots[(h + 1 + s) % kRingRecords]), &live[s * kWordsPerSlot], sizeof(HotRecord));
  t.ring_head = h + kCounterSlots;
  t.ring->head.store(t.ring_head, std::memory_order_release);  // all three slots at once
}

void TraceWriter::flush_all() {
  std::lock_guard<std::mutex> g(registry_lock());
  for (ThreadBuffer* b : registry()) b->flush(flush_all_buffer(), kFlushAllBytes);
}

void TraceWriter::close(std::string_view last_event) {
  if (fd_ < 0) return;
  flush_all();
  // Written directly, after every buffer: the summary must be the last event in the file.
  std::string tail = ",";
  tail.append(last_event);
  tail += "\n]\n";
  std::lock_guard<std::mutex> w(write_lock());
  write_all(fd_, tail);
  ::close(fd_);
  fd_ = -1;
  g_fd = -1;
  g_closed = true;
  g_keep_early = false;
}

bool TraceWriter::run_on_writer(void (*task)(), int timeout_ms) {
  if (g_writer_pid.load() != getpid() || g_closed.load()) return false;
  g_writer_task_done.store(false);
  g_writer_task.store(task, std::memory_order_release);
  const timespec step{0, 1'000'000};
  for (int waited = 0; waited < timeout_ms; ++waited) {
    if (g_writer_task_done.load(std::memory_order_acquire)) return true;
    nanosleep(&step, nullptr);
  }
  // Not taken in time (the writer waits on a lock the interrupted code holds): withdrawn, unless it
  // is running already.
  void (*expected)() = task;
  return !g_writer_task.compare_exchange_strong(expected, nullptr) && g_writer_task_done.load();
}

void TraceWriter::park_writer() {
  g_park_requests.fetch_add(1, std::memory_order_acq_rel);
  if (g_writer_pid.load() != getpid() || g_closed.load()) return;  // no writer thread to wait for
  const timespec step{0, 20'000};
  for (int waited = 0; waited < kParkWaitUs && !g_writer_parked.load(std::memory_order_acquire); waited += 20)
    nanosleep(&step, nullptr);
}

void TraceWriter::unpark_writer() { g_park_requests.fetch_sub(1, std::memory_order_acq_rel); }

void TraceWriter::prepare_fork() {
  thread_buffer();  // created now: creating it in the child would take the registry lock held here
  flush_all();
  registry_lock().lock();
  write_lock().lock();
  early_lock().lock();
}

void TraceWriter::parent_after_fork() {
  early_lock().unlock();
  write_lock().unlock();
  registry_lock().unlock();
}

void TraceWriter::child_after_fork() {
  t_tid = 0;  // the forking thread has a new id in the child
  g_park_requests.store(0);  // the child has no writer until its trace opens (start_writer)
  g_writer_parked.store(false);
  ThreadBuffer& own = thread_buffer();
  own.forget();
  own.tid = current_tid();
  registry().assign(1, &own);
  idle_buffers().clear();  // registered in the parent only
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  g_fd = -1;
  early_events().clear();  // the parent's; the child keeps its own until its trace opens
  g_keep_early = true;
  early_lock().unlock();
  write_lock().unlock();
  registry_lock().unlock();
}

}  // namespace kvremap::interpose
