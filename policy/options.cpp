// The KVREMAP_* options table and the pure parser, formatter and docs generator built on it.
#include "policy/options.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <type_traits>

#include "policy/command_line.h"
#include "policy/engine_root.h"
#include "policy/path_rules.h"
#include "policy/profile_layers.h"
#include "policy/text_wrap.h"
#include "policy/tree_notice.h"
#include "policy/printable.h"
#include "policy/units.h"

namespace kvremap::policy {
namespace {

#define KVREMAP_ENUM_NAME(name) std::string_view{#name},
constexpr std::array kModeNames{KVREMAP_MODES(KVREMAP_ENUM_NAME)};
constexpr std::array kLogLevelNames{KVREMAP_LOG_LEVELS(KVREMAP_ENUM_NAME)};
#undef KVREMAP_ENUM_NAME

constexpr std::array<std::string_view, 3> kCommitNames{"auto", "first-launch", "manual"};
constexpr std::array<std::string_view, 4> kEngineNames{"auto", "vllm", "sglang", "other"};
constexpr std::array<std::string_view, 3> kDeficitNames{"host", "fail", "restart"};
constexpr std::array<std::string_view, 3> kSizingNames{"learned", "fit", "engine"};

constexpr std::string_view kPrefix = "KVREMAP_";

// Binds a table row to one Options field; enums go through their index so one pair of helpers
// serves every enum option.
template <auto Field>
void assign_plain(Options& options, const OptionValue& value) {
  using T = std::remove_reference_t<decltype(options.*Field)>;
  options.*Field = std::get<T>(value);
}
template <auto Field>
OptionValue read_plain(const Options& options) {
  return options.*Field;
}
template <auto Field>
void assign_enum(Options& options, const OptionValue& value) {
  using T = std::remove_reference_t<decltype(options.*Field)>;
  options.*Field = static_cast<T>(std::get<EnumIndex>(value).index);
}
template <auto Field>
OptionValue read_enum(const Options& options) {
  return EnumIndex{static_cast<std::size_t>(options.*Field)};
}

constexpr std::array<OptionSpec, 22> kOptions{{
    {"KVREMAP_MODE", OptionType::enumeration, "defer", kModeNames,
     "What kvremap does: `defer` places the KV cache in its arena, defers its backing during start-up work, "
     "commits it before serving and sizes the next start from a profile; `observe` only tracks and traces CUDA "
     "memory and changes nothing.",
     assign_enum<&Options::mode>, read_enum<&Options::mode>, WhenInvalid::deferral},
    {"KVREMAP_COMMIT", OptionType::enumeration, "auto", kCommitNames,
     "When deferred KV memory is committed: `auto` before the first call that could be serving (docs/kv-deferral.md), "
     "`first-launch` before any launch after the KV burst (start-up work then gets no extra memory), `manual` at "
     "`kvremap_commit()`; every mode commits before a graph replay or a copy, memset or export of KV.",
     assign_enum<&Options::commit>, read_enum<&Options::commit>, WhenInvalid::deferral},
    {"KVREMAP_ENGINE", OptionType::enumeration, "auto", kEngineNames,
     "The engine in this process: `auto` reads it from the command line the engine was started with (read at load, "
     "handed to spawned children: docs/kv-deferral.md); `vllm`, `sglang` name it for launchers that hide it; `other` assumes no CUDA-graph capture follows "
     "the KV cache, so the commit comes before the first launch.",
     assign_enum<&Options::engine>, read_enum<&Options::engine>, WhenInvalid::deferral},
    {"KVREMAP_HEADROOM",
     OptionType::size,
     "256MiB",
     {},
     "Device memory left free when the KV cache is committed.",
     assign_plain<&Options::headroom_bytes>,
     read_plain<&Options::headroom_bytes>, WhenInvalid::deferral},
    {"KVREMAP_DEFICIT", OptionType::enumeration, "host", kDeficitNames,
     "When the KV cache does not fit at commit: `host` backs the tail with host memory where the device supports "
     "it, `fail` stops with what to change, `restart` writes the profile and exits with status 75 when no profile "
     "sized this start (`kvremap run` starts it again, sized from the profile; otherwise like `host`).",
     assign_enum<&Options::deficit>, read_enum<&Options::deficit>, WhenInvalid::deferral},
    {"KVREMAP_SIZING", OptionType::enumeration, "learned", kSizingNames,
     "How a profile of an earlier start sizes this one (docs/kv-deferral.md, Learned sizing): `learned` reports "
     "less free memory at the engine's sizing query by what the KV cache lacked, never more KV than the engine "
     "sizes alone; `fit` also grows the KV cache into a measured surplus; `engine` leaves the engine's figure alone.",
     assign_enum<&Options::sizing>, read_enum<&Options::sizing>, WhenInvalid::sizing},
    {"KVREMAP_CHUNK_BYTES",
     OptionType::size,
     "512MiB",
     {},
     "Size of each physical handle backing the KV arena (a multiple of the VMM granularity).",
     assign_plain<&Options::chunk_bytes>,
     read_plain<&Options::chunk_bytes>, WhenInvalid::deferral},
    {"KVREMAP_KV_ONE_HANDLE",
     OptionType::boolean,
     "off",
     {},
     "Back each KV tensor with one physical handle, as one `cudaMalloc` would be, instead of one per "
     "`KVREMAP_CHUNK_BYTES` (for RDMA stacks that refuse a range spanning several handles; a host tail is a "
     "second handle).",
     assign_plain<&Options::kv_one_handle>,
     read_plain<&Options::kv_one_handle>, WhenInvalid::deferral},
    {"KVREMAP_SCRATCH_BYTES",
     OptionType::size,
     "64MiB",
     {},
     "Size of the scratch handle aliased over deferred KV (divides `KVREMAP_CHUNK_BYTES`).",
     assign_plain<&Options::scratch_bytes>,
     read_plain<&Options::scratch_bytes>, WhenInvalid::deferral},
    {"KVREMAP_ARENA_BYTES",
     OptionType::size,
     "0",
     {},
     "Virtual address space reserved for the KV arena; `0` means twice the device's memory, or the device's free memory where that does not fit the process's address space.",
     assign_plain<&Options::arena_bytes>,
     read_plain<&Options::arena_bytes>, WhenInvalid::deferral},
    {"KVREMAP_KV_MIN_BYTES",
     OptionType::size,
     "64MiB",
     {},
     "Allocations at least this large made after the engine's sizing memory query are KV-cache candidates.",
     assign_plain<&Options::kv_min_bytes>,
     read_plain<&Options::kv_min_bytes>, WhenInvalid::deferral},
    {"KVREMAP_KV_TENSOR_BYTES",
     OptionType::size,
     "0",
     {},
     "Size of each KV-cache tensor, for engines whose start-up recognition misses: allocations of exactly this "
     "size inside the KV window (after the engine's sizing memory query, outside capture, until the KV cache is "
     "deferred; never while loading) are KV; `0` recognises the size from the KV burst.",
     assign_plain<&Options::kv_tensor_bytes>,
     read_plain<&Options::kv_tensor_bytes>, WhenInvalid::deferral},
    {"KVREMAP_TRACE",
     OptionType::boolean,
     "on",
     {},
     "Write one JSON trace per process that makes a tracked CUDA call (Chrome trace-event format) into "
     "`KVREMAP_TRACE_DIR`.",
     assign_plain<&Options::trace>,
     read_plain<&Options::trace>, WhenInvalid::trace},
    {"KVREMAP_TRACE_DIR",
     OptionType::path,
     ".",
     {},
     "Directory for trace files; `.` is the engine's current directory.",
     assign_plain<&Options::trace_dir>,
     read_plain<&Options::trace_dir>, WhenInvalid::trace},
    {"KVREMAP_TRACE_MODE",
     OptionType::file_mode,
     "0600",
     {},
     "Permission bits of each new trace file, less the umask; `0600` lets only the engine's user read it (the "
     "header holds the command line, redacted: docs/configuration.md, Redaction).",
     assign_plain<&Options::trace_mode>,
     read_plain<&Options::trace_mode>, WhenInvalid::default_value},
    {"KVREMAP_PROFILE_DIR",
     OptionType::optional_path,
     "",
     {},
     "Directory for the profiles defer mode writes after each commit (docs/kv-deferral.md, Profiles); empty means "
     "`$XDG_CACHE_HOME/kvremap`, else `~/.cache/kvremap`; `off` writes none.",
     assign_plain<&Options::profile_dir>,
     read_plain<&Options::profile_dir>, WhenInvalid::profiles},
    {"KVREMAP_PROFILE_PATH",
     OptionType::path_list,
     "",
     {},
     "Read-only profile directories searched, in order, after KVREMAP_PROFILE_DIR when it holds no profile of the "
     "start (an image's baked-in profiles), separated by `:`; each must be absolute and trusted like "
     "KVREMAP_PROFILE_DIR, is never written to, and one that is not is skipped with one line; empty entries are "
     "ignored (docs/kv-deferral.md, Profiles).",
     assign_plain<&Options::profile_path>,
     read_plain<&Options::profile_path>, WhenInvalid::default_value},
    {"KVREMAP_LIBRARY",
     OptionType::optional_file,
     "",
     {},
     "Read by the `kvremap` tool, not the library: the libkvremap.so `kvremap run` preloads and `kvremap libpath` "
     "prints; empty means the one installed beside the tool.",
     assign_plain<&Options::tool_library>,
     read_plain<&Options::tool_library>, WhenInvalid::default_value},
    {"KVREMAP_LOG_LEVEL", OptionType::enumeration, "warn", kLogLevelNames,
     "Least severe message kvremap logs; `off` silences it.", assign_enum<&Options::log_level>,
     read_enum<&Options::log_level>, WhenInvalid::default_value},
    {"KVREMAP_STACK_MIN_BYTES",
     OptionType::size,
     "1MiB",
     {},
     "Allocations of at least this size record their caller in the trace.",
     assign_plain<&Options::stack_min_bytes>,
     read_plain<&Options::stack_min_bytes>, WhenInvalid::default_value},
    {"KVREMAP_METRICS_FILE",
     OptionType::optional_file,
     "",
     {},
     "Prometheus text file (node_exporter's textfile collector reads it) of each process's KV cache per device — "
     "requested, on the device, on scratch, on host memory, headroom, phase, serving overflows, commit time — "
     "replaced whole at each deferral, phase change, commit and overflow; shared by the processes that name it "
     "(docs/tools.md, `kvremap status`); empty writes none.",
     assign_plain<&Options::metrics_file>,
     read_plain<&Options::metrics_file>, WhenInvalid::default_value},
    {"KVREMAP_STRICT",
     OptionType::boolean,
     "off",
     {},
     "Exit with status 1 on any configuration problem, at load or when the device first checks the KV settings, "
     "instead of running without what the problem configures.",
     assign_plain<&Options::strict>,
     read_plain<&Options::strict>, WhenInvalid::default_value},
}};

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The largest binary unit that divides the size exactly, so the text parses back to the same bytes.
std::string format_size_exactly(std::uint64_t bytes) {
  static constexpr std::array<std::string_view, 4> units{"TiB", "GiB", "MiB", "KiB"};
  for (std::size_t i = 0; i < units.size() && bytes != 0; ++i) {
    const unsigned shift = 40 - 10 * static_cast<unsigned>(i);
    if (bytes % (std::uint64_t{1} << shift) == 0) return std::to_string(bytes >> shift) + std::string(units[i]);
  }
  return std::to_string(bytes);
}

std::string format_double(double value) {
  std::array<char, 32> buffer{};
  // Fixed notation: parse_fraction reads no exponents ("1e-07" would not parse back).
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::string("?");
}

std::string join_choices(std::span<const std::string_view> choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i != 0) out += ", ";
    out += choices[i];
  }
  return out;
}

