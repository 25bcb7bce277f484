// Streams several traces into one, shifted onto a common wall-clock axis (tools/merge.h).
#include "tools/merge.h"

#include <algorithm>
#include <limits>
#include <set>

#include "tools/trace/json_access.h"

namespace kvremap::merge {
namespace {

// Thrown from the reader's callback once the header is in: the rest of the file is not needed.
struct HeaderRead {
  trace::Header header;
};

// Moves "ts" by `offset_us` (>= 0). Integers stay integers while they fit, others become doubles;
// a "ts" that is not a number is left for validate to report, as in the input.
void shift_ts(nlohmann::json& event, std::int64_t offset_us) {
  auto ts = event.find("ts");
  if (ts == event.end() || !ts->is_number() || offset_us == 0) return;
  const bool small_unsigned = ts->is_number_unsigned() &&
                              ts->get<std::uint64_t>() <= static_cast<std::uint64_t>(
                                                              std::numeric_limits<std::int64_t>::max() - offset_us);
  const bool small_signed = ts->is_number_integer() && !ts->is_number_unsigned() &&
                            ts->get<std::int64_t>() <= std::numeric_limits<std::int64_t>::max() - offset_us;
  if (small_unsigned || small_signed) {
    *ts = ts->get<std::int64_t>() + offset_us;
  } else {
    *ts = ts->get<double>() + static_cast<double>(offset_us);
  }
}

}  // namespace

trace::Header read_header(const std::string& path) {
  trace::ReadOptions options{.keep_raw_events = false, .keep_records = false};
  options.on_event = [](const nlohmann::json&, std::size_t, std::size_t, const trace::Header& header) {
    if (header.schema_version != 0) throw HeaderRead{header};
  };
  try {
    return trace::read_trace(path, options).header;
  } catch (const HeaderRead& read) {
    return read.header;
  }
}

MergeResult merge_traces(const std::vector<std::string>& paths, std::ostream& out, const ProgressFactory& progress) {
  MergeResult result;
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  int schema = trace::kOldestSchemaVersion;
  for (const std::string& path : paths) {
    Input input{path, read_header(path)};
    if (input.header.start_unix_ns <= 0) result.aligned_on_wall_clock = false;
    earliest = std::min(earliest, input.header.start_unix_ns);
    schema = std::max(schema, input.header.schema_version);
    result.inputs.push_back(std::move(input));
  }
  std::set<std::int64_t> pids;
  std::int64_t next_free_pid = 1;
  for (const Input& input : result.inputs) next_free_pid = std::max(next_free_pid, input.header.pid + 1);
  for (Input& input : result.inputs) {
    // Timestamps count from each process's own start; the wall clock at that start puts them on one axis.
    input.offset_us = result.aligned_on_wall_clock ? (input.header.start_unix_ns - earliest) / 1000 : 0;
    input.pid = input.header.pid;
    while (!pids.insert(input.pid).second) input.pid = next_free_pid++;  // ranks on two hosts may share a pid
  }

  const Input& first = result.inputs.front();
  std::string cmdline = "kvremap merge";
  for (const std::string& path : paths) cmdline += " " + path;
  const nlohmann::json header = {
      {"ph", "M"},
      {"cat", "kvremap"},
      {"name", "kvremap_trace"},
      {"pid", first.pid},
      {"tid", first.pid},
      {"ts", 0},
      {"args",
       {{"schema_version", schema},
        {"library_version", first.header.library_version},
        {"hostname", first.header.hostname},
        {"pid", first.pid},
        {"ppid", 0},
        {"cmdline", cmdline},
        {"start_unix_ns", result.aligned_on_wall_clock ? earliest : first.header.start_unix_ns},
        {"options", nlohmann::json::object()}}}};
  out << "[\n" << header.dump() << "\n";
  for (const Input& input : result.inputs) {
    trace::ReadOptions options{.keep_raw_events = false, .keep_records = false};
    if (progress) options.on_progress = progress(input.path);
    // Every field is read without assuming its type: an event validate accepts (a numeric "cat",
    // say) is copied as it is; only a string "ph"/"name"/"cat" can mark the header or the summary.
    options.on_event = [&](const nlohmann::json& event, std::size_t index, std::size_t line, const trace::Header&) {
      if (!event.is_object()) return;
      try {
        nlohmann::json copy = event;
        const std::string name = trace::detail::string_at(copy, "name");
        const std::string cat = trace::detail::string_at(copy, "cat");
        if (trace::detail::string_at(copy, "ph") == "M" && name == "kvremap_trace") copy["name"] = "kvremap_merged_process";
        if (cat == "summary" && name == "summary") copy["cat"] = "merged_summary";
        copy["pid"] = input.pid;
        shift_ts(copy, input.offset_us);
        out << "," << copy.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } catch (const nlohmann::json::exception& error) {
        throw trace::TraceError(input.path, line,
                                "event " + std::to_string(index) + ": cannot merge it: " + error.what());
      }
      ++result.events;
    };
    trace::read_trace(input.path, options);
  }
  out << "]\n";
  return result;
}

}  // namespace kvremap::merge
