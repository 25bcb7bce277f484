// Tracking state: live allocations per category and device, captures, checkpoints, phases, and their trace events.
#include "interpose/tracker.h"

#include <fmt/compile.h>
#include <fmt/format.h>
#include <signal.h>
#include <tbb/concurrent_hash_map.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "interpose/caller.h"
#include "interpose/driver_api.h"
#include "interpose/driver_hooks.h"
#include "interpose/event_line.h"
#include "interpose/guard.h"
#include "interpose/json.h"
#include "interpose/library.h"
#include "interpose/trace_writer.h"
#include "interpose/version_number.h"
#include "policy/events.h"
#include "policy/phases.h"

namespace kvremap::interpose {
namespace {

using policy::Category;

constexpr int kMaxDevices = 64;
constexpr std::size_t kCategories = 7;
constexpr std::array<Category, kCategories> kAllCategories{Category::kv,         Category::graph_pool, Category::graph_exec,
                                                           Category::module,     Category::async_pool, Category::vmm,
                                                           Category::other};
// Counter events for one device at most this often, plus at every checkpoint, phase change and exit.
constexpr double kCounterIntervalUs = 1000.0;

struct CategoryStats {
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::uint64_t> peak_ts_ns{0};
  std::atomic<std::uint64_t> allocated{0};
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> frees{0};
};

struct DeviceStats {
  std::atomic<bool> seen{false};
  std::atomic<std::uint64_t> total{0};
  std::array<CategoryStats, kCategories> categories;
  std::atomic<double> last_counter_us{-1e18};
};

struct Live {
  std::uint64_t bytes = 0;
  int device = 0;
  Category category = Category::other;
};

struct ActiveCapture {
  std::uint64_t stream = 0;
  std::uint64_t id = 0;
  int mode = 0;
  int tid = 0;
  double begin_us = 0;
  std::uint64_t allocated = 0;
};

using LiveMap = tbb::concurrent_hash_map<std::uint64_t, Live>;

// Everything below is heap-allocated and never destroyed: hooks may run during and after exit.
struct State {
  std::atomic<bool> disabled{false};
  std::atomic<bool> trace_opened{false};
  std::atomic<bool> finished{false};
  std::once_flag open_once;
  std::array<DeviceStats, kMaxDevices> devices;
  LiveMap allocations;  // device pointers (cuMemAlloc family, async)
  LiveMap handles;      // VMM handles
  LiveMap execs;        // graph execs: bytes consumed at instantiation
  LiveMap modules;      // modules and libraries: bytes consumed at load

  std::mutex lock;  // captures, checkpoints, phase trackers
  std::vector<ActiveCapture> captures;
  std::atomic<int> global_captures{0};
  std::uint64_t next_capture_id = 1;
  std::vector<std::string> checkpoints;  // JSON objects, for the summary
  std::array<std::optional<policy::PhaseTracker>, kMaxDevices> phases;
  // Readable without the lock: the phase each allocation event is stamped with.
  std::array<std::atomic<std::uint8_t>, kMaxDevices> phase_now{};
  // Kernel launches not yet shown to the phase tracker; fed in order before the device's next event.
  std::array<std::atomic<std::uint32_t>, kMaxDevices> pending_launches{};
  std::atomic<bool> all_serving{false};