// Markdown table cells must not contain a bare '|'.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string size_text(std::uint64_t bytes) { return format_size_exactly(bytes); }

// Octal permission bits, "0640": at most four digits, nothing above 0777 (no set-id or sticky bits),
// owner read and write included (the file would be useless to its own user otherwise).
std::optional<std::uint64_t> parse_file_mode(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.size() > 4) return std::nullopt;
  std::uint64_t mode = 0;
  for (const char c : text) {
    if (c < '0' || c > '7') return std::nullopt;
    mode = mode * 8 + static_cast<std::uint64_t>(c - '0');
  }
  if (mode > 0777 || (mode & 0600) != 0600) return std::nullopt;
  return mode;
}

std::string format_file_mode(std::uint64_t mode) {
  std::string out = "0000";
  for (std::size_t i = 3; i > 0; --i, mode >>= 3) out[i] = static_cast<char>('0' + (mode & 7));
  return out;
}

// A scratch size that works on this device: the granule doubled while it stays at most `wanted` and
// divides `chunk` (itself a multiple of the granule), so the suggestion is as close to the asked size
// as a whole number of granules dividing the chunk allows.
std::uint64_t scratch_that_fits(std::uint64_t chunk, std::uint64_t granule, std::uint64_t wanted) {
  std::uint64_t s = granule;
  while (s <= wanted / 2 && chunk % (s * 2) == 0) s *= 2;
  return s;
}

