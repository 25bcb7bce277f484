// A scanner for the writer's fixed-format hot lines (allocations, frees, lifetimes, counter samples) that builds no JSON document.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvremap::trace::detail {

// One member of a scanned event's args: a string without escapes or a non-negative integer.
struct ScannedValue {
  std::string_view key;
  std::string_view text;  // a string's contents
  std::uint64_t number = 0;
  bool is_string = false;
};

inline constexpr std::size_t kMaxScannedArgs = 12;

// A hot event's fields; the accessors answer what json_access.h's would for the same parsed line.
struct ScannedEvent {
  std::string_view ph;
  std::string_view cat;
  std::string_view name;
  double ts_us = 0;
  double dur_us = 0;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  bool has_pid = false;  // tid, ts and args are always there: scan_hot_line() needs them
  bool has_dur = false;
  std::array<ScannedValue, kMaxScannedArgs> args;
  std::size_t arg_count = 0;

  std::string_view string_arg(std::string_view key) const;
  std::uint64_t uint_arg(std::string_view key) const;
  std::int64_t int_arg(std::string_view key) const;
};

// True when `line` (one event, without its separating comma) is an allocation, free, lifetime or
// counter sample in the plain shape the writer uses: one flat object with the keys ph, cat, name, s,
// pid, tid, ts, dur and args (each at most once), args one level of unescaped ASCII strings and
// non-negative integers. False whenever anything else is seen — the caller then uses the full JSON
// parser, which also words the errors — so the scanner never has to be right about odd input.
bool scan_hot_line(std::string_view line, ScannedEvent& event);

}  // namespace kvremap::trace::detail
