// Size, fraction, boolean and count parsers shared by kvremap's and the simulator's option tables.
#include "policy/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvremap::policy {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Parses a non-negative decimal number ("1", "1.5", ".5") and returns it with the unparsed rest.
std::optional<double> parse_decimal(std::string_view s, std::string_view& rest) {
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, std::chars_format::fixed);
  if (ec != std::errc() || end == s.data() || !std::isfinite(value) || value < 0) return std::nullopt;
  rest = s.substr(static_cast<std::size_t>(end - s.data()));
  return value;
}

}  // namespace

std::optional<std::uint64_t> parse_count(std::string_view text) {
  text = trim(text);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  std::string_view rest;
  auto number = parse_decimal(text, rest);
  if (!number) return std::nullopt;
  rest = trim(rest);

  struct Unit {
    std::string_view names[3];
    int shift;
  };
  static constexpr std::array<Unit, 5> units{{
      {{"", "b", "bytes"}, 0},
      {{"k", "kib", "kb"}, 10},
      {{"m", "mib", "mb"}, 20},
      {{"g", "gib", "gb"}, 30},
      {{"t", "tib", "tb"}, 40},
  }};
  for (const Unit& unit : units) {
    for (std::string_view name : unit.names) {
      if (!iequals(rest, name)) continue;
      // A whole number is exact in integers (a double cannot hold 2^64 - 1); shifting it must not wrap.
      std::uint64_t whole = 0;
      const std::string_view digits = text.substr(0, text.size() - rest.size());
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), whole);
      if (ec == std::errc() && end == digits.data() + digits.size() && trim(digits) == digits) {
        if (unit.shift > 0 && whole > (~std::uint64_t{0} >> unit.shift)) return std::nullopt;
        return whole << unit.shift;
      }
      const long double bytes = static_cast<long double>(*number) * std::ldexp(1.0L, unit.shift);
      if (bytes > 18446744073709551615.0L) return std::nullopt;
      const long double rounded = std::round(bytes);
      // A fractional byte count ("0.3B") is a typo, not a size.
      if (std::fabs(bytes - rounded) > 1e-6L * (bytes > 1 ? bytes : 1)) return std::nullopt;
      return static_cast<std::uint64_t>(rounded);
    }
  }
  return std::nullopt;
}

std::optional<double> parse_fraction(std::string_view text) {
  text = trim(text);
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  std::string_view rest;
  auto number = parse_decimal(text, rest);
  if (!number) return std::nullopt;
  rest = trim(rest);
  double value = *number;
  if (rest == "%") {
    value /= 100.0;
  } else if (!rest.empty()) {
    return std::nullopt;
  }
  if (value > 1.0) return std::nullopt;
  return value;
}

std::optional<bool> parse_bool(std::string_view text) {
  text = trim(text);
  for (std::string_view yes : {"1", "true", "yes", "on"})
    if (iequals(text, yes)) return true;
  for (std::string_view no : {"0", "false", "no", "off"})
    if (iequals(text, no)) return false;
  return std::nullopt;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> names{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  long double value = static_cast<long double>(bytes);
  while (value >= 1024.0L && unit + 1 < names.size()) {
    value /= 1024.0L;
    ++unit;
  }
  char buffer[48];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.2Lf %s", value, names[unit]);
  }
  return buffer;
}

std::string format_bytes_signed(std::int64_t bytes) {
  return bytes < 0 ? "-" + format_bytes(static_cast<std::uint64_t>(-(bytes + 1)) + 1)
                   : format_bytes(static_cast<std::uint64_t>(bytes));
}

}  // namespace kvremap::policy