// The largest power of two that divides `chunk` and is at most `limit` (at least 1).
std::uint64_t power_of_two_divisor(std::uint64_t chunk, std::uint64_t limit) {
  std::uint64_t d = 1;
  while (d * 2 <= limit && chunk % (d * 2) == 0) d *= 2;
  return d;
}

// Settings that are each valid but cannot work together, and settings that would do nothing.
std::vector<OptionProblem> combination_problems(const Options& o, const std::vector<std::string_view>& given) {
  std::vector<OptionProblem> out;
  auto add = [&](std::string_view variable, std::uint64_t value, std::string message) {
    out.push_back({std::string(variable), size_text(value), "kvremap: " + std::move(message)});
  };
  if (o.mode != Mode::defer) {
    static constexpr std::array<std::string_view, 12> kDeferOnly{
        "KVREMAP_COMMIT",       "KVREMAP_ENGINE",          "KVREMAP_HEADROOM",      "KVREMAP_DEFICIT",
        "KVREMAP_SIZING",       "KVREMAP_CHUNK_BYTES",     "KVREMAP_KV_ONE_HANDLE", "KVREMAP_SCRATCH_BYTES",
        "KVREMAP_ARENA_BYTES",  "KVREMAP_KV_MIN_BYTES",    "KVREMAP_KV_TENSOR_BYTES", "KVREMAP_PROFILE_DIR"};
    for (std::string_view name : given)
      if (std::find(kDeferOnly.begin(), kDeferOnly.end(), name) != kDeferOnly.end())
        out.push_back({std::string(name), "",
                       "kvremap: " + std::string(name) + " has no effect with KVREMAP_MODE=" +
                           std::string(to_string(o.mode)) + ": set KVREMAP_MODE=defer to use it"});
    return out;
  }
  const std::string chunk = "KVREMAP_CHUNK_BYTES=" + size_text(o.chunk_bytes);
  const std::string scratch = "KVREMAP_SCRATCH_BYTES=" + size_text(o.scratch_bytes);
  if (o.chunk_bytes == 0) {
    add("KVREMAP_CHUNK_BYTES", 0,
        chunk +
            " is too small: KV is backed by chunks of at least the VMM granularity; use "
            "a size such as 512MiB");
  } else if (o.scratch_bytes == 0) {
    add("KVREMAP_SCRATCH_BYTES", 0,
        scratch + " is too small: use a size that divides " + chunk + ", such as " +
            size_text(power_of_two_divisor(o.chunk_bytes, 64ULL << 20)));
  } else if (o.scratch_bytes > o.chunk_bytes || o.chunk_bytes % o.scratch_bytes != 0) {
    add("KVREMAP_SCRATCH_BYTES", o.scratch_bytes,
        scratch + " does not divide " + chunk +
            ": the scratch is mapped a whole number of times over each chunk; use " +
            size_text(power_of_two_divisor(o.chunk_bytes, o.scratch_bytes)) + " or another divisor of the chunk");
  }
  if (o.arena_bytes != 0 && o.chunk_bytes != 0 && o.arena_bytes < o.chunk_bytes)
    add("KVREMAP_ARENA_BYTES", o.arena_bytes,
        "KVREMAP_ARENA_BYTES=" + size_text(o.arena_bytes) + " is below " + chunk +
            ": the arena must hold at least one chunk; use 0 (twice the device memory) or at least " +
            size_text(o.chunk_bytes));
  return out;
}

}  // namespace

