// The trace's process events: the file and its header, option errors, devices, tracking's end and the summary.
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "interpose/base/library.h"
#include "interpose/base/process_cmdline.h"
#include "interpose/base/process_id.h"
#include "interpose/trace/event_text.h"
#include "interpose/trace/events.h"
#include "interpose/trace/hot_format.h"
#include "interpose/trace/json.h"
#include "interpose/trace/trace_writer.h"
#include "interpose/version_number.h"
#include "policy/printable.h"
#include "policy/redact.h"

namespace kvremap::interpose::trace_events {
namespace {
using trace_events_detail::event_head;

// Names tried for one process's trace file before tracing gives up (each exec of one pid takes one).
constexpr int kMaxTraceNameTries = 1000;

// The command line as one string, arguments separated by spaces, with every secret redacted
// (policy/redact.h): a trace is a file others may be shown, an API key or token must never reach it. A
// process title (setproctitle clears the whole argv area, so /proc reads it as the title and empty arguments,
// or pads it with spaces) is the title alone: no run of separators or padding after it.
std::string joined_redacted(const std::vector<std::string>& argv) {
  const std::vector<std::string> redacted = policy::redact_command_line(argv);
  std::size_t used = redacted.size();
  while (used > 1 && redacted[used - 1].empty()) --used;
  std::string joined;
  for (std::size_t i = 0; i < used; ++i) {
    if (i > 0) joined += ' ';
    joined += redacted[i];
  }
  while (!joined.empty() && joined.back() == ' ') joined.pop_back();
  return joined;
}

// The options in force, as the header and the summary record them.
void append_options(std::string& out) {
  out += '{';
  bool first = true;
  for (const auto& [name, value] : policy::options_in_force(options())) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, name);
    out += ':';
    append_json_string(out, value);
  }
  out += '}';
}

// The header event, the file's second line (readers need it there, before any other event).
std::string header_event(const char* host, const std::string& cmdline, const std::string& engine_cmdline) {
  std::string header = event_head("M", "kvremap", "kvremap_trace");
  header += fmt::format(R"(,"args":{{"schema_version":{},"library_version":"{}","hostname":)",
                        policy::kTraceSchemaVersion, KVREMAP_VERSION_STRING);
  append_json_string(header, host);
  header += fmt::format(R"(,"pid":{},"ppid":{},"cmdline":)", process_id(), getppid());
  append_json_string(header, cmdline);
  header += R"(,"engine_cmdline":)";
  append_json_string(header, engine_cmdline);
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  header += R"(,"start_unix_ns":)";
  append_uint(header, static_cast<std::uint64_t>(real.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(real.tv_nsec));
  header += R"(,"options":)";
  append_options(header);
  header += "}}";
  return header;
}

void write_option_error(const policy::OptionProblem& p) {
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

void append_memory_query(std::string& out, const MemoryQuery& q) {
  out += fmt::format(R"({{"index":{},"api":)", q.index);
  append_json_string(out, q.api);
  out += fmt::format(
      R"(,"device":{},"driver_free":{},"driver_total":{},"returned_free":{},"returned_total":{},"phase":"{}","ts":)",
      q.device, q.driver_free, q.driver_total, q.returned_free, q.returned_total, policy::to_string(q.phase));
  append_us_from_ns(out, q.ts_ns);
  out += '}';
}
}  // namespace

void open_trace() {
  if (!options().trace) {
    trace().forget_early_events();
    return;
  }
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  // kvremap-HOST-PID.json, or where a file of that name exists (the image before an exec, which had
  // this pid; a process of an earlier run that had it), the first free kvremap-HOST-PID.N.json, N >= 2.
  std::string path = fmt::format("{}/kvremap-{}-{}.json", options().trace_dir, host, process_id());
  std::string first = fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":{},"ts":0,"args":{{"name":)",
                                  process_id(), current_tid());
  const std::string cmdline = joined_redacted(own_command_line());
  append_json_string(first, fmt::format("kvremap: {} (pid {})", cmdline.substr(0, cmdline.find(' ')), process_id()));
  first += "}}";
  const std::string header = header_event(host, cmdline, joined_redacted(engine_command_line()));
  trace().set_hot_formatter(format_hot_record);
  bool opened = trace().open(path, first, header);
  for (int n = 2; !opened && errno == EEXIST && n <= kMaxTraceNameTries; ++n) {
    path = fmt::format("{}/kvremap-{}-{}.{}.json", options().trace_dir, host, process_id(), n);
    opened = trace().open(path, first, header);
  }
  if (!opened) {
    const int error = errno;
    trace().forget_early_events();
    // Advice only where the directory itself is the problem; a full disk or a file-size limit is not.
    const bool directory_wrong = error == ENOENT || error == ENOTDIR || error == EACCES || error == EPERM ||
                                 error == EROFS || error == ENAMETOOLONG || error == ELOOP;
    log().warn("cannot create trace file {} (KVREMAP_TRACE_DIR): {}; tracing off (no file is left), tracking goes on{}",
               policy::printable(path), std::strerror(error),
               directory_wrong ? "; KVREMAP_TRACE_DIR must name an existing directory this user can write" : "");
    return;
  }
  for (const policy::OptionProblem& p : option_problems()) write_option_error(p);
  log().info("trace: {}", path);
}