  std::atomic<std::uint64_t> capture_count{0};
  std::atomic<std::uint64_t> graph_launches{0};
  std::atomic<std::uint64_t> kernel_launches{0};
  std::atomic<std::uint64_t> module_loads{0};
};

// A function-local static, not a global: hooks can run before this file's initialisers (another
// library's constructor may allocate), and a forked child swaps in a fresh state.
State*& state_slot() {
  static State* state = new State;
  return state;
}
State& S() { return *state_slot(); }
thread_local int t_own_captures = 0;

std::size_t index_of(Category c) { return static_cast<std::size_t>(c); }


// getpid() is a system call on every glibc since 2.25; the pid changes only across fork.
int g_pid = getpid();

// Events are built in one reused per-thread string (no allocation per event) with plain appends:
// the format-string machinery was most of the per-allocation cost. A caller finishes one event
// (hands it to trace().event) before starting the next.
std::string& event_head(const char* ph, const char* cat, std::string_view name) {
  thread_local std::string e;
  e.clear();
  e += R"({"ph":")";
  e += ph;
  e += R"(","cat":")";
  e += cat;
  e += R"(","pid":)";
  append_uint(e, static_cast<std::uint64_t>(g_pid));
  e += R"(,"tid":)";
  append_uint(e, static_cast<std::uint64_t>(current_tid()));
  e += R"(,"ts":)";
  append_us_from_ns(e, trace_now_ns());
  e += R"(,"name":)";
  append_json_string(e, name);
  return e;
}

// The common head of the hot events, in an EventLine.
void hot_head(EventLine& e, std::string_view ph, std::string_view cat, std::string_view name) {
  e.lit(R"({"ph":")").raw(ph).lit(R"(","cat":")").raw(cat).lit(R"(","pid":)").u64(static_cast<std::uint64_t>(g_pid));
  e.lit(R"(,"tid":)").u64(static_cast<std::uint64_t>(current_tid())).lit(R"(,"ts":)").micros(trace_now_ns());
  e.lit(R"(,"name":")").raw(name).lit("\"");
}

// The part of an alloc/free event that is the same for every event of one thread: built once per
// thread (and again in a forked child), then copied.
enum class HotKind { kAlloc, kFree };
struct HotPrefix {
  int pid = -1;
  std::size_t length = 0;
  char text[160];
};
thread_local HotPrefix t_hot_prefix[2];

std::string_view hot_prefix(HotKind kind) {
  HotPrefix& p = t_hot_prefix[kind == HotKind::kAlloc ? 0 : 1];
  if (p.pid != g_pid) {
    EventLine e;
    e.lit(R"({"ph":"i","cat":"alloc","pid":)").u64(static_cast<std::uint64_t>(g_pid));
    e.lit(R"(,"tid":)").u64(static_cast<std::uint64_t>(current_tid()));
    e.raw(kind == HotKind::kAlloc ? std::string_view(R"(,"name":"alloc")") : std::string_view(R"(,"name":"free")"));
    e.lit(R"(,"s":"t","ts":)");
    std::memcpy(p.text, e.view().data(), e.view().size());
    p.length = e.view().size();
    p.pid = g_pid;
  }
  return {p.text, p.length};
}

void emit(const EventLine& e) {
  if (!e.overflowed()) trace().event(e.view());
}

void disable(const char* why) {
  if (S().disabled.exchange(true)) return;
  log().error("tracking disabled: {}; every call now passes straight through", why);
  try {
    std::string& e = event_head("i", "kvremap", "tracking disabled");
    e += R"(,"s":"g","args":{"reason":)";
    append_json_string(e, why);
    e += "}}";
    trace().event(e, true);
  } catch (...) {
  }
}

std::string read_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

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

struct sigaction g_previous_term {};
struct sigaction g_previous_int {};

void finish_from_signal(const char* reason);

void on_signal(int sig) {
  // Chain to what the program had installed. Only when the signal would kill the process outright
  // (no handler of its own) is the summary written first: otherwise the program decides whether it
  // exits, and a clean exit writes the summary through atexit.
  const struct sigaction& previous = sig == SIGTERM ? g_previous_term : g_previous_int;
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler == SIG_DFL || previous.sa_handler == nullptr) {
    finish_from_signal(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(sig, nullptr, nullptr);
  } else {
    previous.sa_handler(sig);
  }
}

void install_exit_handlers() {
  std::atexit([] { finish("atexit"); });
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGINT, &action, &g_previous_int);
}

