// Reads kvremap per-process JSON traces (schemas 1 and 2) into typed records shared by every analysis tool.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/trace_schema.h"

namespace kvremap::trace {

// The schema the library writes (policy/trace_schema.h), and the oldest this reader still reads; any
// other value in the header is a TraceError.
inline constexpr int kSchemaVersion = policy::kTraceSchemaVersion;
inline constexpr int kOldestSchemaVersion = 1;

// Limits on one line of a trace, checked before the JSON parser sees it. The writer nests at most
// 6 levels (the summary's per-category statistics) and its longest line is the summary; a line past
// either limit is a TraceError rather than a risk to the reader's stack or memory.
inline constexpr std::size_t kMaxNestingDepth = 64;
inline constexpr std::size_t kMaxLineBytes = std::size_t{256} << 20;

// The fixed category set, in the order reports print them, and the fixed phase set, in the order an
// engine start-up goes through them: the writer's own lists.
inline constexpr const auto& kCategories = policy::kCategoryNames;
inline constexpr const auto& kPhases = policy::kPhaseNames;

bool is_known_category(std::string_view name);
bool is_known_phase(std::string_view name);
// Position of a category in kCategories; unknown names sort after every known one.
std::size_t category_rank(std::string_view name);

// A trace that cannot be read at all. what() is one line: "<source>: line <L>: <problem>".
class TraceError : public std::runtime_error {
 public:
  TraceError(const std::string& source, std::size_t line, const std::string& problem);
  const std::string& source() const noexcept { return source_; }
  std::size_t line() const noexcept { return line_; }

 protected:
  struct WholeMessage {};
  TraceError(WholeMessage, const std::string& message, const std::string& source, std::size_t line)
      : std::runtime_error(message), source_(source), line_(line) {}

 private:
  std::string source_;
  std::size_t line_;
};

// A trace whose events break the schema: what() is the first problem, word for word the line
// `kvremap validate` prints for it ("<source>: event <N>: <name>: <problem> (line <L>)").
class SchemaError : public TraceError {
 public:
  SchemaError(const std::string& problem, const std::string& source, std::size_t line)
      : TraceError(WholeMessage{}, problem, source, line) {}
};

// Where a typed record came from: its index in Trace::events (0 = first event object), its
// 1-based line in the file, and the common fields every event carries.
struct EventRef {
  std::size_t index = 0;
  std::size_t line = 0;
  double ts_us = 0;
  std::int64_t tid = 0;
};

// The kvremap_trace metadata event (plus the process_name label, when present).
struct Header {
  int schema_version = 0;
  std::string library_version;
  std::string hostname;
  std::int64_t pid = 0;
  std::int64_t ppid = 0;
  std::string cmdline;         // the process's own line (a process title where the engine renamed it)
  std::string engine_cmdline;  // the line kvremap read the engine from (the root's, in a spawned child)
  std::int64_t start_unix_ns = 0;
  std::map<std::string, std::string> options;  // non-string option values are kept as their JSON text
  std::string process_name;                    // from the process_name metadata event; empty if absent
};

// An "alloc" or "free" event in cat "alloc". An allocation lifetime (an "alloc" complete event,
// schema 2) is read as both: its allocation at ts, its free at ts + dur with api = its free_api;
// the two share the event's index and line.
struct MemoryEvent {
  EventRef event;
  std::string api;
  std::string ptr;
  std::uint64_t bytes = 0;
  int device = 0;
  std::string category;
  std::string phase;      // allocations only
  std::string caller;     // allocations only, optional in the trace
  bool lifetime = false;  // read from an allocation-lifetime event
};

// A memory query the program made, with what the driver said and what kvremap returned.
struct Checkpoint {
  EventRef event;  // default for checkpoints read from the summary
  std::int64_t index = 0;
  std::string api;
  int device = 0;
  std::uint64_t driver_free = 0;
  std::uint64_t driver_total = 0;
  std::uint64_t returned_free = 0;
  std::uint64_t returned_total = 0;
  std::string phase;
};

struct PhaseChange {
  EventRef event;
  std::string phase;
  std::string previous;
  std::string reason;
};

// A stream-capture window ("ph":"X"): event.ts_us is its begin.
struct CaptureWindow {
  EventRef event;
  double dur_us = 0;
  std::uint64_t capture_id = 0;
  std::string stream;
  std::string mode;
  std::string status;
  std::uint64_t allocated_bytes = 0;
};

// "graph instantiate" / "graph exec destroy": driver memory held by an executable graph.
struct GraphExecEvent {
  EventRef event;
  bool destroyed = false;
  std::string api;
  std::string exec;
  std::uint64_t bytes = 0;
  int device = 0;
};

// "module load" / "module unload": driver memory held by a loaded module.
struct ModuleEvent {
  EventRef event;
  bool unloaded = false;
  std::string api;
  std::string handle;
  std::uint64_t bytes = 0;
  int device = 0;
};

// A "device N bytes" counter sample: live bytes per category on one device after a change.
struct CounterSample {
  EventRef event;
  int device = 0;
  std::map<std::string, std::uint64_t> bytes_by_category;
};

// An event this reader has no typed record for: cat "kvremap" internals ("tracking disabled",
// "option error"), unknown names in known cats and unknown cats. args is kept verbatim.
struct OtherEvent {
  EventRef event;
  std::string ph;
  std::string cat;
  std::string name;
  nlohmann::json args;
};

struct CategoryStats {
  std::uint64_t live_bytes = 0;
  std::uint64_t peak_bytes = 0;
  double peak_ts_us = 0;
  std::uint64_t allocated_bytes = 0;  // cumulative bytes allocated, frees not subtracted
  std::uint64_t allocations = 0;
  std::uint64_t frees = 0;
  bool operator==(const CategoryStats&) const = default;
};

struct DeviceSummary {
  int device = 0;
  std::uint64_t total_bytes = 0;
  std::map<std::string, CategoryStats> categories;
};

// The "summary" event a clean exit writes last.
struct Summary {
  EventRef event;
  int schema_version = 0;
  std::string library_version;
  std::string exit;
  double duration_us = 0;
  std::vector<DeviceSummary> devices;
  std::vector<Checkpoint> checkpoints;
  std::map<std::string, std::uint64_t> counts;
  std::map<std::string, std::string> options;
};

// One change of live bytes in compact form: an allocation or free, a graph executable or a module
// coming or going. Strings are ids into MemoryTimeline::names, so a step is a few words whatever the trace.
struct MemoryStep {
  enum class Kind : std::uint8_t { allocation, graph_exec, module };
  double ts_us = 0;
  std::uint64_t bytes = 0;
  std::uint64_t order = 0;    // 2 × the event's index, + 1 for a lifetime's free: file order, allocation first
  std::uint32_t key = 0;      // the ptr, graph exec or module handle a release is matched by (with kind)
  std::uint32_t caller = 0;   // allocations only; 0 ("") when not recorded
  std::uint32_t category = 0;
  std::int32_t device = 0;
  Kind kind = Kind::allocation;
  bool release = false;
};

// Every memory change of a trace in replay order: by timestamp, file order for equal ones (the writer
// buffers events per thread, so file order interleaves threads in chunks, while timestamps come from
// one monotonic clock).
struct MemoryTimeline {
  std::vector<std::string> names{std::string()};  // names[0] is ""
  std::deque<MemoryStep> steps;                   // a deque: no doubling copy of a large trace's steps
  std::unordered_map<std::string, std::uint32_t> ids;  // names back to their ids, while steps are added

