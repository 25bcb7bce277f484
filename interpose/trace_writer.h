// The streamed per-process trace file: events buffered per thread, written as whole lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvremap::interpose {

// A hot event (an allocation or a free) as the hook leaves it: a fixed-size record appended to the
// thread's buffer, formatted to its JSON line only when the buffer is written out — normally by
// the background writer thread, so the hook pays for neither formatting nor the write.
struct HotRecord {
  std::uint64_t ts_ns = 0;
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  const char* api = "";  // the hook's name literal (static storage)
  std::int32_t device = 0;
  std::uint8_t kind = 0;  // HotRecordKind
  std::uint8_t category = 0;
  std::uint8_t phase = 0;
  std::uint64_t live[7] = {};  // kHotCounter: live bytes per category, in policy::Category order
};
enum HotRecordKind : std::uint8_t { kHotAlloc = 0, kHotFree = 1, kHotCounter = 2 };

// Writes the JSON object of `record`, made by thread `tid`, into out[0, capacity); returns its
// length, or 0 when it does not fit (the record is then dropped). Must not allocate.
using HotFormatter = std::size_t (*)(const HotRecord& record, int tid, char* out, std::size_t capacity);

// The file is a Chrome trace-event JSON array: "[" then one event per line, every line after the
// first starting with ",", and "]" at a clean close. Buffers only ever hold whole lines and are
// written with one write() each, so a process killed at any point leaves a loadable prefix.
class TraceWriter {
 public:
  // Creates `path` and writes the opening bracket and the first event. False if the file cannot be
  // created (the caller logs it and turns tracing off).
  bool open(const std::string& path, std::string_view first_event);
  bool is_open() const { return fd_ >= 0; }

  // Appends one event (a JSON object without separators) to the calling thread's buffer; writes
  // the buffer out when it is large, or at once when `flush_now`.
  void event(std::string_view json_object, bool flush_now = false);
  // Appends a hot record to the calling thread's buffer, after its earlier events.
  void hot(const HotRecord& record);
  // How hot records become lines; set before the first hot().
  void set_hot_formatter(HotFormatter formatter);

  // Writes out every thread's buffer. Called at phase changes, before fork, at exit, and every
  // few milliseconds by the background writer (started by open(), one per process).
  void flush_all();

  // Writes the final event and the closing bracket, then closes the file.
  void close(std::string_view last_event);
  // The same without waiting on any lock (for signal handlers); false, writing nothing, when a lock
  // is taken.
  bool try_close(std::string_view last_event);

  // pthread_atfork handlers: before fork everything is written and the writer's locks are held, so
  // the child inherits them in a known state; the child then forgets the parent's file and the
  // other threads' buffers (those threads do not exist there) and starts without a file.
  void prepare_fork();
  void parent_after_fork();
  void child_after_fork();

 private:
  int fd_ = -1;
};

// Constant-initialised (usable before any constructor runs) and never destroyed in effect.
extern TraceWriter g_trace_writer;
inline TraceWriter& trace() { return g_trace_writer; }

// Microseconds since the library was loaded, the trace's time base.
double trace_now_us();
std::uint64_t trace_now_ns();
std::uint64_t monotonic_ns();
int current_tid();

}  // namespace kvremap::interpose
