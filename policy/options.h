// kvremap's KVREMAP_* options: one table that drives the parser, the defaults, the docs and the trace header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "policy/commit_plan.h"
#include "policy/commit_trigger.h"

namespace kvremap::policy {

// Enum options are X-macros so that adding a value (say, `X(defer)`) is a one-line change that
// updates the enum, its names, the parser, the error text and the docs table together.
#define KVREMAP_MODES(X) X(observe) X(defer)
// Same names and order as spdlog::level::level_enum, so the interposer can convert with a cast.
#define KVREMAP_LOG_LEVELS(X) X(trace) X(debug) X(info) X(warn) X(error) X(critical) X(off)

#define KVREMAP_ENUM_VALUE(name) name,
enum class Mode : std::uint8_t { KVREMAP_MODES(KVREMAP_ENUM_VALUE) };
enum class LogLevel : std::uint8_t { KVREMAP_LOG_LEVELS(KVREMAP_ENUM_VALUE) };
#undef KVREMAP_ENUM_VALUE

std::span<const std::string_view> mode_names();       // indexed by Mode
std::span<const std::string_view> log_level_names();  // indexed by LogLevel
std::string_view to_string(Mode mode);
std::string_view to_string(LogLevel level);

// The settings in force. Build one with default_options() or parse_options(); a value-initialised
// Options{} is not the documented defaults (those live in the table only).
// KVREMAP_ENGINE's values: `detect` reads the command line; the others name the engine.
enum class EngineWhen : std::uint8_t { detect, vllm, sglang, other };
// KVREMAP_DEFICIT's values, in policy::DeficitMode's order.
// `restart`: a first start with a deficit writes its profile and exits (kExitRestartForProfile) so the
// next start is sized from it; a start that found a profile backs a deficit like `host`.
enum class DeficitWhen : std::uint8_t { host, fail, restart };
// KVREMAP_SIZING's values (policy/sizing.h): `learned` shrinks only, never more KV than the engine
// sizes alone; `fit` also grows into a measured surplus; `engine` leaves the engine's figure alone.
enum class SizingWhen : std::uint8_t { learned, fit, engine };
// The exit status of KVREMAP_DEFICIT=restart (EX_TEMPFAIL: try again), which `kvremap run` restarts on.
inline constexpr int kExitRestartForProfile = 75;
std::string_view to_string(SizingWhen sizing);
// What the commit plan does with a deficit under `when`: `restart` plans like `host` (the restart is
// decided beside the plan).
DeficitMode deficit_mode(DeficitWhen when);

struct Options {
  Mode mode{};
  // Beside `mode`: every tracked allocation reads both, so they share a cache line.
  std::uint64_t stack_min_bytes{};  // allocations of at least this many bytes get caller attribution
  TriggerMode commit{};             // KVREMAP_COMMIT
  EngineWhen engine{};
  std::uint64_t headroom_bytes{};
  DeficitWhen deficit{};
  SizingWhen sizing{};
  std::uint64_t chunk_bytes{};
  bool kv_one_handle{};  // each KV tensor on one physical handle (one device part, one host part)
  std::uint64_t scratch_bytes{};
  std::uint64_t arena_bytes{};  // 0: twice the device's memory
  std::uint64_t kv_min_bytes{};
  std::uint64_t kv_tensor_bytes{};  // 0: recognise the KV tensors' size from the burst
  bool trace{};
  std::string trace_dir;
  std::uint64_t trace_mode{};  // permission bits of new trace files (KVREMAP_TRACE_MODE), before the umask
  std::string profile_dir;     // empty: the user's cache directory; "off": no profiles
  std::string profile_path;    // read-only profile directories searched after profile_dir, ':'-separated
  std::string tool_library;    // KVREMAP_LIBRARY: the kvremap tool's, the library ignores it
  std::string metrics_file;    // KVREMAP_METRICS_FILE: empty, none
  LogLevel log_level{};
  bool strict{};
};

// optional_path: a path where empty means the option's computed default (shown as `path` in the docs);
// optional_file: the same for a file rather than a directory.
// file_mode: octal permission bits (`0600`), owner read and write included, nothing above 0777.
enum class OptionType { size, fraction, boolean, enumeration, path, count, optional_path, file_mode, optional_file, path_list };
std::string_view to_string(OptionType type);

// What an invalid value of an option turns off; everything else stays as configured.
enum class WhenInvalid : std::uint8_t {
  deferral,       // a KV-deferral setting: KVREMAP_MODE=observe (tracking and tracing go on)
  trace,          // no trace file
  sizing,         // KVREMAP_SIZING=engine: no profile sizes this start
  profiles,       // KVREMAP_PROFILE_DIR=off: no profile is read or written by this process
  default_value,  // the option keeps its default (log level, strictness, stack threshold, trace mode)
};

struct EnumIndex {
  std::size_t index;
};
// size and count -> uint64_t; fraction -> double; boolean -> bool; path, optional_path, optional_file, path_list -> string;
// enumeration -> EnumIndex.
using OptionValue = std::variant<std::uint64_t, double, bool, std::string, EnumIndex>;

// One row of the options table. assign/read bind the row to its Options field.
struct OptionSpec {
  std::string_view name;
  OptionType type;
  std::string_view default_text;              // parsed like a user's value: the only copy of the default
  std::span<const std::string_view> choices;  // enumeration only
  std::string_view help;
  void (*assign)(Options&, const OptionValue&);
  OptionValue (*read)(const Options&);
  WhenInvalid when_invalid = WhenInvalid::default_value;
};

// The end of an invalid-value line for `spec`: what kvremap does instead, e.g. "no trace is written".
std::string invalid_consequence(const OptionSpec& spec);

std::span<const OptionSpec> option_specs();
const OptionSpec* find_option(std::string_view name);

// Parses one value as the row's type; nullopt when the text is not acceptable.
std::optional<OptionValue> parse_option_value(const OptionSpec& spec, std::string_view text);
// What the row accepts, e.g. "a size such as 4096, ..." or "one of observe": the docs' Accepted
// column and the tail of every invalid-value message.
std::string accepted_values(const OptionSpec& spec);
// A value as text that parses back to the same value ("1MiB", "on", "observe").
std::string format_option_value(const OptionSpec& spec, const OptionValue& value);

struct OptionProblem {
  std::string variable;
  std::string value;    // the text the variable was set to
  std::string message;  // the complete one-line text to print, starting with "kvremap: "
};

struct ParsedOptions {
  Options options;
  std::vector<OptionProblem> problems;
  // KVREMAP_STRICT parsed as true, honoured even when other values were bad and options were reset.
  bool strict = false;
  // The caller prints every problem, then exits with status 1 when this is true.
  bool exit_requested() const { return strict && !problems.empty(); }
};

Options default_options();

// env: the process's variables as (name, value); names without the KVREMAP_ prefix are ignored, so
// the caller may pass a prefix-filtered list or all of environ. The first occurrence of a name wins,
// as with getenv. An invalid value turns off only what its option configures (OptionSpec::when_invalid,
// said at the end of its line); every other value applies. Unknown KVREMAP_* names are reported with
// the closest known name but change nothing else.
ParsedOptions parse_options(const std::vector<std::pair<std::string, std::string>>& env);

// Levenshtein distance; used to suggest the intended name for a misspelt variable.
std::size_t edit_distance(std::string_view a, std::string_view b);
// The known option name closest to `name`, if it is near enough to be a plausible typo.
std::optional<std::string_view> closest_option_name(std::string_view name);

// "| Variable | Type | Default | Accepted | Meaning |" and one row per option, '\n'-terminated lines.
std::string options_markdown_table();
// The same for a terminal of `width` columns: per option, its name, type and value when unset on one line, then what it
// accepts and means, filled and indented beneath it; a blank line between options.
std::string options_terminal_text(std::size_t width);

// One line each (without the "kvremap: " prefix) for settings in force that give up what deferral gains:
// KVREMAP_COMMIT=first-launch and KVREMAP_ENGINE=other in defer mode. Logged once at load.
std::vector<std::string> gain_notices(const Options& options);

// The settings only a device can check (its VMM granularity and memory), before the KV arena is reserved:
// one line naming the variables involved and what would work, or empty when they fit. `granularity` or
// `device_total` 0: unknown, not checked.
std::string device_option_problem(const Options& options, int device, std::uint64_t granularity,
                                  std::uint64_t device_total);

// Every option's name and value as text, in table order, for the trace header and logs.
std::vector<std::pair<std::string, std::string>> options_in_force(const Options& options);

}  // namespace kvremap::policy
