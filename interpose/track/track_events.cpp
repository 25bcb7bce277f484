// The tracker's trace events: hot alloc/free lines, counters, the header and the summary.
#include "interpose/track/track_events.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "interpose/driver/driver_api.h"
#include "interpose/trace/json.h"
#include "interpose/base/library.h"
#include "interpose/base/process_cmdline.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/track/tracker.h"
#include "interpose/version_number.h"
#include "policy/trace_schema.h"

namespace kvremap::interpose::tracker_detail {
namespace {
std::atomic<int> g_pid{0};
// Names tried for one process's trace file before tracing gives up (each exec of one pid takes one).
constexpr int kMaxTraceNameTries = 1000;
}  // namespace

int process_id() {
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

void refresh_process_id() { g_pid.store(getpid(), std::memory_order_relaxed); }

// Events are built in one reused per-thread string (no allocation per event) with plain appends:
// the format-string machinery was most of the per-allocation cost. A caller finishes one event
// (hands it to trace().event) before starting the next.
namespace {
// The per-thread event text. Not a thread_local std::string: the main thread's thread_local
// destructors run inside exit() before the atexit handler that writes the summary, which would then
// write into freed memory (heap corruption at every clean exit under PyTorch). The pointer is
// trivially destructible and stays readable after them; the owner frees the text when a thread
// ends, and a thread whose owner has already gone (exit) gets a fresh one, left to the exit.
constinit thread_local std::string* t_event_text = nullptr;
constinit thread_local bool t_event_owner_gone = false;
struct EventTextOwner {
  ~EventTextOwner() {
    delete t_event_text;
    t_event_text = nullptr;
    t_event_owner_gone = true;
  }
};

std::string& event_text() {
  if (!t_event_text) {
    t_event_text = new std::string;
    if (!t_event_owner_gone) {
      thread_local EventTextOwner owner;  // constructed once per thread, at its first event
      (void)owner;
    }
  }
  return *t_event_text;
}
}  // namespace

std::string& event_head(const char* ph, const char* cat, std::string_view name) {
  std::string& e = event_text();
  e.clear();
  e += R"({"ph":")";
  e += ph;
  e += R"(","cat":")";
  e += cat;
  e += R"(","pid":)";
  append_uint(e, static_cast<std::uint64_t>(process_id()));
  e += R"(,"tid":)";
  append_uint(e, static_cast<std::uint64_t>(current_tid()));
  e += R"(,"ts":)";
  append_us_from_ns(e, trace_now_ns());
  e += R"(,"name":)";
  append_json_string(e, name);
  return e;
}

namespace {
// Hot lines are mostly text that repeats: everything before the timestamp is fixed per thread and
// kind, the api part per hook, everything after the size per (kind, device, category, phase). The
// formatting thread keeps the last of each, so a line is three padded copies and four numbers.
struct Piece {
  std::uint64_t key = ~0ULL;
  std::size_t size = 0;
  char text[96] = {};
};

template <typename Build>
const Piece& cached(Piece& piece, std::uint64_t key, Build&& build) {
  if (piece.key != key) {
    EventLine e(piece.text, sizeof piece.text);
    build(e);
    piece.size = e.overflowed() ? 0 : e.view().size();
    piece.key = key;
  }
  return piece;
}

// A lifetime (an allocation and its free in one complete event) uses the allocation's pieces plus
// its own head and the free's api.
constexpr std::size_t kLifetime = 3;
struct HotPieces {
  Piece head[4];   // per record kind and lifetime: `{"ph":…,"pid":P,"tid":T` up to the timestamp's key
  Piece api[2];    // alloc, free: `,"args":{"api":"NAME","ptr":`
  Piece tail[2];   // alloc, free: `,"device":D,"category":"C"[,"phase":"P"]}}`
  Piece free_api;  // lifetime: `,"free_api":"NAME"}}`
};
thread_local HotPieces t_pieces;

std::uint64_t thread_key(int tid) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(process_id())) << 32 | static_cast<std::uint32_t>(tid);
}
}  // namespace

