// Fuzzes policy::parse_options on an environ-style input ("NAME=VALUE" entries separated by NUL).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "policy/options.h"
#include "tests/fuzz/fuzz_check.h"

using namespace kvremap::policy;

namespace {

bool same_value(const OptionValue& a, const OptionValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* x = std::get_if<EnumIndex>(&a)) return x->index == std::get<EnumIndex>(b).index;
  if (const auto* x = std::get_if<std::uint64_t>(&a)) return *x == std::get<std::uint64_t>(b);
  if (const auto* x = std::get_if<double>(&a)) return *x == std::get<double>(b);
  if (const auto* x = std::get_if<bool>(&a)) return *x == std::get<bool>(b);
  return std::get<std::string>(a) == std::get<std::string>(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> env;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string_view::npos) end = raw.size();
    const std::string_view entry = raw.substr(start, end - start);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      env.emplace_back(std::string(entry), std::string());
    else
      env.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    start = end + 1;
  }

  const ParsedOptions parsed = parse_options(env);
  for (const OptionProblem& problem : parsed.problems) {
    FUZZ_CHECK(problem.message.starts_with("kvremap: "), "a problem message starts with \"kvremap: \"");
    FUZZ_CHECK(kvremap::fuzz::is_one_line(problem.message), "a problem message is one line");
  }
  FUZZ_CHECK(parsed.exit_requested() == (parsed.strict && !parsed.problems.empty()), "exit_requested");
  FUZZ_CHECK(parsed.options.strict == parsed.strict, "options.strict is the parsed KVREMAP_STRICT");

  // Every option in force formats to text that parses back to the same value.
  for (const OptionSpec& spec : option_specs()) {
    const OptionValue value = spec.read(parsed.options);
    const std::string text = format_option_value(spec, value);
    const auto again = parse_option_value(spec, text);
    if (spec.type == OptionType::path && text.empty()) continue;  // an unset path has no text form
    FUZZ_CHECK(again.has_value(), "format_option_value output parses");
    FUZZ_CHECK(same_value(*again, value), "format_option_value output parses back to the same value");
  }

  // The options in force are the table's rows, in order, and feeding them back changes nothing.
  const auto in_force = options_in_force(parsed.options);
  FUZZ_CHECK(in_force.size() == option_specs().size(), "options_in_force has one entry per row");
  std::vector<std::pair<std::string, std::string>> again_env;
  for (const auto& [name, value] : in_force)
    if (!value.empty()) again_env.emplace_back(name, value);
  const ParsedOptions again = parse_options(again_env);
  FUZZ_CHECK(options_in_force(again.options) == in_force, "the options in force, parsed again, are the same options");
  return 0;
}