void open_trace() {
  if (!options().trace) return;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const std::string path = fmt::format("{}/kvremap-{}-{}.json", options().trace_dir, host, g_pid);
  std::string first = fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":{},"ts":0,"args":{{"name":)",
                                  g_pid, current_tid());
  const std::string cmdline = read_cmdline();
  append_json_string(first, fmt::format("kvremap: {} (pid {})", cmdline.substr(0, cmdline.find(' ')), g_pid));
  first += "}}";
  if (!trace().open(path, first)) {
    log().warn("cannot create trace file {}: {}; tracing off, tracking goes on", path, std::strerror(errno));
    return;
  }
  std::string header = event_head("M", "kvremap", "kvremap_trace");
  header += fmt::format(R"(,"args":{{"schema_version":1,"library_version":"{}","hostname":)", KVREMAP_VERSION_STRING);
  append_json_string(header, host);
  header += fmt::format(R"(,"pid":{},"ppid":{},"cmdline":)", g_pid, getppid());
  append_json_string(header, cmdline);
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  header += fmt::format(R"(,"start_unix_ns":{},"options":{}}}}})",
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

// First CUDA activity: the trace file, exit handlers. Later calls cost one atomic load.
void ensure_started() {
  if (S().trace_opened.load(std::memory_order_acquire)) return;
  std::call_once(S().open_once, [] {
    open_trace();
    install_exit_handlers();
    S().trace_opened.store(true, std::memory_order_release);
  });
}

int device_index(int device) { return device >= 0 && device < kMaxDevices ? device : 0; }

int tracked_device();

void see_device(int device) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  if (d.seen.load(std::memory_order_acquire) || d.seen.exchange(true)) return;
  const std::uint64_t total = real_device_total(device);
  d.total.store(total);
  std::string& e = event_head("M", "kvremap", "kvremap_device");
  e += fmt::format(R"(,"args":{{"device":{},"total_bytes":{}}}}})", device, total);
  trace().event(e);
}

void emit_counter(int device, bool force) {
  DeviceStats& d = S().devices[static_cast<std::size_t>(device)];
  const double now = trace_now_us();
  double last = d.last_counter_us.load(std::memory_order_relaxed);
  if (!force && now - last < kCounterIntervalUs) return;
  if (!d.last_counter_us.compare_exchange_strong(last, now) && !force) return;
  if (!trace().is_open()) return;
  EventLine e;
  char name[32];
  const int n = std::snprintf(name, sizeof name, "device %d bytes", device);
  hot_head(e, "C", "memory", std::string_view(name, static_cast<std::size_t>(n)));
  e.lit(R"(,"args":{)");
  for (std::size_t i = 0; i < kCategories; ++i) {
    if (i) e.lit(",");
    e.lit("\"").raw(policy::to_string(kAllCategories[i])).lit(R"(":)");
    e.u64(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.categories[i].live.load())));
  }
  e.lit("}}");
  emit(e);
}

void emit_all_counters() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (S().devices[static_cast<std::size_t>(d)].seen.load()) emit_counter(d, true);
}

// The phase rules count launches only up to small thresholds, so a long run of launches between two
// other events is fed as at most this many.
constexpr std::uint32_t kMaxLaunchesFed = 1024;