std::size_t format_hot_record(const HotLine& line, char* out, std::size_t capacity) {
  const HotRecord& r = *line.record;
  const std::uint64_t* extra = line.extra;
  // A lifetime is written from its allocation's pieces, with its own head and the free's api.
  const HotRecord* freed = line.freed && !extra && is_lifetime(r, *line.freed) ? line.freed : nullptr;
  EventLine e(out, capacity);  // straight into the caller's buffer
  const std::size_t kind = r.kind() <= kHotCounter ? std::size_t{r.kind()} : std::size_t{kHotCounter};
  if (kind == kHotCounter && !extra) return 0;
  const Piece& head = cached(t_pieces.head[freed ? kLifetime : kind], thread_key(line.tid), [&](EventLine& h) {
    h.lit(R"({"ph":")").raw(kind == kHotCounter ? "C" : freed ? "X" : "i");
    h.raw(kind == kHotCounter ? std::string_view(R"(","cat":"memory","pid":)") : R"(","cat":"alloc","pid":)");
    h.u64(static_cast<std::uint64_t>(process_id())).lit(R"(,"tid":)").u64(static_cast<std::uint64_t>(line.tid));
    if (freed) h.lit(R"(,"name":"alloc")");
    if (kind == kHotAlloc && !freed) h.lit(R"(,"name":"alloc","s":"t")");
    if (kind == kHotFree) h.lit(R"(,"name":"free","s":"t")");
    h.lit(R"(,"ts":)");
  });
  if (head.size == 0) return 0;
  e.padded(head.text, head.size).micros(line.ts_ns);
  if (freed) e.lit(R"(,"dur":)").micros(line.end_ns > line.ts_ns ? line.end_ns - line.ts_ns : 0);
  if (kind == kHotCounter) {
    e.lit(R"(,"name":"device )").u64(static_cast<std::uint64_t>(r.device())).lit(R"( bytes","args":{)");
    for (std::size_t i = 0; i < kCategories; ++i) {
      if (i) e.lit(",");
      e.lit("\"").raw(policy::to_string(kAllCategories[i])).lit(R"(":)").u64(extra[i]);
    }
    return e.lit("}}").overflowed() ? 0 : e.view().size();
  }
  const Piece& api = cached(t_pieces.api[kind], reinterpret_cast<std::uintptr_t>(r.api),
                            [&](EventLine& a) { a.lit(R"(,"args":{"api":")").raw(r.api).lit(R"(","ptr":)"); });
  e.padded(api.text, api.size).hex(r.ptr).lit(R"(,"bytes":)").u64(extra ? *extra : r.bytes());
  // Device, category and phase: the packed word's top bits (the phase only matters for allocations).
  const std::uint64_t tail_key =
      r.packed >> HotRecord::kBytesBits & (kind == kHotAlloc ? ~0ULL : ~(std::uint64_t{15} << 9));
  const Piece& tail = cached(t_pieces.tail[kind], tail_key, [&](EventLine& t) {
    t.lit(R"(,"device":)").u64(static_cast<std::uint64_t>(r.device())).lit(R"(,"category":")");
    t.raw(policy::to_string(static_cast<policy::Category>(r.category())));
    if (kind == kHotAlloc) t.lit(R"(","phase":")").raw(policy::to_string(static_cast<policy::Phase>(r.phase())));
    t.lit(R"("}})");
  });
  // A piece that did not fit its buffer (an api name of ~60 characters) is empty: the line is
  // dropped rather than written without it.
  if (api.size == 0 || tail.size == 0) return 0;
  if (!freed) {
    e.padded(tail.text, tail.size);
  } else {
    const Piece& free_api = cached(t_pieces.free_api, reinterpret_cast<std::uintptr_t>(freed->api),
                                   [&](EventLine& f) { f.lit(R"(,"free_api":")").raw(freed->api).lit(R"("}})"); });
    if (free_api.size == 0) return 0;
    e.padded(tail.text, tail.size - 2).padded(free_api.text, free_api.size);  // its "}}" closes the line
  }
  return e.overflowed() ? 0 : e.view().size();
}

