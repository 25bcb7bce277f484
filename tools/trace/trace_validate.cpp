// Schema conformance checks on the raw events of a trace: required fields, types, fixed value sets, nesting.
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/trace/event_validator.h"
#include "tools/trace/json_access.h"
#include "tools/trace/trace_reader.h"

namespace kvremap::trace {

using detail::member;
using detail::string_at;
using nlohmann::json;

namespace {

enum class Kind {
  unsigned_integer,  // sizes, devices, ids: JSON integers >= 0
  integer,
  number,
  string,
  object,
  array,
  category,  // a string from kCategories
  phase,     // a string from kPhases
  capture_mode,
  capture_status,
};

struct Field {
  std::string_view name;
  Kind kind;
  bool required = true;
};

constexpr std::string_view kSummaryCountNames[] = {"captures", "graph_launches", "kernel_launches", "module_loads"};
constexpr std::string_view kCategoryStatNames[] = {"live_bytes", "peak_bytes", "allocated_bytes", "allocations",
                                                   "frees"};

bool one_of(std::string_view value, std::initializer_list<std::string_view> allowed) {
  for (std::string_view candidate : allowed) {
    if (candidate == value) return true;
  }
  return false;
}

std::string quoted_value(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMaxQuoted = 40;
  return text.size() > kMaxQuoted ? text.substr(0, kMaxQuoted) + "..." : text;
}

// Collects problems for one event; every message is prefixed with the event's kind so a reader of
// the output sees which record is wrong without opening the file.
class EventChecker {
 public:
  EventChecker(std::vector<std::string>& problems, const std::string& prefix, std::string_view suffix)
      : problems_(problems), prefix_(prefix), suffix_(suffix) {}

  // Names and values come from the file: control characters in them become '?' so that every
  // problem stays one line.
  void problem(const std::string& what) {
    std::string line = prefix_ + what + std::string(suffix_);
    for (char& c : line)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    problems_.push_back(std::move(line));
  }

  // Checks `fields` of `object`, naming them as "<path>.<field>" in messages.
  void check(const json& object, std::string_view path, std::initializer_list<Field> fields) {
    for (const Field& field : fields) check_field(object, path, field);
  }

  void check_field(const json& object, std::string_view path, const Field& field) {
    const std::string full_name =
        path.empty() ? std::string(field.name) : std::string(path) + "." + std::string(field.name);
    const json* value = member(object, field.name);
    if (value == nullptr) {
      if (field.required) problem("missing " + full_name);
      return;
    }
    const std::string expected = describe_mismatch(*value, field.kind);
    if (!expected.empty()) problem(full_name + ": expected " + expected + ", found " + quoted_value(*value));
  }

 private:
  // An empty result means the value fits the kind.
  static std::string describe_mismatch(const json& value, Kind kind) {
    switch (kind) {
      case Kind::unsigned_integer:
        return detail::is_non_negative_integer(value) ? "" : "a non-negative integer";
      case Kind::integer:
        return value.is_number_integer() ? "" : "an integer";
      case Kind::number:
        return value.is_number() ? "" : "a number";
      case Kind::string:
        return value.is_string() ? "" : "a string";
      case Kind::object:
        return value.is_object() ? "" : "an object";
      case Kind::array:
        return value.is_array() ? "" : "an array";
      case Kind::category:
        return value.is_string() && is_known_category(value.get<std::string>())
                   ? ""
                   : "one of kv, graph_pool, graph_exec, module, async_pool, vmm, other";
      case Kind::phase:
        return value.is_string() && is_known_phase(value.get<std::string>())
                   ? ""
                   : "one of init, loading, profiling, kv_allocation, post_kv_warmup, capture, serving";
      case Kind::capture_mode:
        return value.is_string() && one_of(value.get<std::string>(), {"global", "thread_local", "relaxed"})
                   ? ""
                   : "one of global, thread_local, relaxed";
      case Kind::capture_status:
        return value.is_string() && one_of(value.get<std::string>(), {"ok", "invalidated", "failed"})
                   ? ""
                   : "one of ok, invalidated, failed";
    }
    return "";
  }