void feed_phase(int device, policy::EventKind kind) {
  std::optional<policy::PhaseChange> change;
  policy::Phase phase_now{};
  {
    std::lock_guard<std::mutex> g(S().lock);
    auto& tracker = S().phases[static_cast<std::size_t>(device)];
    if (!tracker) tracker.emplace();
    const std::uint64_t t = trace_now_ns();
    const auto tid = static_cast<std::uint64_t>(current_tid());
    const std::uint32_t launches =
        std::min(S().pending_launches[static_cast<std::size_t>(device)].exchange(0), kMaxLaunchesFed);
    for (std::uint32_t i = 0; i < launches && !change; ++i)
      change = tracker->observe(policy::Event{t, tid, device, policy::KernelLaunch{}});
    policy::Event event{t, tid, device, std::move(kind)};
    if (!change) {
      change = tracker->observe(event);
    } else {
      tracker->observe(event);  // a launch changed the phase; the event itself still counts
    }
    phase_now = tracker->current();
    S().phase_now[static_cast<std::size_t>(device)].store(static_cast<std::uint8_t>(phase_now));
    if (change && phase_now == policy::Phase::serving) {
      bool all = true;
      for (auto& t : S().phases)
        if (t && t->current() != policy::Phase::serving) all = false;
      S().all_serving.store(all);
    }
  }
  if (!change) return;
  std::string& e = event_head("i", "phase", fmt::format("phase: {}", policy::to_string(change->to)));
  e += fmt::format(R"(,"s":"g","args":{{"device":{},"phase":"{}","previous":"{}","reason":)", device,
                   policy::to_string(change->to), policy::to_string(change->from));
  append_json_string(e, change->reason);
  e += "}}";
  trace().event(e, true);
  emit_all_counters();
  log().info("device {}: phase {} -> {} ({})", device, policy::to_string(change->from), policy::to_string(change->to),
             change->reason);
}

std::string_view current_phase_name(int device) {
  return policy::to_string(static_cast<policy::Phase>(S().phase_now[static_cast<std::size_t>(device)].load()));
}

// The device of the calling thread's last tracked call: launches are attributed to it without a
// driver query per launch.
thread_local int t_last_device = 0;

int tracked_device() {
  t_last_device = device_index(current_device());
  return t_last_device;
}

Category category_for(AllocKind kind) {
  if (t_own_captures > 0 || S().global_captures.load(std::memory_order_relaxed) > 0) return Category::graph_pool;
  switch (kind) {
    case AllocKind::kStreamOrdered: return Category::async_pool;
    case AllocKind::kVmmHandle: return Category::vmm;
    case AllocKind::kPlain: break;
  }
  return Category::other;
}

void account_alloc(int device, Category c, std::uint64_t bytes) {
  CategoryStats& s = S().devices[static_cast<std::size_t>(device)].categories[index_of(c)];
  const std::int64_t live = s.live.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
  s.allocated.fetch_add(bytes, std::memory_order_relaxed);
  s.allocations.fetch_add(1, std::memory_order_relaxed);
  std::int64_t peak = s.peak.load(std::memory_order_relaxed);
  while (live > peak && !s.peak.compare_exchange_weak(peak, live)) {
  }
  if (live > peak) s.peak_ts_ns.store(trace_now_ns(), std::memory_order_relaxed);
}

void account_free(int device, Category c, std::uint64_t bytes) {
  CategoryStats& s = S().devices[static_cast<std::size_t>(device)].categories[index_of(c)];
  s.live.fetch_sub(static_cast<std::int64_t>(bytes));
  s.frees.fetch_add(1, std::memory_order_relaxed);
}

void note_capture_allocation(std::uint64_t bytes) {
  std::lock_guard<std::mutex> g(S().lock);
  const int tid = current_tid();
  ActiveCapture* target = nullptr;
  for (ActiveCapture& c : S().captures) {
    if (c.tid == tid) {
      target = &c;
      break;
    }
    if (!target && c.mode == 0) target = &c;
  }
  if (target) target->allocated += bytes;
}

// Records an object (allocation, exec, module) that holds device memory in `map`.
void record(LiveMap& map, std::uint64_t key, int device, Category c, std::uint64_t bytes) {
  LiveMap::accessor a;
  if (!map.insert(a, key)) {
    // The driver reused a key we still hold (a free we did not see): retire the old record first.
    account_free(a->second.device, a->second.category, a->second.bytes);
  }
  a->second = Live{bytes, device, c};
  account_alloc(device, c, bytes);
}

std::optional<Live> retire(LiveMap& map, std::uint64_t key) {
  LiveMap::accessor a;
  if (!map.find(a, key)) return std::nullopt;
  Live live = a->second;
  map.erase(a);
  account_free(live.device, live.category, live.bytes);
  return live;
}

