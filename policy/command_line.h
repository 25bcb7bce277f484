// Reading engine command lines as argparse does: splitting, flag values and booleans, spellings, number formats.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

// Splits /proc/<pid>/cmdline's NUL-separated contents into arguments.
std::vector<std::string> split_cmdline(std::string_view raw);

// True for a Python multiprocessing child (spawn or forkserver), whose own command line says nothing
// of the engine: the profile is then read from the nearest ancestor's.
bool is_multiprocessing_child(std::span<const std::string> argv);

// True when `argv` is a process title as setproctitle leaves /proc/<pid>/cmdline: the title, then the
// rest of the argument area zeroed (every later argument empty). A title carries none of the flags.
bool is_process_title(std::span<const std::string> argv);

// Flag names as the engines' parsers read them: vLLM's FlexibleArgumentParser takes `--enforce_eager`
// for `--enforce-eager` (utils/argparse_utils.py:314-334). Underscores in a `--` argument become dashes
// up to its `=` or the `.` of a dotted config key; values are kept as given.
std::vector<std::string> dashed_flags(std::span<const std::string> argv);

// Whether `arg` names the program or module `name`: `vllm`, `/usr/bin/vllm`, `vllm.entrypoints.openai.api_server`.
bool names_program(std::string_view arg, std::string_view name);

// Whether the first five words of `argv` start a command: one of them is one of `modules` (`python3 -m
// MODULE`), or one names the program `program` and a later one is `subcommand` (`vllm serve`).
bool starts_command(std::span<const std::string> argv, std::string_view program, std::string_view subcommand,
                    std::span<const std::string_view> modules);

// The value of an argument written `--flag=value`, or nullopt for any other argument.
std::optional<std::string_view> inline_value(std::string_view arg, std::string_view flag);

// The value of `--flag v` or `--flag=v`, last occurrence wins (as argparse does).
std::optional<std::string_view> flag_value(std::span<const std::string> argv, std::string_view flag);

// A boolean flag given as `--flag`, `--flag=true` or `--flag true`; `--no-flag`/`=false` turn it off.
bool flag_on(std::span<const std::string> argv, std::string_view flag);

// The file `--config FILE` (or `--config=FILE`) names: vLLM reads flags from it
// (utils/argparse_utils.py:477), SGLang too (server_args.py:6123). nullopt without one.
std::optional<std::string> config_file(std::span<const std::string> argv);

std::string upper(std::string_view s);

// A TCP port as the engines' parsers take it (an int in 1..65535): `fallback` when not given, 0 when
// given but not a port.
std::uint16_t port_value(std::optional<std::string_view> text, std::uint16_t fallback);

// An int as Python's int() reads it, possibly negative.
std::optional<std::int64_t> signed_count(std::string_view text);

// An int, or an integer with an SI (k, M, G, T) or IEC (Ki, Mi, Gi, Ti) suffix, case-sensitive. SI
// decimals ("25.6k") are not read: nullopt, as for anything else.
std::optional<std::uint64_t> human_readable_count(std::string_view text);

// How an option takes its value, as the engine's argparse declares it.
enum class Takes : std::uint8_t {
  one_value,  // `--port 8000`
  values,     // nargs="+": `--api-key k1 k2`
  nothing,    // store_true / BooleanOptionalAction: `--disable-log-stats`, `--no-disable-log-stats`
};

struct FlagSpec {
  std::string_view name;
  Takes takes;
};

}  // namespace kvremap::policy
