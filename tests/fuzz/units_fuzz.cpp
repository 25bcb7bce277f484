// Fuzzes policy's value parsers (parse_size, parse_fraction, parse_bool, parse_count) and their round-trips.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "policy/options.h"
#include "policy/units.h"
#include "tests/fuzz/fuzz_check.h"

using namespace kvremap::policy;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const auto size_value = parse_size(text);
  const auto count_value = parse_count(text);
  const auto fraction_value = parse_fraction(text);
  const auto bool_value = parse_bool(text);
  (void)bool_value;

  if (size_value) {
    // A size option's text form is exact: it parses back to the same byte count.
    const OptionSpec* spec = find_option("KVREMAP_HEADROOM");
    FUZZ_CHECK(spec != nullptr && spec->type == OptionType::size, "KVREMAP_HEADROOM is a size");
    const std::string exact = format_option_value(*spec, OptionValue{*size_value});
    FUZZ_CHECK(parse_size(exact) == size_value, "parse_size(format_option_value(size)) round-trips");
    const std::string human = format_bytes(*size_value);
    FUZZ_CHECK(!human.empty() && kvremap::fuzz::is_one_line(human), "format_bytes is one line");
  }
  if (count_value) {
    // A whole number is a count and the same number of bytes.
    FUZZ_CHECK(parse_count(std::to_string(*count_value)) == count_value, "parse_count(to_string) round-trips");
    FUZZ_CHECK(size_value == count_value, "a count parses as the same size in bytes");
  }
  if (fraction_value) {
    FUZZ_CHECK(std::isfinite(*fraction_value) && *fraction_value >= 0.0 && *fraction_value <= 1.0,
               "a fraction is in [0, 1]");
    // format_option_value's promise for the table's fraction rows: the text parses back to the same value.
    for (const OptionSpec& spec : option_specs()) {
      if (spec.type != OptionType::fraction) continue;
      const auto again = parse_fraction(format_option_value(spec, OptionValue{*fraction_value}));
      FUZZ_CHECK(again.has_value() && *again == *fraction_value, "a fraction row's text round-trips");
    }
  }
  return 0;
}
