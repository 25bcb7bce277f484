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
            "1.5G or 2GiB");
}

TEST(Options, BadEnumAndBoolListWhatIsAccepted) {
  EXPECT_EQ(messages(parse_options({{"KVREMAP_MODE", "turbo"}})),
            std::vector<std::string>{"kvremap: KVREMAP_MODE='turbo' is invalid: expected one of observe, defer"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_COMMIT", "later"}})),
            std::vector<std::string>{"kvremap: KVREMAP_COMMIT='later' is invalid: expected one of auto, first-launch, "
                                     "manual"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_ENGINE", "trtllm"}})),
            std::vector<std::string>{"kvremap: KVREMAP_ENGINE='trtllm' is invalid: expected one of auto, vllm, "
                                     "sglang, other"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_LOG_LEVEL", "loud"}})),
            std::vector<std::string>{"kvremap: KVREMAP_LOG_LEVEL='loud' is invalid: expected one of trace, debug, "
                                     "info, warn, error, critical, off"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACE", "maybe"}})),
            std::vector<std::string>{"kvremap: KVREMAP_TRACE='maybe' is invalid: expected 1/0, true/false, "
                                     "yes/no or on/off"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_TRACE_DIR", ""}})),
            std::vector<std::string>{"kvremap: KVREMAP_TRACE_DIR='' is invalid: expected a non-empty directory path"});
}

TEST(Options, AnyBadValueMeansObserveOnlyWithDefaults) {
  const ParsedOptions parsed =
      parse_options({{"KVREMAP_TRACE", "off"}, {"KVREMAP_LOG_LEVEL", "info"}, {"KVREMAP_STACK_MIN_BYTES", "1.5"}});
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_EQ(parsed.options.mode, Mode::observe);
  Options observe_defaults = default_options();
  observe_defaults.mode = Mode::observe;
  EXPECT_EQ(options_in_force(parsed.options), options_in_force(observe_defaults));
  EXPECT_FALSE(parsed.exit_requested());
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
            std::vector<std::string>{"kvremap: KVREMAP_MODE='defer\\nKVREMAP_STRICT=1\\x01' is invalid: expected one "
                                     "of observe, defer"});
  EXPECT_EQ(messages(parse_options({{"KVREMAP_X\tY", "1"}})),
            std::vector<std::string>{"kvremap: unknown variable KVREMAP_X\\tY"});
}
