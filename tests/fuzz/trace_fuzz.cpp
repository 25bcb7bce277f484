// Fuzzes the trace reader on raw bytes (it refuses what validate refuses), then replay_live_bytes() and the report renderer (escaped text).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_check.h"
#include "tools/report.h"
#include "tools/trace/trace_reader.h"

using namespace kvremap;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  trace::Trace parsed;
  try {
    parsed = trace::parse_trace(text, "fuzz.json");
  } catch (const trace::SchemaError& e) {
    // Refused for a schema problem: validate's first line, word for word.
    const trace::FileValidation validation = trace::validate_text(text, "fuzz.json");
    FUZZ_CHECK(!validation.problems.empty() && validation.problems.front() == e.what(),
               "a reader refuses a trace with the first line validate prints");
    FUZZ_CHECK(validation.problems.front().starts_with("fuzz.json: event "),
               "the schema problem a reader refuses for names the source and event");
    // validate goes on past the first problem: a later one may be a line that is not JSON at all.
    for (const std::string& problem : validation.problems) {
      FUZZ_CHECK(problem.starts_with("fuzz.json: event ") || problem.starts_with("fuzz.json: line "),
                 "a problem names the source and its event or line");
      FUZZ_CHECK(kvremap::fuzz::is_one_line(problem), "a schema problem is one line");
    }
    return 0;
  } catch (const trace::TraceError& e) {
    const std::string_view what = e.what();
    FUZZ_CHECK(what.starts_with("fuzz.json: line "), "a TraceError names the source and line");
    FUZZ_CHECK(kvremap::fuzz::is_one_line(what), "a TraceError is one line");
    return 0;
  }
  FUZZ_CHECK(parsed.events.size() == parsed.event_count, "every event is kept when keep_raw_events is on");
  FUZZ_CHECK(parsed.event_lines.size() == parsed.events.size(), "every kept event has its line");

  FUZZ_CHECK(trace::validate(parsed).empty(), "a trace the reader returns conforms");
  FUZZ_CHECK(trace::validate_text(text, "fuzz.json").problems.empty(), "validate accepts what a reader reads");
  (void)trace::replay_live_bytes(parsed);
  const std::string report = report::render_report(parsed);
  FUZZ_CHECK(!report.empty(), "a readable trace renders a report");
  for (const char c : report) {
    const auto byte = static_cast<unsigned char>(c);
    FUZZ_CHECK(c == '\n' || (byte >= 0x20 && byte != 0x7f), "the report's only control bytes are its own newlines");
  }

  // Dropping the raw events changes no typed record the tools use.
  const trace::Trace lean = trace::parse_trace(text, "fuzz.json", {.keep_raw_events = false});
  FUZZ_CHECK(lean.event_count == parsed.event_count && lean.allocs.size() == parsed.allocs.size() &&
                 lean.frees.size() == parsed.frees.size() && lean.truncated == parsed.truncated &&
                 lean.complete == parsed.complete,
             "keep_raw_events=false reads the same typed records");
  FUZZ_CHECK(lean.events.empty(), "keep_raw_events=false keeps no raw events");
  return 0;
}