  std::vector<std::string>& problems_;
  const std::string& prefix_;
  std::string_view suffix_;
};

const std::initializer_list<Field> kCheckpointFields = {
    {"index", Kind::unsigned_integer},          {"api", Kind::string},
    {"device", Kind::unsigned_integer},         {"driver_free", Kind::unsigned_integer},
    {"driver_total", Kind::unsigned_integer},   {"returned_free", Kind::unsigned_integer},
    {"returned_total", Kind::unsigned_integer}, {"phase", Kind::phase},
};

void check_expected_ph(EventChecker& checker, const json& event, std::string_view expected) {
  const std::string ph = string_at(event, "ph");
  if (ph != expected) checker.problem("ph: expected \"" + std::string(expected) + "\", found \"" + ph + "\"");
}

void check_summary(EventChecker& checker, const json& args, int header_schema) {
  checker.check(args, "args",
                {{"schema_version", Kind::integer},
                 {"library_version", Kind::string},
                 {"exit", Kind::string},
                 {"duration_us", Kind::number},
                 {"devices", Kind::array},
                 {"checkpoints", Kind::array},
                 {"counts", Kind::object},
                 {"options", Kind::object}});
  if (const json* version = member(args, "schema_version");
      version != nullptr && version->is_number_integer() && version->get<std::int64_t>() != header_schema) {
    checker.problem("args.schema_version: " + version->dump() + " differs from the header's " +
                    std::to_string(header_schema));
  }
  if (const json* devices = member(args, "devices"); devices != nullptr && devices->is_array()) {
    for (std::size_t i = 0; i < devices->size(); ++i) {
      const json& device = (*devices)[i];
      const std::string path = "args.devices[" + std::to_string(i) + "]";
      checker.check(
          device, path,
          {{"device", Kind::unsigned_integer}, {"total_bytes", Kind::unsigned_integer}, {"categories", Kind::object}});
      const json* categories = member(device, "categories");
      if (categories == nullptr || !categories->is_object()) continue;
      for (std::string_view category : kCategories) {
        const std::string category_path = path + ".categories";
        checker.check_field(*categories, category_path, {category, Kind::object});
        const json* stats = member(*categories, category);
        if (stats == nullptr || !stats->is_object()) continue;
        const std::string stats_path = category_path + "." + std::string(category);
        for (std::string_view stat : kCategoryStatNames)
          checker.check_field(*stats, stats_path, {stat, Kind::unsigned_integer});
        checker.check_field(*stats, stats_path, {"peak_ts", Kind::number});
      }
      for (const auto& [name, unused] : categories->items()) {
        if (!is_known_category(name)) checker.problem(path + ".categories: unknown category \"" + name + "\"");
      }
    }
  }
  if (const json* checkpoints = member(args, "checkpoints"); checkpoints != nullptr && checkpoints->is_array()) {
    for (std::size_t i = 0; i < checkpoints->size(); ++i) {
      checker.check((*checkpoints)[i], "args.checkpoints[" + std::to_string(i) + "]", kCheckpointFields);
    }
  }
  if (const json* counts = member(args, "counts"); counts != nullptr && counts->is_object()) {
    for (std::string_view count : kSummaryCountNames)
      checker.check_field(*counts, "args.counts", {count, Kind::unsigned_integer});
  }
}

// An out-of-memory snapshot: the failing request, the live bytes by category and the top callers.
void check_oom_snapshot(EventChecker& checker, const json& args) {
  checker.check(args, "args",
                {{"device", Kind::unsigned_integer},
                 {"phase", Kind::phase},
                 {"api", Kind::string},
                 {"requested_bytes", Kind::unsigned_integer},
                 {"caller", Kind::string, false},
                 {"device_free_bytes", Kind::unsigned_integer, false},
                 {"live_bytes", Kind::object},
                 {"live_total_bytes", Kind::unsigned_integer},
                 {"top_callers", Kind::array},
                 {"other_bytes", Kind::unsigned_integer}});
  if (const json* live = member(args, "live_bytes"); live != nullptr && live->is_object()) {
    for (std::string_view category : kCategories) checker.check_field(*live, "args.live_bytes", {category, Kind::unsigned_integer});
    for (const auto& [name, unused] : live->items())
      if (!is_known_category(name)) checker.problem("args.live_bytes: unknown category \"" + name + "\"");
  }
  if (const json* callers = member(args, "top_callers"); callers != nullptr && callers->is_array()) {
    for (std::size_t i = 0; i < callers->size(); ++i)
      checker.check((*callers)[i], "args.top_callers[" + std::to_string(i) + "]",
                    {{"caller", Kind::string}, {"bytes", Kind::unsigned_integer}, {"allocations", Kind::unsigned_integer}});
  }
}

// Checks the fields of one event whose cat/name this schema defines; others only need the common fields.
void check_known_event(EventChecker& checker, const json& event, int header_schema) {
  const std::string ph = string_at(event, "ph");
  const std::string cat = string_at(event, "cat");
  const std::string name = string_at(event, "name");
  const json* args_member = member(event, "args");
  const json& args = detail::args_of(event);
  const bool defined = (ph == "M" && one_of(name, {"process_name", "kvremap_trace", "kvremap_device"})) ||
                       (cat == "alloc" && one_of(name, {"alloc", "free"})) || cat == "memory" ||
                       (cat == "checkpoint" && name == "memory query") ||
                       (cat == "phase" && name.starts_with("phase: ")) || (cat == "capture" && name == "capture") ||
                       (cat == "graph" && one_of(name, {"graph instantiate", "graph exec destroy"})) ||
                       (cat == "module" && one_of(name, {"module load", "module unload"})) ||
                       (cat == "kvremap" && one_of(name, {"tracking disabled", "option error", "trace stopped"})) ||
                       (cat == "oom" && name == "oom snapshot") ||
                       (cat == "summary" && name == "summary");
  if (!defined) return;
  if (args_member == nullptr || !args_member->is_object()) {
    checker.problem(args_member == nullptr ? "missing args"
                                           : "args: expected an object, found " + quoted_value(*args_member));
    return;
  }
  if (ph == "M") {
    if (name == "process_name") checker.check(args, "args", {{"name", Kind::string}});
    if (name == "kvremap_trace") {
      checker.check(args, "args",
                    {{"schema_version", Kind::integer},
                     {"library_version", Kind::string},
                     {"hostname", Kind::string},
                     {"pid", Kind::integer},
                     {"ppid", Kind::integer},
                     {"cmdline", Kind::string},
                     {"engine_cmdline", Kind::string, false},
                     {"start_unix_ns", Kind::integer},
                     {"options", Kind::object}});
    }
    if (name == "kvremap_device") {
      checker.check(args, "args", {{"device", Kind::unsigned_integer}, {"total_bytes", Kind::unsigned_integer}});
    }
    return;
  }
  if (cat == "alloc") {
    if (name == "alloc" && ph == "X" && header_schema >= 2) {
      // An allocation lifetime: the free's time is ts + dur, its api free_api.
      checker.check(event, "", {{"dur", Kind::number}});
      checker.check(args, "args", {{"free_api", Kind::string}});
    } else {
      check_expected_ph(checker, event, "i");
    }
    checker.check(args, "args",
                  {{"api", Kind::string},
                   {"ptr", Kind::string},
                   {"bytes", Kind::unsigned_integer},
                   {"device", Kind::unsigned_integer},
                   {"category", Kind::category}});
    if (name == "alloc") checker.check(args, "args", {{"phase", Kind::phase}, {"caller", Kind::string, false}});
  } else if (cat == "memory") {
    check_expected_ph(checker, event, "C");
    if (name.starts_with("device ") && name.ends_with(" kv bytes")) {
      // Where the KV cache kvremap placed lies: its parts add up to its size.
      checker.check(args, "args",
                    {{"reserved", Kind::unsigned_integer},
                     {"device", Kind::unsigned_integer},
                     {"scratch", Kind::unsigned_integer},
                     {"host", Kind::unsigned_integer}});
      const auto part = [&args](const char* key) {
        const json* v = member(args, key);
        return v != nullptr && v->is_number_unsigned() ? v->get<std::uint64_t>() : std::uint64_t{0};
      };
      if (part("device") + part("scratch") + part("host") != part("reserved"))
        checker.problem("args: device + scratch + host must equal reserved");
      return;
    }
    if (!(name.starts_with("device ") && name.ends_with(" bytes"))) {
      checker.problem("name: expected \"device <N> bytes\" or \"device <N> kv bytes\", found \"" + name + "\"");
    }
    for (std::string_view category : kCategories) checker.check_field(args, "args", {category, Kind::unsigned_integer});
  } else if (cat == "checkpoint") {
    check_expected_ph(checker, event, "i");
    checker.check(args, "args", kCheckpointFields);
  } else if (cat == "phase") {
    check_expected_ph(checker, event, "i");
    checker.check(args, "args", {{"phase", Kind::phase}, {"previous", Kind::phase}, {"reason", Kind::string}});
    if (const json* phase = member(args, "phase");
        phase != nullptr && phase->is_string() && name != "phase: " + phase->get<std::string>()) {
      checker.problem("name \"" + name + "\" does not match args.phase \"" + phase->get<std::string>() + "\"");
    }
  } else if (cat == "capture") {
    // A complete event, or (a window that would not nest on its track) an async "b"/"e" pair.
    if (ph == "b" || ph == "e") {
      checker.check(event, "", {{"id", Kind::string}});
      if (ph == "e") return;
    } else {
      check_expected_ph(checker, event, "X");
      checker.check(event, "", {{"dur", Kind::number}});
    }
    checker.check(args, "args",
                  {{"capture_id", Kind::unsigned_integer},
                   {"stream", Kind::string},
                   {"mode", Kind::capture_mode},
                   {"status", Kind::capture_status},
                   {"allocated_bytes", Kind::unsigned_integer}});
  } else if (cat == "graph") {
    check_expected_ph(checker, event, "i");
    checker.check(args, "args",
                  {{"api", Kind::string},
                   {"exec", Kind::string},
                   {"bytes", Kind::unsigned_integer},
                   {"device", Kind::unsigned_integer}});
  } else if (cat == "module") {
    check_expected_ph(checker, event, "i");
    checker.check(args, "args",
                  {{"api", Kind::string},
                   {"handle", Kind::string},
                   {"bytes", Kind::unsigned_integer},
                   {"device", Kind::unsigned_integer}});
  } else if (cat == "kvremap") {
    check_expected_ph(checker, event, "i");
    if (name == "tracking disabled") checker.check(args, "args", {{"reason", Kind::string}});
    if (name == "trace stopped") checker.check(args, "args", {{"error", Kind::string}});
    if (name == "option error") {
      checker.check(args, "args", {{"variable", Kind::string}, {"value", Kind::string}, {"message", Kind::string}});
    }
  } else if (cat == "summary") {
    check_expected_ph(checker, event, "i");
    check_summary(checker, args, header_schema);
  } else if (cat == "oom") {
    check_expected_ph(checker, event, "i");
    check_oom_snapshot(checker, args);
  }
}

}  // namespace

namespace detail {

bool hot_line_conforms(const ScannedEvent& event, int header_schema) {
  // scan_hot_line() saw ph, cat and name as strings, tid as an integer, ts (and dur) as numbers and
  // args as an object of unescaped strings and integers of at most 19 digits (each a JSON unsigned).
  if (!event.has_pid) return false;
  const auto string_arg = [&event](std::string_view key) {
    for (std::size_t i = 0; i < event.arg_count; ++i)
      if (event.args[i].key == key) return event.args[i].is_string ? 1 : 0;
    return -1;  // absent
  };
  const auto integer_arg = [&event](std::string_view key) {
    for (std::size_t i = 0; i < event.arg_count; ++i)
      if (event.args[i].key == key) return !event.args[i].is_string;
    return false;
  };
  if (event.cat == "memory") {
    // is_hot(): ph "C" and the name "device <N> bytes".
    for (std::string_view category : kCategories)
      if (!integer_arg(category)) return false;
    return true;
  }
  const bool lifetime = event.ph == "X";
  if (lifetime && !(header_schema >= 2 && event.has_dur && string_arg("free_api") == 1)) return false;
  if (string_arg("api") != 1 || string_arg("ptr") != 1 || !integer_arg("bytes") || !integer_arg("device") ||
      string_arg("category") != 1 || !is_known_category(event.string_arg("category")))
    return false;
  if (event.name == "alloc") {
    if (string_arg("phase") != 1 || !is_known_phase(event.string_arg("phase")) || string_arg("caller") == 0)
      return false;
  }
  return true;
}

void EventValidator::flush_summary_not_last() {
  if (!summary_not_last_.empty()) problems_.push_back(std::exchange(summary_not_last_, std::string()));
}

void EventValidator::add(const json& event, std::size_t index, std::size_t line, int header_schema) {
  flush_summary_not_last();
  const std::string name = string_at(event, "name");
  const std::string prefix =
      source_ + ": event " + std::to_string(index) + ": " + (name.empty() ? std::string() : name + ": ");
  const std::string suffix = " (line " + std::to_string(line) + ")";
  EventChecker checker(problems_, prefix, suffix);
  if (!event.is_object()) {
    checker.problem("expected a JSON object, found " + quoted_value(event));
    return;
  }
  checker.check(event, "",
                {{"ph", Kind::string}, {"name", Kind::string}, {"pid", Kind::integer}, {"tid", Kind::integer},
                 {"ts", Kind::number}});
  check_known_event(checker, event, header_schema);
  const bool is_header = string_at(event, "ph") == "M" && name == "kvremap_trace";
  if (is_header && header_seen_) checker.problem("a second kvremap_trace metadata event");
  header_seen_ = header_seen_ || is_header;
  if (string_at(event, "cat") == "summary" && name == "summary") {
    summary_not_last_ = prefix + "the summary is not the last event" + suffix;
  }
  const json* ts = member(event, "ts");
  const json* dur = member(event, "dur");
  if (string_at(event, "ph") != "X" || ts == nullptr || dur == nullptr || !ts->is_number() || !dur->is_number())
    return;
  const std::int64_t begin = detail::ns_of_us(ts->get<double>());
  record_slice({detail::int_at(event, "pid"), detail::int_at(event, "tid")}, name, begin,
               begin + detail::ns_of_us(dur->get<double>()), index, line);
}

void EventValidator::add_conforming_hot(const ScannedEvent& event, std::size_t index, std::size_t line) {
  flush_summary_not_last();
  if (event.ph != "X") return;
  const std::int64_t begin = detail::ns_of_us(event.ts_us);
  record_slice({event.pid, event.tid}, event.name, begin, begin + detail::ns_of_us(event.dur_us), index, line);
}

void EventValidator::record_slice(Track track, std::string_view name, std::int64_t begin_ns, std::int64_t end_ns,
                                  std::size_t index, std::size_t line) {
  auto known = name_ids_.find(name);
  if (known == name_ids_.end()) {
    known = name_ids_.emplace(std::string(name), names_.size()).first;
    names_.emplace_back(name);
  }
  if (last_slices_ == nullptr || track != last_track_) {
    last_slices_ = &tracks_[track];  // map nodes stay where they are
    last_track_ = track;
  }
  last_slices_->push_back({begin_ns, end_ns, index, line, known->second});
}

// Complete events on one thread's track must nest, or Perfetto cannot place them: a slice that
// starts inside another must end inside it too.
void EventValidator::finish() {
  for (auto& [track, slices] : tracks_) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;  // parents first
    });
    std::vector<const Slice*> open;
    for (const Slice& slice : slices) {
      while (!open.empty() && open.back()->end_ns <= slice.begin_ns) open.pop_back();
      if (!open.empty() && slice.end_ns > open.back()->end_ns) {
        const Slice& parent = *open.back();
        problems_.push_back(source_ + ": event " + std::to_string(slice.index) + ": " + names_[slice.name] +
                            ": overlaps event " + std::to_string(parent.index) + " (" + names_[parent.name] +
                            ") on thread " + std::to_string(track.second) + " without nesting inside it (line " +
                            std::to_string(slice.line) + ")");
        continue;
      }
      open.push_back(&slice);
    }
  }
  tracks_.clear();
  last_slices_ = nullptr;
}

}  // namespace detail

std::vector<std::string> validate(const Trace& trace) {
  if (trace.events.size() != trace.event_count) {
    return {trace.source + ": cannot validate: the trace was read without its raw events"};
  }
  detail::EventValidator validator(trace.source);
  for (std::size_t index = 0; index < trace.events.size(); ++index) {
    try {
      validator.add(trace.events[index], index, trace.event_lines[index], trace.header.schema_version);
    } catch (const json::exception& error) {
      throw TraceError(trace.source, trace.event_lines[index], "cannot check the event: " + detail::error_text(error));
    }
  }
  validator.finish();
  return validator.take_problems();
}

}  // namespace kvremap::trace
