// The per-thread text cold trace events are built in, and the head every one of them starts with.
#include "interpose/trace/event_text.h"

#include <cstdint>

#include "interpose/base/process_id.h"
#include "interpose/trace/json.h"
#include "interpose/trace/trace_writer.h"

namespace kvremap::interpose::trace_events_detail {
namespace {
// Events are built in one reused per-thread string (no allocation per event) with plain appends.
// Not a thread_local std::string: the main thread's thread_local destructors run inside exit()
// before the atexit handler that writes the summary, which would then write into freed memory
// (heap corruption at every clean exit under PyTorch). The pointer is trivially destructible and
// stays readable after them; the owner frees the text when a thread ends, and a thread whose owner
// has already gone (exit) gets a fresh one, left to the exit.
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

std::string& event_head(std::string_view ph, std::string_view cat, std::string_view name) {
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

}  // namespace kvremap::interpose::trace_events_detail
