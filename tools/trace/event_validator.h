// The schema checks every event of a trace goes through as it is read: the reader's and validate's one set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/trace/hot_line.h"

namespace kvremap::trace::detail {

// True when a line scan_hot_line() read is an event the schema accepts as it is: every field an
// allocation, free, lifetime or counter sample needs is there with its type and value set. False
// sends the line through the JSON parser and EventValidator::add(), which words the problem; so this
// may be false for a conforming line, never true for one that add() would find a problem in.
bool hot_line_conforms(const ScannedEvent& event, int header_schema);

// Checks events one at a time, in file order, keeping only what the checks across events need:
// whether the header was seen, the summary's message while it may still be followed by an event,
// and the span of each complete event ("X": capture windows, allocation lifetimes) for the nesting
// check, which runs at finish(). Problems are one line each, "<source>: event <N>: <problem> (line L)".
class EventValidator {
 public:
  explicit EventValidator(std::string source) : source_(std::move(source)) {}

  void add(const nlohmann::json& event, std::size_t index, std::size_t line, int header_schema);
  // A hot line hot_line_conforms() accepted: only the checks across events are left to do.
  void add_conforming_hot(const ScannedEvent& event, std::size_t index, std::size_t line);
  // The nesting check; problems() is then complete.
  void finish();

  const std::vector<std::string>& problems() const { return problems_; }
  std::vector<std::string> take_problems() { return std::move(problems_); }

 private:
  struct Slice {
    std::int64_t begin_ns, end_ns;
    std::size_t index, line, name;  // name: position in names_
  };
  using Track = std::pair<std::int64_t, std::int64_t>;  // (pid, tid)

  void flush_summary_not_last();
  void record_slice(Track track, std::string_view name, std::int64_t begin_ns, std::int64_t end_ns, std::size_t index,
                    std::size_t line);

  std::string source_;
  std::vector<std::string> problems_;
  bool header_seen_ = false;
  std::string summary_not_last_;  // the summary's problem, should another event follow it
  std::map<Track, std::vector<Slice>> tracks_;
  Track last_track_{-1, -1};                   // the track the last slice went to, and its slices:
  std::vector<Slice>* last_slices_ = nullptr;  // consecutive lifetimes are mostly one thread's
  std::map<std::string, std::size_t, std::less<>> name_ids_;
  std::vector<std::string> names_;
};

}  // namespace kvremap::trace::detail