template <typename Body>
void guarded(const char* what, Body&& body) {
  if (S().disabled.load(std::memory_order_relaxed)) return;
  try {
    ensure_started();
    body();
  } catch (const std::exception& e) {
    disable(fmt::format("internal error in {}: {}", what, e.what()).c_str());
  } catch (...) {
    disable(what);
  }
}

// Graph execs and modules: driver objects that hold device memory from creation to destruction.
// Returns the device charged.
int held_object_loaded(LiveMap& map, Category c, const char* cat, const char* name, const char* key_field,
                       std::uint64_t key, std::uint64_t bytes, const char* api) {
  const int device = tracked_device();
  see_device(device);
  record(map, key, device, c, bytes);
  std::string& e = event_head("i", cat, name);
  e += fmt::format(R"(,"s":"t","args":{{"api":"{}","{}":{},"bytes":{},"device":{}}}}})", api, key_field, hex_pointer(key),
                   bytes, device);
  trace().event(e);
  emit_counter(device, false);
  return device;
}

void held_object_released(LiveMap& map, const char* cat, const char* name, const char* key_field, std::uint64_t key,
                          const char* api) {
  std::optional<Live> live = retire(map, key);
  if (!live) return;
  std::string& e = event_head("i", cat, name);
  e += fmt::format(R"(,"s":"t","args":{{"api":"{}","{}":{},"bytes":{},"device":{}}}}})", api, key_field, hex_pointer(key),
                   live->bytes, live->device);
  trace().event(e);
  emit_counter(live->device, false);
}

std::string summary_json(const char* reason, bool from_signal = false) {
  std::string s = event_head("i", "summary", "summary");
  s += fmt::format(R"(,"s":"g","args":{{"schema_version":1,"library_version":"{}","exit":"{}","duration_us":{:.3f},"devices":[)",
                   KVREMAP_VERSION_STRING, reason, trace_now_us());
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
    // In a signal handler the lock may be held by the interrupted code: leave the list empty then.
    std::unique_lock<std::mutex> g(S().lock, std::defer_lock);
    if (from_signal ? g.try_lock() : (g.lock(), true)) {
      for (std::size_t i = 0; i < S().checkpoints.size(); ++i) {
        if (i) s += ',';
        s += S().checkpoints[i];
      }
    }
  }
  s += fmt::format(
      R"(],"counts":{{"captures":{},"graph_launches":{},"kernel_launches":{},"module_loads":{},"routed_lookups":{}}},"options":{}}}}})",
      S().capture_count.load(), S().graph_launches.load(), S().kernel_launches.load(), S().module_loads.load(),
      routed_lookups(), options_json());
  return s;
}

}  // namespace

bool tracking() { return !S().disabled.load(std::memory_order_relaxed) && !S().finished.load(std::memory_order_relaxed); }

void on_alloc(std::uint64_t ptr, std::uint64_t bytes, AllocKind kind, const char* api, void* return_address,
              int device_hint) {
  guarded("on_alloc", [&] {
    const int device = device_hint >= 0 ? (t_last_device = device_index(device_hint)) : tracked_device();
    see_device(device);
    const Category c = category_for(kind);
    record(kind == AllocKind::kVmmHandle ? S().handles : S().allocations, ptr, device, c, bytes);
    if (c == Category::graph_pool) note_capture_allocation(bytes);
    if (trace().is_open()) {
      EventLine e;
      e.raw(hot_prefix(HotKind::kAlloc)).micros(trace_now_ns());
      e.lit(R"(,"args":{"api":")").raw(api).lit(R"(","ptr":)").hex(ptr).lit(R"(,"bytes":)").u64(bytes);
      e.lit(R"(,"device":)").u64(static_cast<std::uint64_t>(device)).lit(R"(,"category":")").raw(policy::to_string(c));
      e.lit(R"(","phase":")").raw(current_phase_name(device)).lit("\"");
      if (bytes >= options().stack_min_bytes) {
        const std::string caller = caller_object(return_address);
        if (!caller.empty()) e.lit(R"(,"caller":)").quoted(caller);
      }
      e.lit("}}");
      emit(e);
    }
    emit_counter(device, false);
    feed_phase(device, policy::Alloc{ptr, bytes, c, api});
  });
}

