// The trace's KV events: each one's args object, field by field, in the order docs/trace-format.md gives.
#include "interpose/trace/kv_events.h"

#include <fmt/format.h>

#include <concepts>
#include <iterator>
#include <string>

#include "interpose/trace/event_text.h"
#include "interpose/trace/json.h"
#include "interpose/trace/metrics_file.h"
#include "interpose/trace/trace_writer.h"

namespace kvremap::interpose::trace_events {
namespace {

// One KV event in the calling thread's event text: the head, then the args object a field at a time.
class KvLine {
 public:
  explicit KvLine(std::string_view name) : e_(trace_events_detail::event_head("i", "kv", name)) {
    e_ += R"(,"s":"g","args":{)";
  }
  template <std::integral T>
  requires(!std::same_as<T, bool>) KvLine& number(std::string_view key, T value) {
    fmt::format_to(std::back_inserter(field(key)), "{}", value);
    return *this;
  }
  KvLine& boolean(std::string_view key, bool value) {
    field(key) += value ? "true" : "false";
    return *this;
  }
  // Any text: escaped, since reasons and paths can hold quotes, backslashes and control characters.
  KvLine& text(std::string_view key, std::string_view value) {
    append_json_string(field(key), value);
    return *this;
  }
  KvLine& pointer(std::string_view key, std::uint64_t value) {
    append_hex_pointer(field(key), value);
    return *this;
  }
  // {"kv":{"at_kv_end":N,"peak":N,"peak_above":N},…} in policy::kCategoryNames' order.
  KvLine& peaks(std::string_view key, const PostKvPeaks& by_category) {
    std::string& e = field(key);
    e += '{';
    for (std::size_t i = 0; i < by_category.size(); ++i) {
      const CategoryPeak& p = by_category[i];
      fmt::format_to(std::back_inserter(e), R"({}"{}":{{"at_kv_end":{},"peak":{},"peak_above":{}}})", i ? "," : "",
                     policy::kCategoryNames[i], p.at_start, p.peak, p.peak - p.at_start);
    }
    e += '}';
    return *this;
  }
  // Flushed at once: a commit that fails stops the process right after its events.
  void write() {
    e_ += "}}";
    trace().event(e_, true);
  }

 private:
  // `"key":`, after a comma unless it is the first field.
  std::string& field(std::string_view key) {
    if (!first_) e_ += ',';
    first_ = false;
    append_json_string(e_, key);
    e_ += ':';
    return e_;
  }