void emit(const EventLine& e) {
  if (!e.overflowed()) trace().event(e.view());
}

void emit_hot_line(const HotRecord& r, const char* caller, const std::uint64_t* full_bytes) {
  char line[768];
  HotLine hot;
  hot.record = &r;
  hot.extra = full_bytes;
  hot.ts_ns = trace_ns_of_ticks(r.ticks);
  hot.tid = current_tid();
  const std::size_t n = format_hot_record(hot, line, sizeof line);
  if (n <= 2) return;
  EventLine e;
  if (caller) {
    e.raw(line, n - 2).lit(R"(,"caller":)").quoted(caller).lit("}}");  // inserted before the closing "}}"
  } else {
    e.raw(line, n);
  }
  emit(e);
}

namespace {
// The command line as one string, arguments separated by spaces.
std::string read_cmdline() {
  std::string joined;
  for (const std::string& arg : own_command_line()) {
    if (!joined.empty()) joined += ' ';
    joined += arg;
  }
  return joined;
}

}  // namespace

std::string options_json() {
  std::string o = "{";
  bool first = true;
  for (const auto& [name, value] : policy::options_in_force(options())) {
    if (!first) o += ',';
    first = false;
    append_json_string(o, name);
    o += ':';
    append_json_string(o, value);
  }
  return o + "}";
}

void open_trace() {
  if (!options().trace) return;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  // kvremap-HOST-PID.json, or where a file of that name exists (the image before an exec, which had
  // this pid; a process of an earlier run that had it), the first free kvremap-HOST-PID.N.json, N >= 2.
  std::string path = fmt::format("{}/kvremap-{}-{}.json", options().trace_dir, host, process_id());
  std::string first = fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":{},"ts":0,"args":{{"name":)",
                                  process_id(), current_tid());
  const std::string cmdline = read_cmdline();
  append_json_string(first, fmt::format("kvremap: {} (pid {})", cmdline.substr(0, cmdline.find(' ')), process_id()));
  first += "}}";
  trace().set_hot_formatter(format_hot_record);
  bool opened = trace().open(path, first);
  for (int n = 2; !opened && errno == EEXIST && n <= kMaxTraceNameTries; ++n) {
    path = fmt::format("{}/kvremap-{}-{}.{}.json", options().trace_dir, host, process_id(), n);
    opened = trace().open(path, first);
  }
  if (!opened) {
    log().warn("cannot create trace file {}: {}; tracing off, tracking goes on", path, std::strerror(errno));
    return;
  }
  std::string header = event_head("M", "kvremap", "kvremap_trace");
  header += fmt::format(R"(,"args":{{"schema_version":{},"library_version":"{}","hostname":)", policy::kTraceSchemaVersion,
                        KVREMAP_VERSION_STRING);
  append_json_string(header, host);
  header += fmt::format(R"(,"pid":{},"ppid":{},"cmdline":)", process_id(), getppid());
  append_json_string(header, cmdline);
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  header +=
      fmt::format(R"(,"start_unix_ns":{},"options":{}}}}})",
                  static_cast<std::uint64_t>(real.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(real.tv_nsec),
                  options_json());
  trace().event(header, true);  // readers need it as the second line, before any other thread's events
  for (const policy::OptionProblem& p : option_problems()) {
    std::string& e = event_head("i", "kvremap", "option error");
    e += R"(,"s":"g","args":{"variable":)";
    append_json_string(e, p.variable);
    e += R"(,"value":)";
    append_json_string(e, p.value);
    e += R"(,"message":)";
    append_json_string(e, p.message);
    e += "}}";
    trace().event(e);
  }
  log().info("trace: {}", path);
}

