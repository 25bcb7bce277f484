// The trace's memory events beside the hot allocation lines: phases, held driver objects, reclassification, captures, out-of-memory snapshots.
#include <fmt/format.h>

#include <string>

#include "interpose/trace/metrics_file.h"
#include "interpose/base/process_id.h"
#include "interpose/trace/event_text.h"
#include "interpose/trace/events.h"
#include "interpose/trace/json.h"
#include "interpose/trace/trace_writer.h"

namespace kvremap::interpose::trace_events {
namespace {
using trace_events_detail::event_head;
}  // namespace

void phase_changed(int device, policy::Phase from, policy::Phase to, std::string_view reason) {
  std::string& e = event_head("i", "phase", fmt::format("phase: {}", policy::to_string(to)));
  e += fmt::format(R"(,"s":"g","args":{{"device":{},"phase":"{}","previous":"{}","reason":)", device,
                   policy::to_string(to), policy::to_string(from));
  append_json_string(e, reason);
  e += "}}";
  trace().event(e, true);
  metrics::on_phase(device, to);
}

namespace {
void held_object(std::string_view name, HeldObject kind, std::string_view api, std::uint64_t key, std::uint64_t bytes,
                 int device) {
  const bool exec = kind == HeldObject::graph_exec;
  std::string& e = event_head("i", exec ? "graph" : "module", name);
  e += R"(,"s":"t","args":{"api":)";
  append_json_string(e, api);
  e += exec ? R"(,"exec":)" : R"(,"handle":)";
  append_hex_pointer(e, key);
  e += fmt::format(R"(,"bytes":{},"device":{}}}}})", bytes, device);
  trace().event(e);
}
}  // namespace

void held_object_created(HeldObject kind, std::string_view api, std::uint64_t key, std::uint64_t bytes, int device) {
  held_object(kind == HeldObject::graph_exec ? "graph instantiate" : "module load", kind, api, key, bytes, device);
}

void held_object_destroyed(HeldObject kind, std::string_view api, std::uint64_t key, std::uint64_t bytes, int device) {
  held_object(kind == HeldObject::graph_exec ? "graph exec destroy" : "module unload", kind, api, key, bytes, device);
}

void reclassified(std::uint64_t ptr, std::uint64_t bytes, int device, policy::Category from, policy::Category to,
                  policy::Phase phase) {
  for (const bool freeing : {true, false}) {
    std::string& e = event_head("i", "alloc", freeing ? "free" : "alloc");
    e += R"(,"s":"t","args":{"api":"kvremap reclassify","ptr":)";
    append_hex_pointer(e, ptr);
    e += fmt::format(R"(,"bytes":{},"device":{},"category":"{}")", bytes, device,
                     policy::to_string(freeing ? from : to));
    if (!freeing) e += fmt::format(R"(,"phase":"{}")", policy::to_string(phase));
    e += "}}";
    trace().event(e);
  }
}

void capture_ended(const CaptureWindow& w) {
  static constexpr const char* kModes[] = {"global", "thread_local", "relaxed"};
  std::string args = fmt::format(R"("args":{{"capture_id":{},"stream":)", w.id);
  append_hex_pointer(args, w.stream);
  args += fmt::format(R"(,"mode":"{}","status":"{}","allocated_bytes":{}}}}})",
                      kModes[w.mode >= 0 && w.mode <= 2 ? w.mode : 0], w.ok ? "ok" : "invalidated", w.allocated_bytes);
  std::string e = fmt::format(R"({{"ph":"{}","cat":"capture",)", w.interleaved ? "b" : "X");
  if (w.interleaved) e += fmt::format(R"("id":"{:#x}",)", w.id);
  e += fmt::format(R"("pid":{},"tid":{},"ts":)", process_id(), w.tid);
  append_us_from_ns(e, w.begin_ns);
  if (!w.interleaved) {
    e += R"(,"dur":)";
    append_us_from_ns(e, w.end_ns - w.begin_ns);
  }
  e += R"(,"name":"capture",)";
  e += args;
  if (!w.interleaved) {
    trace().event(e, true);
    return;
  }
  trace().event(e);
  std::string end = fmt::format(R"({{"ph":"e","cat":"capture","id":"{:#x}","pid":{},"tid":{},"ts":)", w.id,
                                process_id(), w.tid);
  append_us_from_ns(end, w.end_ns);
  end += R"(,"name":"capture","args":{}})";
  trace().event(end, true);
}

void oom_snapshot(const OomSnapshot& s) {
  std::string& e = event_head("i", "oom", "oom snapshot");
  e += fmt::format(R"(,"s":"p","args":{{"device":{},"phase":"{}","api":)", s.device, policy::to_string(s.phase));
  append_json_string(e, s.api);
  e += fmt::format(R"(,"requested_bytes":{})", s.requested_bytes);
  if (!s.caller.empty()) {
    e += R"(,"caller":)";
    append_json_string(e, s.caller);
  }
  if (s.device_free_bytes) e += fmt::format(R"(,"device_free_bytes":{})", *s.device_free_bytes);
  e += R"(,"live_bytes":{)";
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < kCategoryCount; ++i) {
    total += s.live_bytes[i];
    e += fmt::format(R"({}"{}":{})", i ? "," : "", policy::kCategoryNames[i], s.live_bytes[i]);
  }
  e += fmt::format(R"(}},"live_total_bytes":{},"top_callers":[)", total);
  std::uint64_t named = 0;
  for (std::size_t i = 0; i < s.top_callers.size(); ++i) {
    const CallerBytes& c = s.top_callers[i];
    e += i ? R"(,{"caller":)" : R"({"caller":)";
    append_json_string(e, c.caller.empty() ? std::string_view("unknown") : std::string_view(c.caller));
    e += fmt::format(R"(,"bytes":{},"allocations":{}}})", c.bytes, c.allocations);
    named += c.bytes;
  }
  e += fmt::format(R"(],"other_bytes":{}}}}})", total > named ? total - named : 0);
  trace().event(e, true);
}

}  // namespace kvremap::interpose::trace_events
