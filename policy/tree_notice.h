// Lines an engine tree prints once, not per process: which process printed them, handed to its descendants.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "policy/engine_root.h"

namespace kvremap::policy {

// Set by the process that printed its option errors, for its descendants. A wrapper (`timeout`, `nice`,
// a shell), the engine and every process the engine spawns read the same KVREMAP_* values and would
// print the same lines; the first prints them and the rest stay quiet. Only the printing is shared:
// each process still parses its own options and falls back on its own.
inline constexpr std::string_view kOptionErrorsShownVariable = "KVREMAP_OPTION_ERRORS_SHOWN";
// Set by the engine's root process once it has printed the start-up line (policy/start_line.h).
inline constexpr std::string_view kStartLineShownVariable = "KVREMAP_START_LINE_SHOWN";

struct TreeNotice {
  ProcessStamp printed_by;  // pid and start time of the process that printed the lines
  std::uint64_t lines = 0;  // lines_hash of what it printed
  bool operator==(const TreeNotice&) const = default;
};

// fnv1a_64 of the lines in order, each ended by a newline.
std::uint64_t lines_hash(std::span<const std::string> lines);

// "1:<pid>:<start time>:<16 hex digits>".
std::string encode_tree_notice(const TreeNotice& notice);
// The notice, or nullopt for anything else (another version, a non-number, a wrong digit count).
std::optional<TreeNotice> decode_tree_notice(std::string_view value);

// Whether a process about to print `lines`, whose ancestors are `ancestors` (its parent first), leaves
// them to the one that printed `inherited`: only when that one is an ancestor (pid and start time both
// match, so a value exported to a shell or a reused pid counts for nothing) and printed exactly these
// lines. A process whose lines differ from its ancestor's (other settings) prints its own.
bool printed_by_ancestor(std::span<const std::string> lines, const std::optional<TreeNotice>& inherited,
                         std::span<const ProcessStamp> ancestors);

}  // namespace kvremap::policy