void first_sight_of_device(int device) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  if (d.seen.exchange(true)) return;
  const std::uint64_t total = real_device_total(device);
  d.total.store(total);
  std::string& e = event_head("M", "kvremap", "kvremap_device");
  e += fmt::format(R"(,"args":{{"device":{},"total_bytes":{}}}}})", device, total);
  trace().event(e);
}

void emit_counter(int device, bool force) { emit_counter(S(), device, force, ticks()); }

void emit_counter_sample(int device, bool force, std::uint64_t now_ticks) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  std::uint64_t next = d.next_counter_ticks.load(std::memory_order_relaxed);
  if (!force && now_ticks < next) return;
  // One thread takes each throttled slot; forced samples (checkpoints, phase changes) always go.
  if (!d.next_counter_ticks.compare_exchange_strong(next, now_ticks + kCounterIntervalMs * ticks_per_ms()) && !force)
    return;
  if (!trace().is_open()) return;
  // Records like the allocations': formatted when the buffer is written out.
  std::uint64_t live[kCounterWords] = {};
  static_assert(kCategories <= kCounterWords);
  for (std::size_t i = 0; i < kCategories; ++i)
    live[i] = static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.categories[i].live.load()));
  trace().hot_counter(now_ticks, device, live);
}

void emit_all_counters() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (S().devices[static_cast<std::size_t>(d)].seen.load()) emit_counter(d, true);
}

std::string summary_json(const char* reason) {
  std::string s = event_head("i", "summary", "summary");
  s += fmt::format(
      R"(,"s":"g","args":{{"schema_version":{},"library_version":"{}","exit":"{}","duration_us":{:.3f},"devices":[)",
      policy::kTraceSchemaVersion, KVREMAP_VERSION_STRING, reason, trace_now_us());
  bool first_device = true;
  for (int d = 0; d < kMaxDevices; ++d) {
    const DeviceStats& dev = S().devices[static_cast<std::size_t>(d)];
    if (!dev.seen.load()) continue;
    if (!first_device) s += ',';
    first_device = false;
    s += fmt::format(R"({{"device":{},"total_bytes":{},"categories":{{)", d, dev.total.load());
    for (std::size_t i = 0; i < kCategories; ++i) {
      const CategoryStats& c = dev.categories[i];
      if (i) s += ',';
      s += fmt::format(
          R"("{}":{{"live_bytes":{},"peak_bytes":{},"peak_ts":{:.3f},"allocated_bytes":{},"allocations":{},"frees":{}}})",
          policy::to_string(kAllCategories[i]), c.live.load(), c.peak.load(),
          static_cast<double>(c.peak_ts_ns.load()) / 1000.0, c.allocated.load(), c.allocations.load(), c.frees.load());
    }
    s += "}}";
  }
  s += R"(],"checkpoints":[)";
  {
    std::lock_guard<std::mutex> g(S().lock);
    for (std::size_t i = 0; i < S().checkpoints.size(); ++i) {
      if (i) s += ',';
      s += S().checkpoints[i];
    }
  }
  s += fmt::format(
      R"(],"counts":{{"captures":{},"graph_launches":{},"kernel_launches":{},"module_loads":{},"routed_lookups":{}}},"options":{}}}}})",
      S().capture_count.load(), S().graph_launches.load(), S().kernel_launches.load(), S().module_loads.load(),
      routed_lookups(), options_json());
  return s;
}

}  // namespace kvremap::interpose::tracker_detail

namespace kvremap::interpose {
namespace {
constinit std::atomic<std::uint64_t> g_routed_lookups{0};
}  // namespace

std::uint64_t routed_lookups() { return g_routed_lookups.load(std::memory_order_relaxed); }
void count_routed_lookup() { g_routed_lookups.fetch_add(1, std::memory_order_relaxed); }

}  // namespace kvremap::interpose