std::span<const std::string_view> mode_names() { return kModeNames; }
std::span<const std::string_view> log_level_names() { return kLogLevelNames; }

std::string_view to_string(Mode mode) {
  const auto i = static_cast<std::size_t>(mode);
  return i < kModeNames.size() ? kModeNames[i] : std::string_view("?");
}

DeficitMode deficit_mode(DeficitWhen when) { return when == DeficitWhen::fail ? DeficitMode::fail : DeficitMode::host; }

std::string_view to_string(SizingWhen sizing) {
  const auto i = static_cast<std::size_t>(sizing);
  return i < kSizingNames.size() ? kSizingNames[i] : std::string_view("?");
}

std::string_view to_string(LogLevel level) {
  const auto i = static_cast<std::size_t>(level);
  return i < kLogLevelNames.size() ? kLogLevelNames[i] : std::string_view("?");
}

std::string_view to_string(OptionType type) {
  switch (type) {
    case OptionType::size:
      return "size";
    case OptionType::fraction:
      return "fraction";
    case OptionType::boolean:
      return "bool";
    case OptionType::enumeration:
      return "enum";
    case OptionType::path:
    case OptionType::optional_path:
    case OptionType::optional_file:
      return "path";
    case OptionType::path_list:
      return "paths";
    case OptionType::count:
      return "count";
    case OptionType::file_mode:
      return "mode";
  }
  return "?";
}

