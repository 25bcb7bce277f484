// Unit tests for policy/options: the KVREMAP_* table, its parser's messages and the generated docs table.
#include "policy/options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

using namespace kvremap::policy;

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> messages(const ParsedOptions& parsed) {
  std::vector<std::string> out;
  for (const auto& problem : parsed.problems) out.push_back(problem.message);
  return out;
}

}  // namespace

TEST(Options, DefaultsComeFromTheTable) {
  const Options o = default_options();
  EXPECT_EQ(o.mode, Mode::defer);
  EXPECT_EQ(o.sizing, SizingWhen::learned);
  EXPECT_EQ(o.deficit, DeficitWhen::host);
  EXPECT_TRUE(o.trace);
  EXPECT_EQ(o.trace_dir, ".");
  EXPECT_EQ(o.log_level, LogLevel::warn);
  EXPECT_EQ(o.stack_min_bytes, 1ull << 20);
  EXPECT_FALSE(o.strict);
  for (const OptionSpec& spec : option_specs())
    EXPECT_TRUE(parse_option_value(spec, spec.default_text).has_value()) << spec.name;

  const ParsedOptions empty = parse_options({});
  EXPECT_TRUE(empty.problems.empty());
  EXPECT_EQ(options_in_force(empty.options), options_in_force(o));
}

TEST(Options, ParsesEveryKnownVariable) {
  const ParsedOptions parsed = parse_options({{"KVREMAP_MODE", "observe"},
                                              {"KVREMAP_TRACE", "no"},
                                              {"KVREMAP_TRACE_DIR", "/tmp/my traces"},
                                              {"KVREMAP_LOG_LEVEL", "DEBUG"},
                                              {"KVREMAP_STACK_MIN_BYTES", "64KiB"},
                                              {"KVREMAP_STRICT", "1"}});
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_FALSE(parsed.options.trace);
  EXPECT_EQ(parsed.options.trace_dir, "/tmp/my traces");
  EXPECT_EQ(parsed.options.log_level, LogLevel::debug);
  EXPECT_EQ(parsed.options.stack_min_bytes, 64u << 10);
  EXPECT_TRUE(parsed.options.strict);
  EXPECT_TRUE(parsed.strict);
  EXPECT_FALSE(parsed.exit_requested());
}

// Empty is the user's cache directory (resolved by the library), `off` no profiles: both are values, not errors.
TEST(Options, ProfileDirTakesAPathOffOrEmpty) {
  EXPECT_EQ(default_options().profile_dir, "");
  for (const char* value : {"", "off", "/tmp/my profiles"}) {
    const ParsedOptions parsed = parse_options({{"KVREMAP_PROFILE_DIR", value}, {"KVREMAP_MODE", "defer"}});
    EXPECT_TRUE(parsed.problems.empty()) << value;
    EXPECT_EQ(parsed.options.profile_dir, value);
    EXPECT_EQ(parsed.options.mode, Mode::defer);
  }
}