  std::uint32_t id_of(std::string_view name);
  // A step of `event`; `lifetime_end` for the free an allocation lifetime ends with (ordered after it).
  void add(MemoryStep::Kind kind, const EventRef& event, bool lifetime_end, std::string_view key,
           std::string_view category, std::string_view caller, std::uint64_t bytes, int device, bool release);
  const std::string& name(std::uint32_t id) const { return names[id]; }
  void sort();
};

struct Trace {
  std::string source;  // file name (or the name given to parse_trace), used in every message
  Header header;
  std::map<int, std::uint64_t> device_total_bytes;  // from kvremap_device metadata events
  std::vector<MemoryEvent> allocs;  // empty when read with ReadOptions::memory_timeline_only
  std::vector<MemoryEvent> frees;
  std::vector<Checkpoint> checkpoints;
  std::vector<PhaseChange> phase_changes;
  std::vector<CaptureWindow> captures;
  std::vector<GraphExecEvent> graph_execs;
  std::vector<ModuleEvent> modules;
  std::vector<CounterSample> counters;
  // "device <N> kv bytes": where the KV cache kvremap placed lies (bytes_by_category holds reserved, device,
  // scratch and host); kept as `counters` is.
  std::vector<CounterSample> kv_counters;
  std::vector<OtherEvent> other_events;
  std::optional<Summary> summary;
  // With ReadOptions::memory_timeline_only: the allocations, frees, graph and module events in replay order.
  std::optional<MemoryTimeline> memory;
  bool truncated = false;  // an incomplete last line was ignored
  bool complete = false;   // the closing ']' was seen
  std::string stopped;     // the writer's error when the file could not grow ("trace stopped"), or empty
  double stopped_at_us = 0;  // the "trace stopped" event's ts: when the write that failed was made
  std::size_t metadata_events = 0;  // "M" events (header, process_name, kvremap_device): all of them = header only
  std::size_t event_count = 0;
  // Every parsed event object in file order (empty when ReadOptions::keep_raw_events is false);
  // event_lines[i] is the 1-based line of events[i].
  std::vector<nlohmann::json> events;
  std::vector<std::size_t> event_lines;
};

struct ReadOptions {
  // The raw JSON costs several times the file size in memory; tools that only use typed records
  // can drop it. validate() needs it (validate_file() does not).
  bool keep_raw_events = true;
  // The typed records (allocs, frees, ..., other_events, summary); header, event_count and the
  // complete/truncated flags are filled either way.
  bool keep_records = true;
  // Called for every event as it is read, in file order, after the header (if it came earlier) was
  // read into `header`; `index` and `line` are as in EventRef. The event is gone when it returns.
  std::function<void(const nlohmann::json& event, std::size_t index, std::size_t line, const Header& header)> on_event =
      nullptr;
  // With keep_records: every counter sample in Trace::counters, or (false) only the latest of each
  // device. Counters are about half of a large trace's events and each sample holds a map, while
  // the alloc/free/graph/module events carry every change anyway; a report needs only the last state.
  bool keep_every_counter_sample = true;
  // With keep_records: allocations and frees go only to Trace::memory (about 48 bytes each), not to
  // Trace::allocs/frees (a record with five strings each); graph and module events get a step there
  // too and keep their records. What the analysing commands read.
  bool memory_timeline_only = false;
  // Read the writer's hot lines (allocations, frees, lifetimes, counters) with a dedicated scanner
  // when neither raw events nor on_event need their JSON; false sends every line through the JSON
  // parser (the tests compare the two).
  bool scan_hot_lines = true;
  // read_trace() only: called after each block read from the file with the bytes read so far and
  // the file's size (0 when unknown, as for a pipe), so a tool can show progress on large traces.
  std::function<void(std::uint64_t bytes_read, std::uint64_t file_bytes)> on_progress = nullptr;
};

// Every reading of a trace checks each event against the schema as it is read, before anything is
// taken from it (typed records, the summary, on_event): the checks are validate()'s, and the first
// problem found is thrown as a SchemaError with the line validate prints for it. No ReadOptions
// turns the checks off, so a figure a tool prints always comes from events validate accepts.
//
// Parses trace text. Throws TraceError when the text is not a kvremap trace at all (garbage, no
// header, unsupported schema_version, an unparsable line that is not the last one, a line nested
// deeper than kMaxNestingDepth or longer than kMaxLineBytes, a number beyond a double's range), and
// SchemaError when an event breaks the schema.
Trace parse_trace(std::string_view text, std::string source_name, const ReadOptions& options = {});
// Reads and parses a file as a stream, one line in memory at a time: the whole file is never held,
// so memory is what `options` keeps (typed records, raw events) plus one line, and a few words per
// complete ("X") event for the nesting check. A file that cannot be opened or read, or a directory,
// is a TraceError at line 0 (or at the line being read).
Trace read_trace(const std::string& path, const ReadOptions& options = {});

// Schema problems of a trace already read, one line each: "<source>: event <N>: <problem> (line <L>)".
// Empty = conforms, which a Trace that parse_trace() or read_trace() returned always does.
// A missing ']' or an ignored incomplete last line is not a problem: killed processes leave such files.
std::vector<std::string> validate(const Trace& trace);

// The reading that lists every problem instead of stopping at the first: one streaming pass that
// keeps neither raw events nor typed records, so memory is one line plus a few words per complete
// ("X") event, whatever the file's size. `trace` has the header, event_count, the complete/truncated
// flags and the stop (Trace::stopped); `problems` are in file order, the nesting problems last.
// Throws TraceError (never SchemaError) like read_trace() when the file is no trace at all; where
// that comes after events with problems, its line is the last problem instead (and `trace` is
// empty), so that the first problem is always where a reader stops.
struct FileValidation {
  Trace trace;
  std::vector<std::string> problems;
};
FileValidation validate_file(const std::string& path);
FileValidation validate_text(std::string_view text, std::string source_name);

// Per device, per category live and peak bytes recomputed from alloc/free, graph and module events
// in timestamp order (file order for equal timestamps), to cross-check the summary or stand in for
// it when the process was killed.
struct LiveBytesReplay {
  std::map<int, std::map<std::string, CategoryStats>> devices;
  std::size_t frees_exceeding_live = 0;  // frees larger than the category's live bytes (clamped at 0)
};
LiveBytesReplay replay_live_bytes(const Trace& trace);

// The trace's memory changes in replay order: Trace::memory when the reader built it, else built from
// the typed records into `built`.
const MemoryTimeline& memory_timeline(const Trace& trace, MemoryTimeline& built);

}  // namespace kvremap::trace