std::span<const OptionSpec> option_specs() { return kOptions; }

const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& spec : kOptions)
    if (spec.name == name) return &spec;
  return nullptr;
}

std::optional<OptionValue> parse_option_value(const OptionSpec& spec, std::string_view text) {
  switch (spec.type) {
    case OptionType::size:
      if (auto v = parse_size(text)) return OptionValue{*v};
      return std::nullopt;
    case OptionType::count:
      if (auto v = parse_count(text)) return OptionValue{*v};
      return std::nullopt;
    case OptionType::fraction:
      if (auto v = parse_fraction(text)) return OptionValue{*v};
      return std::nullopt;
    case OptionType::boolean:
      if (auto v = parse_bool(text)) return OptionValue{*v};
      return std::nullopt;
    case OptionType::enumeration:
      for (std::size_t i = 0; i < spec.choices.size(); ++i)
        if (iequals(trim(text), spec.choices[i])) return OptionValue{EnumIndex{i}};
      return std::nullopt;
    case OptionType::path:
      // Paths are taken verbatim (spaces are legal in them); only an empty one means nothing.
      if (text.empty()) return std::nullopt;
      return OptionValue{std::string(text)};
    case OptionType::optional_path:
    case OptionType::optional_file:
    case OptionType::path_list:
      return OptionValue{std::string(text)};
    case OptionType::file_mode:
      if (auto v = parse_file_mode(text)) return OptionValue{*v};
      return std::nullopt;
  }
  return std::nullopt;
}

std::string accepted_values(const OptionSpec& spec) {
  switch (spec.type) {
    case OptionType::size:
      return std::string(kSizeSyntax);
    case OptionType::fraction:
      return std::string(kFractionSyntax);
    case OptionType::boolean:
      return std::string(kBoolSyntax);
    case OptionType::enumeration:
      return "one of " + join_choices(spec.choices);
    case OptionType::path:
      return "a non-empty directory path";
    case OptionType::optional_path:
      return "a directory path, `off`, or empty for the default";
    case OptionType::optional_file:
      return "a file path, or empty for the default";
    case OptionType::path_list:
      return "absolute directory paths separated by `:`, or empty for none";
    case OptionType::count:
      return "a whole number such as 0, 8 or 1000";
    case OptionType::file_mode:
      return "an octal mode such as 0600 or 0640: permission bits only (at most 0777), owner read and write included";
  }
  return "?";
}

std::string format_option_value(const OptionSpec& spec, const OptionValue& value) {
  switch (spec.type) {
    case OptionType::size:
      return format_size_exactly(std::get<std::uint64_t>(value));
    case OptionType::count:
      return std::to_string(std::get<std::uint64_t>(value));
    case OptionType::fraction:
      return format_double(std::get<double>(value));
    case OptionType::boolean:
      return std::get<bool>(value) ? "on" : "off";
    case OptionType::path:
    case OptionType::optional_path:
    case OptionType::optional_file:
    case OptionType::path_list:
      return std::get<std::string>(value);
    case OptionType::enumeration: {
      const std::size_t i = std::get<EnumIndex>(value).index;
      return i < spec.choices.size() ? std::string(spec.choices[i]) : std::string("?");
    }
    case OptionType::file_mode:
      return format_file_mode(std::get<std::uint64_t>(value));
  }
  return "?";
}

