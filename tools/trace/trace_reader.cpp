// Line-by-line parser for streamed kvremap traces, tolerant of the tail a killed process leaves.
#include "tools/trace/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "policy/json_depth.h"
#include "tools/trace/event_validator.h"
#include "tools/trace/hot_line.h"
#include "tools/trace/json_access.h"

namespace kvremap::trace {

using detail::args_of;
using detail::int_at;
using detail::member;
using detail::number_at;
using detail::string_at;
using detail::uint_at;
using nlohmann::json;

bool is_known_category(std::string_view name) {
  return std::find(kCategories.begin(), kCategories.end(), name) != kCategories.end();
}

bool is_known_phase(std::string_view name) { return std::find(kPhases.begin(), kPhases.end(), name) != kPhases.end(); }

std::size_t category_rank(std::string_view name) {
  return static_cast<std::size_t>(std::find(kCategories.begin(), kCategories.end(), name) - kCategories.begin());
}

namespace {

std::string location_message(const std::string& source, std::size_t line, const std::string& problem) {
  return source + ": line " + std::to_string(line) + ": " + problem;
}

}  // namespace

TraceError::TraceError(const std::string& source, std::size_t line, const std::string& problem)
    : std::runtime_error(location_message(source, line, problem)), source_(source), line_(line) {}

namespace {

std::string_view trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// Error messages quote offending input; a garbage file may have one enormous line.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMaxQuoted = 40;
  std::string quoted(text.substr(0, kMaxQuoted));
  for (char& c : quoted) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return "'" + quoted + (text.size() > kMaxQuoted ? "...'" : "'");
}

EventRef make_ref(const json& event, std::size_t index, std::size_t line) {
  return EventRef{index, line, number_at(event, "ts"), int_at(event, "tid")};
}

std::map<std::string, std::string> read_options(const json& object) {
  std::map<std::string, std::string> options;
  if (!object.is_object()) return options;
  for (const auto& [name, value] : object.items()) options.emplace(name, detail::as_option_text(value));
  return options;
}

Checkpoint read_checkpoint(const json& args, EventRef ref) {
  Checkpoint checkpoint;
  checkpoint.event = ref;
  checkpoint.index = int_at(args, "index");
  checkpoint.api = string_at(args, "api");
  checkpoint.device = static_cast<int>(int_at(args, "device"));
  checkpoint.driver_free = uint_at(args, "driver_free");
  checkpoint.driver_total = uint_at(args, "driver_total");
  checkpoint.returned_free = uint_at(args, "returned_free");
  checkpoint.returned_total = uint_at(args, "returned_total");
  checkpoint.phase = string_at(args, "phase");
  return checkpoint;
}

CategoryStats read_category_stats(const json& object) {
  CategoryStats stats;
  stats.live_bytes = uint_at(object, "live_bytes");
  stats.peak_bytes = uint_at(object, "peak_bytes");
  stats.peak_ts_us = number_at(object, "peak_ts");
  stats.allocated_bytes = uint_at(object, "allocated_bytes");
  stats.allocations = uint_at(object, "allocations");
  stats.frees = uint_at(object, "frees");
  return stats;
}

Summary read_summary(const json& args, EventRef ref) {
  Summary summary;
  summary.event = ref;
  summary.schema_version = static_cast<int>(int_at(args, "schema_version"));
  summary.library_version = string_at(args, "library_version");
  summary.exit = string_at(args, "exit");
  summary.duration_us = number_at(args, "duration_us");
  if (const json* devices = member(args, "devices"); devices != nullptr && devices->is_array()) {
    for (const json& device : *devices) {
      DeviceSummary device_summary;
      device_summary.device = static_cast<int>(int_at(device, "device"));
      device_summary.total_bytes = uint_at(device, "total_bytes");
      if (const json* categories = member(device, "categories"); categories != nullptr && categories->is_object()) {
        for (const auto& [name, stats] : categories->items()) {
          device_summary.categories.emplace(name, read_category_stats(stats));
        }
      }
      summary.devices.push_back(std::move(device_summary));
    }
  }
  if (const json* checkpoints = member(args, "checkpoints"); checkpoints != nullptr && checkpoints->is_array()) {
    for (const json& checkpoint : *checkpoints) summary.checkpoints.push_back(read_checkpoint(checkpoint, EventRef{}));
  }
  if (const json* counts = member(args, "counts"); counts != nullptr && counts->is_object()) {
    for (const auto& [name, value] : counts->items()) {
      summary.counts.emplace(name, detail::is_non_negative_integer(value) ? value.get<std::uint64_t>() : 0);
    }
  }
  if (const json* options = member(args, "options")) summary.options = read_options(*options);
  return summary;
}

// "device 3 bytes" → 3 (with `suffix` " kv bytes": the KV placement counter's); the device is only in the
// name because Perfetto groups counters by name.
std::optional<int> counter_device(std::string_view name, std::string_view suffix = " bytes") {
  constexpr std::string_view kPrefix = "device ";
  if (name.size() <= kPrefix.size() + suffix.size() || !name.starts_with(kPrefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - suffix.size());
  int device = 0;
  for (char c : digits) {
    if (c < '0' || c > '9' || device > 100000) return std::nullopt;
    device = device * 10 + (c - '0');
  }
  return device;
}

// A string member as a view into the parsed event, or "" (the event outlives the view's use).
std::string_view view_at(const json& object, std::string_view key) {
  const json* value = member(object, key);
  return value != nullptr && value->is_string() ? std::string_view(value->get_ref<const std::string&>())
                                                : std::string_view();
}

// The fields of an allocation or free, from the parsed JSON or from the hot-line scanner alike.
struct MemoryFields {
  std::string_view api;
  std::string_view ptr;
  std::string_view category;
  std::string_view phase;
  std::string_view caller;
  std::string_view free_api;
  std::uint64_t bytes = 0;
  int device = 0;
};

MemoryFields memory_fields(const json& args) {
  return MemoryFields{view_at(args, "api"),    view_at(args, "ptr"),    view_at(args, "category"),
                      view_at(args, "phase"),  view_at(args, "caller"), view_at(args, "free_api"),
                      uint_at(args, "bytes"), static_cast<int>(int_at(args, "device"))};
}

MemoryFields memory_fields(const detail::ScannedEvent& event) {
  return MemoryFields{event.string_arg("api"),    event.string_arg("ptr"),    event.string_arg("category"),
                      event.string_arg("phase"),  event.string_arg("caller"), event.string_arg("free_api"),
                      event.uint_arg("bytes"),   static_cast<int>(event.int_arg("device"))};
}

const std::string kGraphExecCategory = "graph_exec";
const std::string kModuleCategory = "module";

// Files records into the typed vectors; anything not recognised is kept as an OtherEvent.
class EventSorter {
 public:
  EventSorter(Trace& trace, const ReadOptions& options)
      : trace_(trace), keep_every_counter_sample_(options.keep_every_counter_sample) {
    if (options.memory_timeline_only) trace_.memory.emplace();
  }

  void add(const json& event, std::size_t index, std::size_t line) {
    const EventRef ref = make_ref(event, index, line);
    const std::string ph = string_at(event, "ph");
    const std::string cat = string_at(event, "cat");
    const std::string name = string_at(event, "name");
    const json& args = args_of(event);
    if (!sort_known(event, ph, cat, name, args, ref)) {
      trace_.other_events.push_back(OtherEvent{ref, ph, cat, name, args});
    }
  }

  // A line detail::scan_hot_line() read; false when it is one the JSON path must file instead.
  bool add_hot(const detail::ScannedEvent& event, std::size_t index, std::size_t line) {
    const EventRef ref{index, line, event.ts_us, event.tid};
    if (event.cat == "alloc") {
      file_memory(event.name == "free", event.ph == "X", memory_fields(event), ref, event.dur_us);
      return true;
    }
    const std::optional<int> device = counter_device(event.name);
    if (!device) return false;
    file_counter(trace_.counters, *device, ref, [&event](std::map<std::string, std::uint64_t>& bytes) {
      for (std::size_t i = 0; i < event.arg_count; ++i) {
        const detail::ScannedValue& value = event.args[i];
        bytes[std::string(value.key)] = value.is_string ? 0 : value.number;
      }
      return event.arg_count;
    });
    return true;
  }

  void finish() {
    if (trace_.memory) trace_.memory->sort();
  }

 private:
  bool sort_known(const json& event, const std::string& ph, const std::string& cat, const std::string& name,
                  const json& args, const EventRef& ref) {
    if (ph == "M") return sort_metadata(name, args);
    if (cat == "alloc" && (name == "alloc" || name == "free")) {
      file_memory(name == "free", name == "alloc" && ph == "X", memory_fields(args), ref, number_at(event, "dur"));
      return true;
    }
    if (cat == "memory" && ph == "C") {
      const std::optional<int> kv_device = counter_device(name, " kv bytes");
      const std::optional<int> device = kv_device ? kv_device : counter_device(name);
      if (!device) return false;
      file_counter(kv_device ? trace_.kv_counters : trace_.counters, *device, ref,
                   [&args](std::map<std::string, std::uint64_t>& bytes) {
        if (!args.is_object()) return std::size_t{0};
        for (const auto& [category, value] : args.items()) {
          bytes[category] = detail::is_non_negative_integer(value) ? value.get<std::uint64_t>() : 0;
        }
        return args.size();
      });
      return true;
    }
    if (cat == "checkpoint" && name == "memory query") {
      trace_.checkpoints.push_back(read_checkpoint(args, ref));
      return true;
    }
    if (cat == "phase" && name.starts_with("phase: ")) {
      trace_.phase_changes.push_back(
          PhaseChange{ref, string_at(args, "phase"), string_at(args, "previous"), string_at(args, "reason")});
      return true;
    }
    if (cat == "capture" && name == "capture") return sort_capture(event, ph, args, ref);
    if (cat == "graph" && (name == "graph instantiate" || name == "graph exec destroy")) {
      trace_.graph_execs.push_back(GraphExecEvent{ref, name == "graph exec destroy", string_at(args, "api"),
                                                  string_at(args, "exec"), uint_at(args, "bytes"),
                                                  static_cast<int>(int_at(args, "device"))});
      const GraphExecEvent& exec = trace_.graph_execs.back();
      add_step(MemoryStep::Kind::graph_exec, exec.event, false, exec.exec, kGraphExecCategory, "", exec.bytes,
               exec.device, exec.destroyed);
      return true;
    }
    if (cat == "module" && (name == "module load" || name == "module unload")) {
      trace_.modules.push_back(ModuleEvent{ref, name == "module unload", string_at(args, "api"),
                                           string_at(args, "handle"), uint_at(args, "bytes"),
                                           static_cast<int>(int_at(args, "device"))});
      const ModuleEvent& module = trace_.modules.back();
      add_step(MemoryStep::Kind::module, module.event, false, module.handle, kModuleCategory, "", module.bytes,
               module.device, module.unloaded);
      return true;
    }
    if (cat == "summary" && name == "summary") {
      trace_.summary = read_summary(args, ref);
      return true;
    }
    return false;
  }

  bool sort_metadata(const std::string& name, const json& args) {
    if (name == "process_name") {
      trace_.header.process_name = string_at(args, "name");
      return true;
    }
    if (name == "kvremap_device") {
      trace_.device_total_bytes[static_cast<int>(int_at(args, "device"))] = uint_at(args, "total_bytes");
      return true;
    }
    // The header itself is read before sorting starts; a second kvremap_trace stays visible as an OtherEvent.
    return false;
  }

  // `fill` puts a sample's bytes per category into a map and returns how many members it had.
  template <typename Fill>
  void file_counter(std::vector<CounterSample>& samples, int device, const EventRef& ref, Fill fill) {
    if (!keep_every_counter_sample_) {
      // Only the latest sample per device: what a killed process's last memory state needs.
      for (CounterSample& kept : samples) {
        if (kept.device != device) continue;
        if (ref.ts_us < kept.event.ts_us) return;
        kept.event = ref;
        // The writer names the same categories in every sample; refilling in place saves the map's nodes.
        const std::size_t before = kept.bytes_by_category.size();
        if (fill(kept.bytes_by_category) != before || kept.bytes_by_category.size() != before) {
          kept.bytes_by_category.clear();
          fill(kept.bytes_by_category);
        }
        return;
      }
    }
    CounterSample sample{ref, device, {}};
    fill(sample.bytes_by_category);
    samples.push_back(std::move(sample));
  }

  // An allocation lifetime (an "alloc" complete event) is also the free that ended it, at the end of
  // the span. Summed in whole nanoseconds (the writer's resolution), so the end compares equal to the
  // same instant written as a `ts`.
  void file_memory(bool is_free, bool lifetime, const MemoryFields& fields, const EventRef& ref, double dur_us) {
    EventRef end = ref;
    if (lifetime) end.ts_us = static_cast<double>(detail::ns_of_us(ref.ts_us) + detail::ns_of_us(dur_us)) / 1000.0;
    if (trace_.memory) {
      add_step(MemoryStep::Kind::allocation, ref, false, fields.ptr, fields.category, is_free ? "" : fields.caller,
               fields.bytes, fields.device, is_free);
      if (lifetime)
        add_step(MemoryStep::Kind::allocation, end, true, fields.ptr, fields.category, "", fields.bytes, fields.device,
                 true);
      return;
    }
    sort_memory(is_free, fields, ref);
    if (!lifetime) return;
    sort_memory(true, fields, end);
    trace_.allocs.back().lifetime = trace_.frees.back().lifetime = true;
    trace_.frees.back().api = fields.free_api;
  }

  void add_step(MemoryStep::Kind kind, const EventRef& ref, bool lifetime_end, std::string_view key,
                std::string_view category, std::string_view caller, std::uint64_t bytes, int device, bool release) {
    if (trace_.memory) trace_.memory->add(kind, ref, lifetime_end, key, category, caller, bytes, device, release);
  }

  void sort_memory(bool is_free, const MemoryFields& fields, const EventRef& ref) {
    MemoryEvent record;
    record.event = ref;
    record.api = fields.api;
    record.ptr = fields.ptr;
    record.bytes = fields.bytes;
    record.device = fields.device;
    record.category = fields.category;
    if (is_free) {
      trace_.frees.push_back(std::move(record));
    } else {
      record.phase = fields.phase;
      record.caller = fields.caller;
      trace_.allocs.push_back(std::move(record));
    }
  }

  // A window is a complete event ("X", dur beside ts), or, where it would not nest on its thread's
  // track, an async pair ("b" with the args, then "e") matched by id. A "b" whose "e" never came (a
  // killed process) is left out, like a window whose "X" line was never written.
  bool sort_capture(const json& event, const std::string& ph, const json& args, const EventRef& ref) {
    const auto window = [&](double dur_us) {
      return CaptureWindow{ref,
                           dur_us,
                           uint_at(args, "capture_id"),
                           string_at(args, "stream"),
                           string_at(args, "mode"),
                           string_at(args, "status"),
                           uint_at(args, "allocated_bytes")};
    };
    if (ph == "X") {
      trace_.captures.push_back(window(number_at(event, "dur")));
      return true;
    }
    const std::string id = string_at(event, "id");
    if (ph == "b" && !id.empty()) {
      open_captures_[id] = window(0);
      return true;
    }
    const auto begun = open_captures_.find(id);
    if (ph != "e" || begun == open_captures_.end()) return false;
    CaptureWindow whole = begun->second;
    whole.dur_us = static_cast<double>(detail::ns_of_us(ref.ts_us) - detail::ns_of_us(whole.event.ts_us)) / 1000.0;
    trace_.captures.push_back(whole);
    open_captures_.erase(begun);
    return true;
  }

 private:
  Trace& trace_;
  bool keep_every_counter_sample_;
  std::map<std::string, CaptureWindow> open_captures_;  // async "b" events waiting for their "e"
};

Header read_header(const json& event, const std::string& source, std::size_t line) {
  const json& args = args_of(event);
  const json* version = member(args, "schema_version");
  if (version == nullptr || !version->is_number_integer()) {
    throw TraceError(source, line, "kvremap_trace metadata has no integer args.schema_version");
  }
  const std::int64_t schema = version->get<std::int64_t>();
  if (schema < kOldestSchemaVersion || schema > kSchemaVersion) {
    throw TraceError(source, line,
                     "unsupported schema_version " + version->dump() + " (this reader reads versions " +
                         std::to_string(kOldestSchemaVersion) + " to " + std::to_string(kSchemaVersion) + ")");
  }
  Header header;
  header.schema_version = static_cast<int>(schema);
  header.library_version = string_at(args, "library_version");
  header.hostname = string_at(args, "hostname");
  header.pid = int_at(args, "pid");
  header.ppid = int_at(args, "ppid");
  header.cmdline = string_at(args, "cmdline");
  // Traces written before the field: the process's own line is the best there is.
  header.engine_cmdline = args.contains("engine_cmdline") ? string_at(args, "engine_cmdline") : header.cmdline;
  header.start_unix_ns = int_at(args, "start_unix_ns");
  if (const json* options = member(args, "options")) header.options = read_options(*options);
  return header;
}

bool is_metadata_named(const json& event, std::string_view name) {
  return string_at(event, "ph") == "M" && string_at(event, "name") == name;
}

// Takes the text one line at a time, exactly once. A line that does not parse is held back: if it
// turns out to be the last line of an unfinished file it is the truncated tail, otherwise an error.
// Every event goes through the schema checks before anything is taken from it; the first problem
// is thrown, or, given `collected` (validate_file), every problem is kept there.
class TraceParser {
 public:
  TraceParser(std::string source, const ReadOptions& options, std::vector<std::string>* collected = nullptr)
      : options_(options),
        sorter_(trace_, options),
        scan_hot_lines_(options.scan_hot_lines && !options.keep_raw_events && !options.on_event),
        validator_(source),
        collected_(collected) {
    trace_.source = std::move(source);
  }

  Trace parse(std::string_view text) {
    std::size_t line_number = 0;
    while (!text.empty()) {
      const std::size_t end = text.find('\n');
      const std::string_view line = text.substr(0, end);
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
      ++line_number;
      if (line.size() > kMaxLineBytes) line_too_long(line_number);
      take_line(trim(line), line_number);
    }
    return finish(line_number);
  }

  // One line (without its '\n'); lines are numbered from 1 in the order they are given.
  void take_line(std::string_view line) {
    ++lines_taken_;
    take_line(trim(line), lines_taken_);
  }

  // Throws if `start`, the beginning of the next line, already shows that the text is no trace, so
  // that a reader rejects a garbage file without reading its (possibly enormous) first line to the end.
  void check_line_start(std::string_view start) {
    const std::string_view text = trim(start);
    if (stage_ == Stage::before_open_bracket && !text.empty() && !text.starts_with('[')) {
      take_line(text, lines_taken_ + 1);
    }
  }

  [[noreturn]] void line_too_long(std::size_t line_number) {
    if (unparsed_line_ != 0) throw TraceError(trace_.source, unparsed_line_, unparsed_problem_);
    throw TraceError(trace_.source, line_number,
                     "line longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB: not a kvremap trace line");
  }

  std::size_t lines_taken() const { return lines_taken_; }

  Trace finish() { return finish(lines_taken_); }

 private:
  enum class Stage { before_open_bracket, in_events, after_close_bracket };

  void take_line(std::string_view line, std::size_t line_number) {
    if (line.empty()) return;
    if (unparsed_line_ != 0) throw TraceError(trace_.source, unparsed_line_, unparsed_problem_);
    switch (stage_) {
      case Stage::before_open_bracket:
        if (!line.starts_with('[')) {
          throw TraceError(trace_.source, line_number,
                           "not a kvremap trace: expected '[' to open the event array, found " + excerpt(line));
        }
        stage_ = Stage::in_events;
        line = trim(line.substr(1));
        if (!line.empty()) take_event_line(line, line_number);
        return;
      case Stage::in_events:
        if (line == "]") {
          stage_ = Stage::after_close_bracket;
          trace_.complete = true;
          return;
        }
        take_event_line(line, line_number);
        return;
      case Stage::after_close_bracket:
        throw TraceError(trace_.source, line_number, "data after the closing ']': " + excerpt(line));
    }
  }

  void take_event_line(std::string_view line, std::size_t line_number) {
    // The writer puts the separating comma at the start of each line; a trailing one is accepted
    // too so that hand-edited files still load.
    if (line.starts_with(',')) line = trim(line.substr(1));
    if (line.ends_with(',')) line = trim(line.substr(0, line.size() - 1));
    if (line.empty()) {
      hold_unparsed(line_number, "a separating ',' with no event after it");
      return;
    }
    // Hot lines are all but a few of a large trace's; after the header they skip the JSON parser
    // when the scan shows they conform (any other goes through the parser and the full checks).
    if (scan_hot_lines_ && header_seen_ && detail::scan_hot_line(line, scanned_) &&
        detail::hot_line_conforms(scanned_, trace_.header.schema_version) &&
        (!options_.keep_records || sorter_.add_hot(scanned_, trace_.event_count, line_number))) {
      validator_.add_conforming_hot(scanned_, trace_.event_count, line_number);
      refuse_on_problem(line_number);
      ++trace_.event_count;
      return;
    }
    if (policy::json_nested_deeper_than(line, kMaxNestingDepth)) {
      throw TraceError(trace_.source, line_number,
                       "nested deeper than " + std::to_string(kMaxNestingDepth) +
                           " levels of arrays and objects: not a kvremap trace event");
    }
    json event;
    try {
      event = json::parse(line);
    } catch (const json::parse_error& error) {
      // What a process killed mid-write leaves; an error only if more lines follow.
      hold_unparsed(line_number, "not a JSON event: " + detail::error_text(error));
      return;
    } catch (const json::exception& error) {
      // A number beyond a double's range and the like: never a cut-off line, so never the tail.
      throw TraceError(trace_.source, line_number, "not a JSON event: " + detail::error_text(error));
    }
    try {
      take_event(std::move(event), line, line_number);
    } catch (const json::exception& error) {
      throw TraceError(trace_.source, line_number, "cannot read the event: " + detail::error_text(error));
    }
  }

  // Reading stops at the first schema problem, unless every problem is being collected: then they
  // go to `collected` as they are found, so that an error later in the file comes after them.
  void refuse_on_problem(std::size_t line_number) {
    if (validator_.problems().empty()) return;
    if (collected_ == nullptr) throw SchemaError(validator_.problems().front(), trace_.source, line_number);
    std::vector<std::string> found = validator_.take_problems();
    collected_->insert(collected_->end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  }

  void hold_unparsed(std::size_t line_number, std::string problem) {
    unparsed_line_ = line_number;
    unparsed_problem_ = std::move(problem);
  }

  void take_event(json event, std::string_view line, std::size_t line_number) {
    const std::size_t index = trace_.event_count;
    const bool is_header = is_metadata_named(event, "kvremap_trace");
    if (!header_seen_) {
      // process_name may precede the header so that Perfetto labels the track before anything else.
      const bool may_precede_header = index == 0 && is_metadata_named(event, "process_name");
      if (!is_header && !may_precede_header) {
        throw TraceError(
            trace_.source, line_number,
            "not a kvremap trace: the first event must be the kvremap_trace metadata, found " + excerpt(line));
      }
    }
    const bool takes_header = is_header && !header_seen_;
    if (takes_header) {
      std::string process_name = std::move(trace_.header.process_name);  // a process_name event may come first
      trace_.header = read_header(event, trace_.source, line_number);
      trace_.header.process_name = std::move(process_name);
      header_seen_ = true;
    }
    validator_.add(event, index, line_number, trace_.header.schema_version);
    refuse_on_problem(line_number);
    if (string_at(event, "ph") == "M") ++trace_.metadata_events;
    if (!takes_header && options_.keep_records) {
      sorter_.add(event, index, line_number);  // a repeated header is kept as an OtherEvent
    }
    // The writer's last word when the file could not grow (docs/trace-format.md); the checks have
    // made sure args.error is a string.
    if (string_at(event, "name") == "trace stopped" && string_at(event, "cat") == "kvremap") {
      trace_.stopped = string_at(args_of(event), "error");
      trace_.stopped_at_us = number_at(event, "ts");
    }
    if (options_.on_event) options_.on_event(event, index, line_number, trace_.header);
    ++trace_.event_count;
    if (options_.keep_raw_events) {
      trace_.events.push_back(std::move(event));
      trace_.event_lines.push_back(line_number);
    }
  }

  Trace finish(std::size_t last_line) {
    if (stage_ == Stage::before_open_bracket) {
      throw TraceError(trace_.source, last_line, "not a kvremap trace: the file is empty");
    }
    if (unparsed_line_ != 0) {
      if (trace_.complete) throw TraceError(trace_.source, unparsed_line_, unparsed_problem_);
      trace_.truncated = true;  // the process died while writing its last line
    }
    if (!header_seen_) {
      throw TraceError(trace_.source, last_line,
                       "not a kvremap trace: the file ends before the kvremap_trace metadata event");
    }
    validator_.finish();  // the nesting of complete events, known only now
    refuse_on_problem(last_line);
    sorter_.finish();
    return std::move(trace_);
  }

  const ReadOptions& options_;
  Trace trace_;
  EventSorter sorter_;
  bool scan_hot_lines_;
  detail::ScannedEvent scanned_;
  Stage stage_ = Stage::before_open_bracket;
  bool header_seen_ = false;
  std::size_t unparsed_line_ = 0;
  std::string unparsed_problem_;
  std::size_t lines_taken_ = 0;
  detail::EventValidator validator_;
  std::vector<std::string>* collected_;
};

// Closes a file descriptor when the reader is done with it, however it leaves.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

std::uint32_t MemoryTimeline::id_of(std::string_view name) {
  if (name.empty()) return 0;
  const auto [entry, added] = ids.try_emplace(std::string(name), static_cast<std::uint32_t>(names.size()));
  if (added) names.push_back(entry->first);
  return entry->second;
}

void MemoryTimeline::add(MemoryStep::Kind kind, const EventRef& event, bool lifetime_end, std::string_view key,
                         std::string_view category, std::string_view caller, std::uint64_t bytes, int device,
                         bool release) {
  MemoryStep step;
  step.ts_us = event.ts_us;
  step.bytes = bytes;
  step.order = event.index * 2 + (lifetime_end ? 1 : 0);
  step.key = id_of(key);
  step.caller = id_of(caller);
  step.category = id_of(category);
  step.device = device;
  step.kind = kind;
  step.release = release;
  steps.push_back(step);
}

void MemoryTimeline::sort() {
  // `order` is unique per step, so the order is total and no stable sort is needed.
  std::sort(steps.begin(), steps.end(), [](const MemoryStep& a, const MemoryStep& b) {
    return a.ts_us != b.ts_us ? a.ts_us < b.ts_us : a.order < b.order;
  });
}

Trace parse_trace(std::string_view text, std::string source_name, const ReadOptions& options) {
  return TraceParser(std::move(source_name), options).parse(text);
}

namespace {

// What validate_file/validate_text keep: no raw events, no typed records (so nothing is taken from
// an event that has problems), and the hot-line scanner on.
const ReadOptions kValidationOptions{.keep_raw_events = false, .keep_records = false};

Trace read_file(const std::string& path, const ReadOptions& options, std::vector<std::string>* collected);

// A file that stops being a trace after events with problems: those problems, then the error as the
// last one, which is where a reader stops too (at the first of them).
template <typename Read>
FileValidation validation_of(Read read) {
  FileValidation result;
  try {
    result.trace = read(&result.problems);
  } catch (const TraceError& error) {
    if (result.problems.empty()) throw;
    result.problems.emplace_back(error.what());
  }
  return result;
}

}  // namespace

FileValidation validate_text(std::string_view text, std::string source_name) {
  return validation_of([&](std::vector<std::string>* problems) {
    return TraceParser(std::move(source_name), kValidationOptions, problems).parse(text);
  });
}

FileValidation validate_file(const std::string& path) {
  return validation_of(
      [&](std::vector<std::string>* problems) { return read_file(path, kValidationOptions, problems); });
}

Trace read_trace(const std::string& path, const ReadOptions& options) { return read_file(path, options, nullptr); }

namespace {

Trace read_file(const std::string& path, const ReadOptions& options, std::vector<std::string>* collected) {
  const FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) throw TraceError(path, 0, "cannot open: " + errno_text(errno));
  struct stat status {};
  if (::fstat(file.get(), &status) != 0) throw TraceError(path, 0, "cannot open: " + errno_text(errno));
  if (S_ISDIR(status.st_mode)) throw TraceError(path, 0, "cannot read: is a directory, not a trace file");

  // Fixed-size reads; only the line being assembled grows, up to kMaxLineBytes.
  TraceParser parser(path, options, collected);
  constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
  std::vector<char> chunk(kChunkBytes);
  std::string line;
  const std::uint64_t file_bytes = S_ISREG(status.st_mode) ? static_cast<std::uint64_t>(status.st_size) : 0;
  std::uint64_t bytes_read = 0;
  for (;;) {
    const ssize_t got = ::read(file.get(), chunk.data(), chunk.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      throw TraceError(path, parser.lines_taken() + 1, "cannot read: " + errno_text(errno));
    }
    if (got == 0) break;
    bytes_read += static_cast<std::uint64_t>(got);
    std::string_view rest(chunk.data(), static_cast<std::size_t>(got));
    while (!rest.empty()) {
      const std::size_t newline = rest.find('\n');
      const std::string_view piece = rest.substr(0, newline);
      if (line.size() + piece.size() > kMaxLineBytes) parser.line_too_long(parser.lines_taken() + 1);
      if (newline == std::string_view::npos) {
        line.append(piece);
        parser.check_line_start(line);
        break;
      }
      if (line.empty()) {
        parser.take_line(piece);
      } else {
        line.append(piece);
        parser.take_line(line);
        line.clear();
      }
      rest.remove_prefix(newline + 1);
    }
    if (options.on_progress) options.on_progress(bytes_read, file_bytes);
  }
  if (!line.empty()) parser.take_line(line);
  return parser.finish();
}

}  // namespace

}  // namespace kvremap::trace