TEST(Options, BadSizeHasTheExactMessage) {
  const ParsedOptions parsed = parse_options({{"KVREMAP_STACK_MIN_BYTES", "abc"}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_EQ(parsed.problems[0].variable, "KVREMAP_STACK_MIN_BYTES");
  EXPECT_EQ(parsed.problems[0].value, "abc");
  EXPECT_EQ(parsed.problems[0].message,
            "kvremap: KVREMAP_STACK_MIN_BYTES='abc' is invalid: expected a size such as 4096, 64KiB, 512MiB, "
            "1.5G or 2GiB; KVREMAP_STACK_MIN_BYTES stays 1MiB");
}

TEST(Options, BadEnumAndBoolListWhatIsAccepted) {
  EXPECT_EQ(messages(parse_options({{"KVREMAP_MODE", "turbo"}})),
            std::vector<std::string>{"kvremap: KVREMAP_MODE='turbo' is invalid: expected one of observe, defer"
                                     "; KV deferral is off (KVREMAP_MODE=observe); tracking and tracing go on"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_COMMIT", "later"}})),
            std::vector<std::string>{"kvremap: KVREMAP_COMMIT='later' is invalid: expected one of auto, first-launch, "
                                     "manual; KV deferral is off (KVREMAP_MODE=observe); tracking and tracing go on"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_ENGINE", "trtllm"}})),
            std::vector<std::string>{"kvremap: KVREMAP_ENGINE='trtllm' is invalid: expected one of auto, vllm, "
                                     "sglang, other; KV deferral is off (KVREMAP_MODE=observe); tracking and tracing go on"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_LOG_LEVEL", "loud"}})),
            std::vector<std::string>{"kvremap: KVREMAP_LOG_LEVEL='loud' is invalid: expected one of trace, debug, "
                                     "info, warn, error, critical, off; KVREMAP_LOG_LEVEL stays warn"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACE", "maybe"}})),
            std::vector<std::string>{"kvremap: KVREMAP_TRACE='maybe' is invalid: expected 1/0, true/false, "
                                     "yes/no or on/off; no trace is written; KV deferral and tracking go on"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACE_DIR", ""}})),
            std::vector<std::string>{"kvremap: KVREMAP_TRACE_DIR='' is invalid: expected a non-empty directory path; "
                                     "no trace is written; KV deferral and tracking go on"});
}

// An invalid value turns off what it configures, nothing else: an empty KVREMAP_TRACE_DIR (an unset
// shell variable) costs the trace, never the deferral an engine may need to fit.
TEST(Options, AnInvalidValueDisablesOnlyWhatItConfigures) {
  const ParsedOptions no_dir = parse_options({{"KVREMAP_TRACE_DIR", ""}, {"KVREMAP_LOG_LEVEL", "info"}});
  ASSERT_EQ(no_dir.problems.size(), 1u);
  EXPECT_EQ(no_dir.options.mode, Mode::defer) << "deferral stays on";
  EXPECT_FALSE(no_dir.options.trace);
  EXPECT_EQ(no_dir.options.log_level, LogLevel::info) << "the other values apply";

  const ParsedOptions no_stack =
      parse_options({{"KVREMAP_TRACE", "off"}, {"KVREMAP_LOG_LEVEL", "info"}, {"KVREMAP_STACK_MIN_BYTES", "1.5"}});
  ASSERT_EQ(no_stack.problems.size(), 1u);
  EXPECT_EQ(no_stack.options.mode, Mode::defer);
  EXPECT_FALSE(no_stack.options.trace);
  EXPECT_EQ(no_stack.options.log_level, LogLevel::info);
  EXPECT_EQ(no_stack.options.stack_min_bytes, 1ull << 20) << "the default threshold";

  // A bad KV setting turns deferral off (a half-configured arena could do what nobody asked), and
  // reports no "has no effect" lines for the other KV settings given; tracing goes on as configured.
  const ParsedOptions bad_kv = parse_options(
      {{"KVREMAP_HEADROOM", "lots"}, {"KVREMAP_COMMIT", "manual"}, {"KVREMAP_TRACE_DIR", "/tmp/t"}});
  ASSERT_EQ(bad_kv.problems.size(), 1u) << bad_kv.problems.back().message;
  EXPECT_EQ(bad_kv.options.mode, Mode::observe);
  EXPECT_TRUE(bad_kv.options.trace);
  EXPECT_EQ(bad_kv.options.trace_dir, "/tmp/t");

  const ParsedOptions bad_sizing = parse_options({{"KVREMAP_SIZING", "guess"}});
  EXPECT_EQ(bad_sizing.options.mode, Mode::defer);
  EXPECT_EQ(bad_sizing.options.sizing, SizingWhen::engine);
  EXPECT_FALSE(bad_sizing.exit_requested());

  // Every row says what its invalid value turns off.
  for (const OptionSpec& spec : option_specs()) EXPECT_FALSE(invalid_consequence(spec).empty()) << spec.name;
}

TEST(Options, TraceModeTakesPermissionBitsOnly) {
  EXPECT_EQ(default_options().trace_mode, 0600u);
  const OptionSpec& spec = *find_option("KVREMAP_TRACE_MODE");
  for (const auto& [text, mode] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"0600", 0600}, {"640", 0640}, {" 0644 ", 0644}, {"0777", 0777}}) {
    const ParsedOptions parsed = parse_options({{"KVREMAP_TRACE_MODE", text}});
    EXPECT_TRUE(parsed.problems.empty()) << text;
    EXPECT_EQ(parsed.options.trace_mode, mode) << text;
    EXPECT_EQ(std::get<std::uint64_t>(*parse_option_value(spec, format_option_value(spec, OptionValue{mode}))), mode);
  }
  EXPECT_EQ(format_option_value(spec, OptionValue{std::uint64_t{0640}}), "0640");
  for (const char* bad : {"4755", "2640", "1777", "0044", "0400", "", "0o600", "rw-------", "0680", "00600", "-600"}) {
    const ParsedOptions parsed = parse_options({{"KVREMAP_TRACE_MODE", bad}});
    ASSERT_EQ(parsed.problems.size(), 1u) << bad;
    EXPECT_EQ(parsed.options.trace_mode, 0600u) << bad;
    EXPECT_EQ(parsed.options.mode, Mode::defer) << bad;
    EXPECT_TRUE(parsed.options.trace) << bad;
  }
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACE_MODE", "4755"}})),
            std::vector<std::string>{"kvremap: KVREMAP_TRACE_MODE='4755' is invalid: expected an octal mode such as "
                                     "0600 or 0640: permission bits only (at most 0777), owner read and write "
                                     "included; KVREMAP_TRACE_MODE stays 0600"});
}

TEST(Options, SettingsThatGiveUpTheGainSaySoOnce) {
  EXPECT_TRUE(gain_notices(default_options()).empty());
  EXPECT_EQ(gain_notices(parse_options({{"KVREMAP_COMMIT", "first-launch"}}).options),
            std::vector<std::string>{"KVREMAP_COMMIT=first-launch: the KV cache is committed before the first launch "
                                     "after the KV burst; autotuning and CUDA-graph capture get no extra memory"});
  const auto other = gain_notices(parse_options({{"KVREMAP_ENGINE", "other"}}).options);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_TRUE(other[0].starts_with("KVREMAP_ENGINE=other: ")) << other[0];
  EXPECT_NE(other[0].find("no extra memory"), std::string::npos);
  EXPECT_TRUE(gain_notices(parse_options({{"KVREMAP_MODE", "observe"}, {"KVREMAP_COMMIT", "first-launch"}}).options)
                  .empty())
      << "observe mode gains nothing to give up (its own line says the setting has no effect)";
}

TEST(Options, DeviceChecksNameTheVariablesAndWhatWouldWork) {
  const Options d = default_options();
  constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
  EXPECT_EQ(device_option_problem(d, 0, 2 * MiB, 80 * GiB), "");
  EXPECT_EQ(device_option_problem(d, 0, 0, 0), "") << "unknown figures are not checked";
  Options scratch = d;
  scratch.scratch_bytes = 1 * MiB;
  EXPECT_EQ(device_option_problem(scratch, 0, 2 * MiB, 80 * GiB),
            "kvremap: KVREMAP_SCRATCH_BYTES=1.00 MiB is not a multiple of device 0's VMM granularity (2.00 MiB): the "
            "scratch is mapped in whole granules; use 2.00 MiB or another multiple of the granularity that divides "
            "KVREMAP_CHUNK_BYTES=512.00 MiB");
  scratch.scratch_bytes = 48 * MiB;
  EXPECT_NE(device_option_problem(scratch, 1, 32 * MiB, 80 * GiB).find("use 32.00 MiB"), std::string::npos);
  Options chunk = d;
  chunk.chunk_bytes = 4 * GiB;
  EXPECT_EQ(device_option_problem(chunk, 2, 2 * MiB, 1 * GiB),
            "kvremap: KVREMAP_CHUNK_BYTES=4.00 GiB is larger than the KV arena (KVREMAP_ARENA_BYTES=0: twice device "
            "2's memory, 2.00 GiB): the arena must hold at least one chunk; use a chunk of at most 2.00 GiB or set "
            "KVREMAP_ARENA_BYTES to at least 4.00 GiB");
  chunk.arena_bytes = 8 * GiB;
  EXPECT_EQ(device_option_problem(chunk, 2, 2 * MiB, 1 * GiB), "") << "an arena the user sized holds the chunk";
}

TEST(Options, StrictIsHonouredEvenWhenOtherValuesAreBad) {
  const ParsedOptions parsed = parse_options({{"KVREMAP_STRICT", "yes"}, {"KVREMAP_TRACE", "2"}});
  EXPECT_TRUE(parsed.strict);
  EXPECT_TRUE(parsed.options.strict);
  EXPECT_TRUE(parsed.exit_requested());

  // Unknown variables are problems too: strict exits on them.
  EXPECT_TRUE(parse_options({{"KVREMAP_STRICT", "on"}, {"KVREMAP_TRAC", "1"}}).exit_requested());
  // A bad KVREMAP_STRICT is not a request for strictness.
  const ParsedOptions bad_strict = parse_options({{"KVREMAP_STRICT", "very"}});
  EXPECT_FALSE(bad_strict.strict);
  EXPECT_FALSE(bad_strict.exit_requested());
  ASSERT_EQ(bad_strict.problems.size(), 1u);
}

TEST(Options, UnknownVariableSuggestsTheClosestName) {
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACEDIR", "/tmp"}})),
            std::vector<std::string>{"kvremap: unknown variable KVREMAP_TRACEDIR (did you mean KVREMAP_TRACE_DIR?)"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_log_level", "info"}})),
            std::vector<std::string>{"kvremap: unknown variable KVREMAP_log_level (did you mean KVREMAP_LOG_LEVEL?)"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_GPU_BUDGET", "1"}})),
            std::vector<std::string>{"kvremap: unknown variable KVREMAP_GPU_BUDGET"});
}

TEST(Options, UnknownVariablesDoNotResetOtherOptions) {
  const ParsedOptions parsed = parse_options({{"KVREMAP_STACK_MIN_BYTE", "4096"}, {"KVREMAP_TRACE", "off"}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_FALSE(parsed.options.trace);
  EXPECT_EQ(parsed.options.stack_min_bytes, 1ull << 20);
}

TEST(Options, IgnoresOtherPrefixesAndTakesTheFirstOccurrence) {
  const ParsedOptions parsed =
      parse_options({{"PATH", "/bin"}, {"KVREMAPX", "1"}, {"KVREMAP_TRACE", "off"}, {"KVREMAP_TRACE", "junk"}});
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_FALSE(parsed.options.trace);
}

TEST(Options, EditDistanceIsLevenshtein) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("KVREMAP_TRACEDIR", "KVREMAP_TRACE_DIR"), 1u);
  EXPECT_EQ(closest_option_name("KVREMAP_MOD"), "KVREMAP_MODE");
  EXPECT_FALSE(closest_option_name("KVREMAP_SOMETHING_ELSE").has_value());
}

TEST(Options, EveryTypeParsesAndFormatsBack) {
  const std::string_view choices[] = {"a", "b"};
  const OptionSpec fraction{"F", OptionType::fraction, "0.5", {}, "", nullptr, nullptr};
  const OptionSpec count{"C", OptionType::count, "1", {}, "", nullptr, nullptr};
  const OptionSpec size{"S", OptionType::size, "1", {}, "", nullptr, nullptr};
  const OptionSpec enumeration{"E", OptionType::enumeration, "a", choices, "", nullptr, nullptr};
  EXPECT_EQ(format_option_value(fraction, *parse_option_value(fraction, "2%")), "0.02");
  // Small fractions are written without an exponent, so they parse back (found by fuzzing).
  EXPECT_EQ(format_option_value(fraction, *parse_option_value(fraction, "0.0000001")), "0.0000001");
  EXPECT_FALSE(parse_option_value(fraction, "150%"));
  EXPECT_EQ(accepted_values(fraction), "a fraction such as 0.02 or 2%");
  EXPECT_EQ(format_option_value(count, *parse_option_value(count, "42")), "42");
  EXPECT_FALSE(parse_option_value(count, "4k"));
  EXPECT_EQ(format_option_value(size, *parse_option_value(size, "1.5G")), "1536MiB");
  EXPECT_EQ(format_option_value(size, *parse_option_value(size, "1000")), "1000");
  EXPECT_EQ(format_option_value(size, *parse_option_value(size, "0")), "0");
  EXPECT_EQ(format_option_value(enumeration, *parse_option_value(enumeration, " B ")), "b");
}

TEST(Options, InForceListsEveryOptionInTableOrder) {
  Options o = default_options();
  o.stack_min_bytes = 3ull << 30;
  o.log_level = LogLevel::off;
  const auto in_force = options_in_force(o);
  ASSERT_EQ(in_force.size(), option_specs().size());
  for (std::size_t i = 0; i < in_force.size(); ++i) EXPECT_EQ(in_force[i].first, option_specs()[i].name);
  const auto value_of = [&](std::string_view name) {
    for (const auto& [n, v] : in_force)
      if (n == name) return v;
    return std::string("?");
  };
  EXPECT_EQ(value_of("KVREMAP_MODE"), "defer");
  EXPECT_EQ(value_of("KVREMAP_TRACE"), "on");
  EXPECT_EQ(value_of("KVREMAP_LOG_LEVEL"), "off");
  EXPECT_EQ(value_of("KVREMAP_STACK_MIN_BYTES"), "3GiB");
  EXPECT_EQ(value_of("KVREMAP_COMMIT"), "auto");
  EXPECT_EQ(value_of("KVREMAP_CHUNK_BYTES"), "512MiB");
  // What the trace header says parses back to the same options.
  Env env(in_force.begin(), in_force.end());
  EXPECT_EQ(options_in_force(parse_options(env).options), in_force);
}

TEST(Options, LogLevelsMatchSpdlogOrder) {
  ASSERT_EQ(log_level_names().size(), 7u);
  EXPECT_EQ(static_cast<int>(LogLevel::trace), 0);
  EXPECT_EQ(static_cast<int>(LogLevel::off), 6);
  EXPECT_EQ(to_string(LogLevel::critical), "critical");
  EXPECT_EQ(to_string(Mode::observe), "observe");
}

TEST(Options, DocsContainTheGeneratedTable) {
  const std::string path = std::string(KVREMAP_SOURCE_DIR) + "/docs/configuration.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string table = options_markdown_table();
  EXPECT_NE(docs.find(table), std::string::npos) << "docs/configuration.md is out of date; paste this table into it:\n"
                                                 << table;
  // Exactly one table: no stale rows left next to the generated one.
  EXPECT_EQ(docs.find("| Variable |"), docs.rfind("| Variable |"));
}

TEST(Options, CombinationsThatCannotWorkNameBothValuesAndWhatWould) {
  const auto defer = [](std::vector<std::pair<std::string, std::string>> env) {
    env.insert(env.begin(), {"KVREMAP_MODE", "defer"});
    return parse_options(env);
  };
  const ParsedOptions small_chunk = defer({{"KVREMAP_CHUNK_BYTES", "2MiB"}});
  EXPECT_EQ(messages(small_chunk),
            std::vector<std::string>{"kvremap: KVREMAP_SCRATCH_BYTES=64MiB does not divide KVREMAP_CHUNK_BYTES=2MiB: "
                                     "the scratch is mapped a whole number of times over each chunk; use 2MiB or "
                                     "another divisor of the chunk"});
  EXPECT_EQ(small_chunk.options.mode, Mode::observe) << "a configuration that cannot work runs observe-only";
  EXPECT_EQ(messages(defer({{"KVREMAP_SCRATCH_BYTES", "48MiB"}})),
            std::vector<std::string>{"kvremap: KVREMAP_SCRATCH_BYTES=48MiB does not divide "
                                     "KVREMAP_CHUNK_BYTES=512MiB: the scratch is mapped a whole number of times over "
                                     "each chunk; use 32MiB or another divisor of the chunk"});
  EXPECT_EQ(messages(defer({{"KVREMAP_ARENA_BYTES", "256MiB"}})),
            std::vector<std::string>{"kvremap: KVREMAP_ARENA_BYTES=256MiB is below KVREMAP_CHUNK_BYTES=512MiB: the "
                                     "arena must hold at least one chunk; use 0 (twice the device memory) or at least "
                                     "512MiB"});
  EXPECT_EQ(messages(defer({{"KVREMAP_CHUNK_BYTES", "0"}})).size(), 1u);
  EXPECT_EQ(messages(defer({{"KVREMAP_SCRATCH_BYTES", "0"}})).size(), 1u);
  EXPECT_TRUE(defer({{"KVREMAP_STRICT", "1"}, {"KVREMAP_CHUNK_BYTES", "2MiB"}}).exit_requested());
  const ParsedOptions fine = defer({{"KVREMAP_CHUNK_BYTES", "1GiB"}, {"KVREMAP_SCRATCH_BYTES", "128MiB"}});
  EXPECT_TRUE(fine.problems.empty());
  EXPECT_EQ(fine.options.mode, Mode::defer);
}

TEST(Options, DeferSettingsWithoutDeferAreReportedNotSilentlyIgnored) {
  const ParsedOptions parsed =
      parse_options({{"KVREMAP_MODE", "observe"}, {"KVREMAP_COMMIT", "manual"}, {"KVREMAP_TRACE", "off"}});
  EXPECT_EQ(messages(parsed), std::vector<std::string>{"kvremap: KVREMAP_COMMIT has no effect with "
                                                       "KVREMAP_MODE=observe: set KVREMAP_MODE=defer to use it"});
  EXPECT_FALSE(parsed.options.trace) << "the rest still applies";
  EXPECT_TRUE(parse_options({{"KVREMAP_MODE", "observe"}, {"KVREMAP_STRICT", "1"}, {"KVREMAP_HEADROOM", "1GiB"}})
                  .exit_requested());
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"KVREMAP_SIZING", "fit"}, {"KVREMAP_PROFILE_DIR", "off"}, {"KVREMAP_DEFICIT", "restart"}})
    EXPECT_EQ(messages(parse_options({{"KVREMAP_MODE", "observe"}, {name, value}})),
              std::vector<std::string>{"kvremap: " + name +
                                       " has no effect with KVREMAP_MODE=observe: set KVREMAP_MODE=defer to use it"});
  EXPECT_TRUE(parse_options({{"KVREMAP_COMMIT", "manual"}}).problems.empty()) << "defer is the default";
}

TEST(Options, ControlCharactersInValuesNeverBreakTheOneLineMessage) {
  EXPECT_EQ(messages(parse_options({{"KVREMAP_MODE", "defer\nKVREMAP_STRICT=1\x01"}})),
            std::vector<std::string>{"kvremap: KVREMAP_MODE='defer\\x0aKVREMAP_STRICT=1\\x01' is invalid: expected one "
                                     "of observe, defer; KV deferral is off (KVREMAP_MODE=observe); tracking and "
                                     "tracing go on"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_X\tY", "1"}})),
            std::vector<std::string>{"kvremap: unknown variable KVREMAP_X\\x09Y"});
}