Options default_options() {
  Options options;
  // A default that fails to parse is a table bug; test_options checks every row, so skip silently.
  for (const OptionSpec& spec : kOptions)
    if (auto value = parse_option_value(spec, spec.default_text)) spec.assign(options, *value);
  return options;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the classic dynamic programme: row[j] = distance(a[0..i), b[0..j)).
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closest_option_name(std::string_view name) {
  // Further than this, a "did you mean" is more likely to mislead than to help.
  constexpr std::size_t kMaxSuggestionDistance = 3;
  const std::string wanted = upper(name);
  std::optional<std::string_view> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const OptionSpec& spec : kOptions) {
    const std::size_t d = edit_distance(wanted, spec.name);
    if (d < best_distance) {
      best_distance = d;
      best = spec.name;
    }
  }
  if (best_distance > kMaxSuggestionDistance) return std::nullopt;
  return best;
}

std::string invalid_consequence(const OptionSpec& spec) {
  switch (spec.when_invalid) {
    case WhenInvalid::deferral:
      return "KV deferral is off (KVREMAP_MODE=observe); tracking and tracing go on";
    case WhenInvalid::trace:
      return "no trace is written; KV deferral and tracking go on";
    case WhenInvalid::sizing:
      return "no profile sizes this start (KVREMAP_SIZING=engine)";
    case WhenInvalid::profiles:
      return "profiles are off for this process (KVREMAP_PROFILE_DIR=off); KV deferral, tracking and tracing go on";
    case WhenInvalid::default_value:
      break;
  }
  return std::string(spec.name) + " stays " + (spec.default_text.empty() ? "empty" : std::string(spec.default_text));
}

ParsedOptions parse_options(const std::vector<std::pair<std::string, std::string>>& env) {
  ParsedOptions parsed;
  Options requested = default_options();
  std::vector<const OptionSpec*> invalid;
  std::vector<std::string_view> seen;

  for (const auto& [name, value] : env) {
    if (!name.starts_with(kPrefix)) continue;
    // Set by kvremap itself for the engine's descendants (policy/engine_root.h, policy/tree_notice.h):
    // not settings.
    if (name == kEngineRootVariable || name == kOptionErrorsShownVariable || name == kStartLineShownVariable) continue;
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
    seen.push_back(name);

    const OptionSpec* spec = find_option(name);
    if (spec == nullptr) {
      std::string message = "kvremap: unknown variable " + printable(name);
      if (auto suggestion = closest_option_name(name)) message += " (did you mean " + std::string(*suggestion) + "?)";
      parsed.problems.push_back({name, value, std::move(message)});
      continue;
    }
    // A path that breaks the path rules is refused before anything opens or creates it by that name.
    const bool is_path = spec->type == OptionType::path || spec->type == OptionType::optional_path ||
                         spec->type == OptionType::optional_file;
    if (const auto bad_path = is_path ? path_problem(value) : std::nullopt) {
      invalid.push_back(spec);
      parsed.problems.push_back({name, value,
                                 "kvremap: " + name + "='" + printable(value) + "' " + *bad_path + ": expected " +
                                     std::string(kPathRulesSummary) + "; " + invalid_consequence(*spec)});
      continue;
    }
    if (auto parsed_value = parse_option_value(*spec, value)) {
      spec->assign(requested, *parsed_value);
      continue;
    }
    invalid.push_back(spec);
    parsed.problems.push_back({name, value,
                               "kvremap: " + name + "='" + printable(value) + "' is invalid: expected " +
                                   accepted_values(*spec) + "; " + invalid_consequence(*spec)});
  }

  // A list of paths: each entry obeys the path rules (policy/profile_layers.h); a bad one is skipped.
  if (auto bad = profile_path_problem(requested.profile_path))
    parsed.problems.push_back({std::string(kProfilePathVariable), requested.profile_path, std::move(*bad)});
  // Only valid values reach `requested`, so this is exactly "KVREMAP_STRICT parsed as true".
  parsed.strict = requested.strict;
  // An invalid value turns off what it configures and nothing else: a bad trace directory must not
  // cost the deferral an engine may need to fit, nor a bad KV setting the trace that would show why.
  bool deferral_off = false;
  for (const OptionSpec* spec : invalid) {
    switch (spec->when_invalid) {
      case WhenInvalid::deferral:
        deferral_off = true;
        break;
      case WhenInvalid::trace:
        requested.trace = false;
        break;
      case WhenInvalid::sizing:
        requested.sizing = SizingWhen::engine;
        break;
      case WhenInvalid::profiles:
        requested.profile_dir = "off";
        break;
      case WhenInvalid::default_value:
        break;  // never assigned: the default stands
    }
  }
  // Settings that cannot work together are judged only on a configuration that could defer.
  if (!deferral_off) {
    std::vector<OptionProblem> conflicts = combination_problems(requested, seen);
    deferral_off = !conflicts.empty() && requested.mode == Mode::defer;
    for (OptionProblem& p : conflicts) parsed.problems.push_back(std::move(p));
  }
  if (deferral_off) requested.mode = Mode::observe;
  parsed.options = requested;
  return parsed;
}