  std::string& e_;
  bool first_ = true;
};

// The three events that say what became of a profile on one device.
void profile_fate(std::string_view name, int device, std::string_view profile, std::string_view reason) {
  KvLine(name).number("device", device).text("profile", profile).text("reason", reason).write();
}

}  // namespace

void kv_arena_refused(int device, std::string_view reason) {
  KvLine("kv arena refused").number("device", device).text("reason", reason).write();
}

void kv_arena_reserved(const KvArenaReservedEvent& a) {
  KvLine("kv arena reserved")
      .number("device", a.device)
      .pointer("base", a.base)
      .number("reserved_bytes", a.reserved_bytes)
      .number("requested_bytes", a.requested_bytes)
      .number("chunk_bytes", a.chunk_bytes)
      .boolean("one_handle", a.one_handle)
      .number("granularity", a.granularity)
      .boolean("posix_fd_handles", a.posix_fd_handles)
      .boolean("rdma_capable", a.rdma_capable)
      .write();
}

void kv_deferred(const KvDeferredEvent& d) {
  KvLine("kv deferred")
      .number("device", d.device)
      .number("regions", d.regions)
      .number("tensor_bytes", d.tensor_bytes)
      .number("deferred_bytes", d.deferred_bytes)
      .number("scratch_bytes", d.scratch_bytes)
      .text("engine", policy::to_string(d.engine))
      .boolean("graphs_expected", d.graphs_expected)
      .text("commit_mode", policy::to_string(d.commit_mode))
      .write();
  metrics::on_deferred(d.device, d.deferred_bytes, d.scratch_bytes);
}

void kv_stands_aside(std::string_view api, std::string_view library) {
  KvLine("kv stands aside").text("api", api).text("library", library).write();
}

void kv_observe_only(std::string_view why) { KvLine("kv observe only").text("reason", why).write(); }

void kv_nothing_deferred(std::string_view reason) { KvLine("kv nothing deferred").text("reason", reason).write(); }

void kv_serving_port_open(std::string_view where) { KvLine("kv serving port open").text("where", where).write(); }

void kv_free_below_zero(int device, std::uint64_t short_bytes) {
  KvLine("kv free below zero").number("device", device).number("short_bytes", short_bytes).write();
}

void kv_serving_overflow(int device, std::string_view api, std::uint64_t address, std::uint64_t bytes,
                         std::uint64_t host_bytes, std::uint64_t frees_since_refusal,
                         std::uint64_t freed_bytes_since_refusal) {
  KvLine("kv serving overflow")
      .number("device", device)
      .text("api", api)
      .number("address", address)
      .number("bytes", bytes)
      .number("host_bytes", host_bytes)
      .number("frees_since_refusal", frees_since_refusal)
      .number("freed_bytes_since_refusal", freed_bytes_since_refusal)
      .write();
  metrics::on_overflow(device, bytes);
}

void kv_serving_peaks(int device, const PostKvPeaks& since_commit) {
  KvLine("kv serving peaks").number("device", device).peaks("since_commit", since_commit).write();
}

void kv_commit_plan(const KvCommitPlanEvent& p) {
  KvLine("kv commit plan")
      .number("device", p.device)
      .number("kv_bytes", p.kv_bytes)
      .number("device_bytes", p.device_bytes)
      .number("host_bytes", p.host_bytes)
      .number("tensors", p.tensors)
      .number("host_bytes_per_tensor", p.host_bytes_per_tensor)
      .number("granularity", p.granularity)
      .number("chunk_bytes", p.chunk_bytes)
      .number("device_free_bytes", p.device_free_bytes)
      .number("headroom_bytes", p.headroom_bytes)
      .text("headroom_source", p.headroom_source)
      .number("post_kv_transient_bytes", p.post_kv_transient_bytes)
      .number("margin_bytes", p.margin_bytes)
      .number("deficit_bytes", p.deficit_bytes)
      .text("verdict", policy::to_string(p.verdict))
      .write();
}

void kv_committed(const KvCommittedEvent& c) {
  KvLine("kv committed")
      .number("device", c.device)
      .text("trigger", policy::to_string(c.trigger))
      .text("call", c.call)
      .number("kv_bytes", c.kv_bytes)
      .number("device_bytes", c.device_bytes)
      .number("host_bytes", c.host_bytes)
      .number("tensors", c.tensors)
      .number("host_bytes_per_tensor", c.host_bytes_per_tensor)
      .number("granularity", c.granularity)
      .number("headroom_bytes", c.headroom_bytes)
      .number("margin_bytes", c.margin_bytes)
      .number("deficit_bytes", c.deficit_bytes)
      .boolean("scratch_released", c.scratch_released)
      .number("sizing_shift_bytes", c.sizing_shift_bytes)
      .text("same_start_flags", c.same_start_flags)
      .peaks("post_kv_peaks", c.post_kv_peaks)
      .write();
  metrics::on_committed(c.device, c.kv_bytes, c.device_bytes, c.host_bytes, c.headroom_bytes);
}

void kv_profile_written(int device, std::string_view path, std::uint64_t key_hash) {
  KvLine("kv profile written")
      .number("device", device)
      .text("path", path)
      .text("key_hash", fmt::format("{:016x}", key_hash))
      .write();
}

void kv_profile_ignored(int device, std::string_view profile, std::string_view problem) {
  profile_fate("kv profile ignored", device, profile, problem);
}

void kv_sizing_unchanged(int device, std::string_view profile, std::string_view reason) {
  profile_fate("kv sizing unchanged", device, profile, reason);
}

void kv_sizing_missed(int device, std::string_view profile, std::string_view what) {
  profile_fate("kv sizing missed", device, profile, what);
}

void kv_restart(int device, std::uint64_t deficit_bytes, int exit_status) {
  KvLine("kv restart")
      .number("device", device)
      .number("deficit_bytes", deficit_bytes)
      .number("exit_status", exit_status)
      .write();
}

void kv_sizing_adjusted(const KvSizingAdjustedEvent& s) {
  KvLine("kv sizing adjusted")
      .number("device", s.device)
      .number("query_index", s.query_index)
      .text("phase", s.phase)
      .number("driver_free", s.driver_free)
      .number("reported_free", s.reported_free)
      .number("shift_bytes", s.shift_bytes)
      .text("sizing", policy::to_string(s.sizing))
      .number("previous_margin_bytes", s.previous_margin_bytes)
      .number("previous_shift_bytes", s.previous_shift_bytes)
      .number("slack_bytes", s.slack_bytes)
      .number("target_kv_bytes", s.target_kv_bytes)
      .number("step_bytes", s.step_bytes)
      .text("profile", s.profile)
      .text("reason", s.reason)
      .write();
}

}  // namespace kvremap::interpose::trace_events