bool on_free(std::uint64_t ptr, AllocKind kind, const char* api) {
  bool known = false;
  guarded("on_free", [&] {
    std::optional<Live> live = retire(kind == AllocKind::kVmmHandle ? S().handles : S().allocations, ptr);
    if (!live) return;
    known = true;
    if (trace().is_open()) {
      EventLine e;
      e.raw(hot_prefix(HotKind::kFree)).micros(trace_now_ns());
      e.lit(R"(,"args":{"api":")").raw(api).lit(R"(","ptr":)").hex(ptr).lit(R"(,"bytes":)").u64(live->bytes);
      e.lit(R"(,"device":)").u64(static_cast<std::uint64_t>(live->device)).lit(R"(,"category":")");
      e.raw(policy::to_string(live->category)).lit(R"("}})");
      emit(e);
    }
    emit_counter(live->device, false);  // frees never move the phase: no tracker call on this hot path
  });
  return known;
}

void on_memory_query(const char* api, std::size_t driver_free, std::size_t driver_total, std::size_t returned_free,
                     std::size_t returned_total) {
  guarded("on_memory_query", [&] {
    const int device = tracked_device();
    see_device(device);
    std::string args;
    {
      std::lock_guard<std::mutex> g(S().lock);
      const auto& tracker = S().phases[static_cast<std::size_t>(device)];
      args = fmt::format(
          R"({{"index":{},"api":"{}","device":{},"driver_free":{},"driver_total":{},"returned_free":{},"returned_total":{},"phase":"{}","ts":{:.3f}}})",
          S().checkpoints.size(), api, device, driver_free, driver_total, returned_free, returned_total,
          policy::to_string(tracker ? tracker->current() : policy::Phase::init), trace_now_us());
      S().checkpoints.push_back(args);
    }
    std::string& e = event_head("i", "checkpoint", "memory query");
    e += R"(,"s":"p","args":)";
    e += args;
    e += "}";
    trace().event(e, true);
    emit_counter(device, true);
    feed_phase(device, policy::MemoryQuery{driver_free, driver_total, returned_free, returned_total});
  });
}

void on_capture_begin(std::uint64_t stream, int mode) {
  guarded("on_capture_begin", [&] {
    const int device = tracked_device();
    std::uint64_t id = 0;
    {
      std::lock_guard<std::mutex> g(S().lock);
      id = S().next_capture_id++;
      S().captures.push_back(ActiveCapture{stream, id, mode, current_tid(), trace_now_us(), 0});
    }
    ++t_own_captures;
    if (mode == 0) S().global_captures.fetch_add(1);
    S().capture_count.fetch_add(1, std::memory_order_relaxed);
    const policy::CaptureMode m = mode == 0   ? policy::CaptureMode::global
                                  : mode == 1 ? policy::CaptureMode::per_thread
                                              : policy::CaptureMode::relaxed;
    feed_phase(device, policy::CaptureBegin{id, m});
  });
}

void on_capture_end(std::uint64_t stream, bool ok) {
  guarded("on_capture_end", [&] {
    const int device = tracked_device();
    std::optional<ActiveCapture> ended;
    {
      std::lock_guard<std::mutex> g(S().lock);
      for (auto it = S().captures.begin(); it != S().captures.end(); ++it) {
        if (it->stream == stream) {
          ended = *it;
          S().captures.erase(it);
          break;
        }
      }
    }
    if (!ended) return;
    if (ended->tid == current_tid() && t_own_captures > 0) --t_own_captures;
    if (ended->mode == 0) S().global_captures.fetch_sub(1);
    static constexpr const char* kModes[] = {"global", "thread_local", "relaxed"};
    std::string e = fmt::format(R"({{"ph":"X","cat":"capture","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"name":"capture",)",
                                g_pid, ended->tid, ended->begin_us, trace_now_us() - ended->begin_us);
    e += fmt::format(R"("args":{{"capture_id":{},"stream":{},"mode":"{}","status":"{}","allocated_bytes":{}}}}})",
                     ended->id, hex_pointer(stream), kModes[ended->mode >= 0 && ended->mode <= 2 ? ended->mode : 0],
                     ok ? "ok" : "invalidated", ended->allocated);
    trace().event(e, true);
    feed_phase(device, policy::CaptureEnd{ended->id, ok});
  });
}