std::vector<std::string> gain_notices(const Options& o) {
  std::vector<std::string> out;
  if (o.mode != Mode::defer) return out;
  static constexpr std::string_view kNoGain =
      "the KV cache is committed before the first launch after the KV burst; autotuning and CUDA-graph capture get "
      "no extra memory";
  if (o.commit == TriggerMode::first_launch)
    out.push_back("KVREMAP_COMMIT=first-launch: " + std::string(kNoGain));
  if (o.engine == EngineWhen::other)
    out.push_back("KVREMAP_ENGINE=other: no capture is expected after the KV cache, so " + std::string(kNoGain));
  return out;
}

std::string device_option_problem(const Options& o, int device, std::uint64_t granule, std::uint64_t device_total) {
  const std::string dev = "device " + std::to_string(device);
  // Figures as the log writes them ("2.00 MiB"): these lines are logged beside the driver's.
  const std::string chunk = "KVREMAP_CHUNK_BYTES=" + format_bytes(o.chunk_bytes);
  if (granule != 0 && o.chunk_bytes % granule != 0)
    return "kvremap: " + chunk + " is not a multiple of " + dev + "'s VMM granularity (" + format_bytes(granule) +
           "): use a multiple such as " + format_bytes((o.chunk_bytes / granule + 1) * granule);
  if (granule != 0 && o.scratch_bytes % granule != 0)
    return "kvremap: KVREMAP_SCRATCH_BYTES=" + format_bytes(o.scratch_bytes) + " is not a multiple of " + dev +
           "'s VMM granularity (" + format_bytes(granule) + "): the scratch is mapped in whole granules; use " +
           format_bytes(scratch_that_fits(o.chunk_bytes, granule, o.scratch_bytes)) +
           " or another multiple of the granularity that divides " + chunk;
  if (device_total != 0 && o.headroom_bytes >= device_total)
    return "kvremap: KVREMAP_HEADROOM=" + format_bytes(o.headroom_bytes) + " is not below " + dev + "'s memory (" +
           format_bytes(device_total) + "): use a headroom such as 1GiB";
  if (o.arena_bytes == 0 && device_total != 0 && o.chunk_bytes > 2 * device_total)
    return "kvremap: " + chunk + " is larger than the KV arena (KVREMAP_ARENA_BYTES=0: twice " + dev +
           "'s memory, " + format_bytes(2 * device_total) + "): the arena must hold at least one chunk; use a chunk of "
           "at most " + format_bytes(2 * device_total) + " or set KVREMAP_ARENA_BYTES to at least " +
           format_bytes(o.chunk_bytes);
  return {};
}

std::string options_markdown_table() {
  std::string out = "| Variable | Type | Default | Accepted | Meaning |\n|---|---|---|---|---|\n";
  for (const OptionSpec& spec : kOptions) {
    // An empty default would render as an unreadable pair of backticks.
    const std::string default_cell = spec.default_text.empty() ? "empty" : "`" + std::string(spec.default_text) + "`";
    out += "| `" + std::string(spec.name) + "` | " + std::string(to_string(spec.type)) + " | " + default_cell + " | " +
           cell(accepted_values(spec)) + " | " + cell(spec.help) + " |\n";
  }
  return out;
}

std::string options_terminal_text(std::size_t width) {
  std::string out;
  for (const OptionSpec& spec : kOptions) {
    if (!out.empty()) out += '\n';
    // "(size, 256MiB when unset)": the word "default" built from short pieces reads as a misspelling to lintian.
    out += std::string(spec.name) + " (" + std::string(to_string(spec.type)) + ", " +
           (spec.default_text.empty() ? std::string("empty") : std::string(spec.default_text)) + " when unset)\n";
    out += wrap_text("Accepts " + without_backticks(accepted_values(spec)) + ".", width, "    ");
    out += wrap_text(without_backticks(spec.help), width, "    ");
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> options_in_force(const Options& options) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(kOptions.size());
  for (const OptionSpec& spec : kOptions)
    out.emplace_back(std::string(spec.name), format_option_value(spec, spec.read(options)));
  return out;
}

}  // namespace kvremap::policy