void device_seen(int device, std::uint64_t total_bytes) {
  std::string& e = event_head("M", "kvremap", "kvremap_device");
  e += fmt::format(R"(,"args":{{"device":{},"total_bytes":{}}}}})", device, total_bytes);
  trace().event(e);
}

void tracking_disabled(std::string_view reason) {
  std::string& e = event_head("i", "kvremap", "tracking disabled");
  e += R"(,"s":"g","args":{"reason":)";
  append_json_string(e, reason);
  e += "}}";
  trace().event(e, true);
}

void memory_query(const MemoryQuery& query) {
  std::string& e = event_head("i", "checkpoint", "memory query");
  e += R"(,"s":"p","args":)";
  append_memory_query(e, query);
  e += "}";
  trace().event(e, true);
}

std::string summary(const Summary& s) {
  std::string out = event_head("i", "summary", "summary");
  out += fmt::format(R"(,"s":"g","args":{{"schema_version":{},"library_version":"{}","exit":"{}","duration_us":)",
                     policy::kTraceSchemaVersion, KVREMAP_VERSION_STRING, s.exit);
  append_us_from_ns(out, trace_now_ns());
  out += R"(,"devices":[)";
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    const DeviceSummary& dev = s.devices[d];
    if (d) out += ',';
    out += fmt::format(R"({{"device":{},"total_bytes":{},"categories":{{)", dev.device, dev.total_bytes);
    for (std::size_t i = 0; i < kCategoryCount; ++i) {
      const CategorySummary& c = dev.categories[i];
      if (i) out += ',';
      out += fmt::format(R"("{}":{{"live_bytes":{},"peak_bytes":{},"peak_ts":)", policy::kCategoryNames[i],
                         c.live_bytes, c.peak_bytes);
      append_us_from_ns(out, c.peak_ts_ns);
      out += fmt::format(R"(,"allocated_bytes":{},"allocations":{},"frees":{}}})", c.allocated_bytes, c.allocations,
                         c.frees);
    }
    out += "}}";
  }
  out += R"(],"checkpoints":[)";
  for (std::size_t i = 0; i < s.checkpoints.size(); ++i) {
    if (i) out += ',';
    append_memory_query(out, s.checkpoints[i]);
  }
  out += fmt::format(
      R"(],"counts":{{"captures":{},"graph_launches":{},"kernel_launches":{},"module_loads":{},"routed_lookups":{},"hooks_in_flight":{}}},"options":)",
      s.captures, s.graph_launches, s.kernel_launches, s.module_loads, s.routed_lookups, s.hooks_in_flight);
  append_options(out);
  out += "}}";
  return out;
}

}  // namespace kvremap::interpose::trace_events