bool free_device_bytes(std::uint64_t* free_bytes) {
  std::size_t f = 0, t = 0;
  if (!real_memory_info(&f, &t)) return false;
  *free_bytes = f;
  return true;
}

void on_graph_instantiate(std::uint64_t exec, std::uint64_t bytes, const char* api) {
  guarded("on_graph_instantiate", [&] {
    const int device = held_object_loaded(S().execs, Category::graph_exec, "graph", "graph instantiate", "exec", exec,
                                          bytes, api);
    feed_phase(device, policy::GraphInstantiate{bytes});
  });
}

void on_graph_exec_destroy(std::uint64_t exec, const char* api) {
  guarded("on_graph_exec_destroy",
          [&] { held_object_released(S().execs, "graph", "graph exec destroy", "exec", exec, api); });
}

void on_graph_launch() {
  S().graph_launches.fetch_add(1, std::memory_order_relaxed);
  if (S().all_serving.load(std::memory_order_relaxed)) return;
  guarded("on_graph_launch", [&] { feed_phase(tracked_device(), policy::GraphLaunch{}); });
}

void on_kernel_launch() {
  S().kernel_launches.fetch_add(1, std::memory_order_relaxed);
  if (S().all_serving.load(std::memory_order_relaxed)) return;
  S().pending_launches[static_cast<std::size_t>(t_last_device)].fetch_add(1, std::memory_order_relaxed);
}

void on_module_load(std::uint64_t handle, std::uint64_t bytes, const char* api) {
  guarded("on_module_load", [&] {
    S().module_loads.fetch_add(1, std::memory_order_relaxed);
    const int device =
        held_object_loaded(S().modules, Category::module, "module", "module load", "handle", handle, bytes, api);
    feed_phase(device, policy::ModuleLoad{bytes});
  });
}

void on_module_unload(std::uint64_t handle, const char* api) {
  guarded("on_module_unload",
          [&] { held_object_released(S().modules, "module", "module unload", "handle", handle, api); });
}

void finish(const char* reason) {
  if (S().finished.exchange(true)) return;
  if (!S().trace_opened.load() || S().disabled.load()) {
    trace().flush_all();
    return;
  }
  try {
    emit_all_counters();
    trace().close(summary_json(reason));
  } catch (...) {
  }
}

namespace {
// Best effort from a signal handler: nothing here may wait for a lock the interrupted code holds,
// so the trace writer only writes when every lock it needs is free; otherwise the trace stays a
// loadable file without a summary, as if the process had been killed.
void finish_from_signal(const char* reason) {
  // Inside one of kvremap's hooks on this thread, its locks may be held: no summary then.
  if (inside_hook() || S().finished.exchange(true)) return;
  if (!S().trace_opened.load() || S().disabled.load()) return;
  try {
    trace().try_close(summary_json(reason, true));
  } catch (...) {
  }
}
}  // namespace

void prepare_fork() { trace().prepare_fork(); }
void parent_after_fork() { trace().parent_after_fork(); }

void child_after_fork() {
  trace().child_after_fork();
  // The child starts afresh: its own trace (opened at its first CUDA call), nothing tracked.
  // The parent's state object is leaked on purpose: its mutex may have been held by another thread.
  state_slot() = new State;
  t_own_captures = 0;
  g_pid = getpid();
}

}  // namespace kvremap::interpose
