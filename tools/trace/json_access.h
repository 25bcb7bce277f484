// Non-throwing field access on parsed trace events, shared by the reader and the validator.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvremap::trace::detail {

// The member `key` of `object`, or nullptr when `object` is not an object or lacks it. The reader
// must never throw on a mistyped field (the schema checks, which read the same events, word those), so
// all access goes through here.
inline const nlohmann::json* member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

inline const nlohmann::json& args_of(const nlohmann::json& event) {
  static const nlohmann::json no_args = nlohmann::json::object();
  const nlohmann::json* args = member(event, "args");
  return args != nullptr ? *args : no_args;
}

inline std::string string_at(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

inline bool is_non_negative_integer(const nlohmann::json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

inline std::uint64_t uint_at(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = member(object, key);
  if (value == nullptr) return 0;
  if (is_non_negative_integer(*value)) return value->get<std::uint64_t>();
  // Floats outside the integer's range saturate: a cast would be undefined behaviour.
  if (value->is_number_float() && value->get<double>() >= 0)
    return value->get<double>() >= 18446744073709551616.0 ? ~std::uint64_t{0}
                                                          : static_cast<std::uint64_t>(value->get<double>());
  return 0;
}

inline std::int64_t int_at(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = member(object, key);
  if (value == nullptr || !value->is_number()) return 0;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (value->is_number_float()) {
    const double d = value->get<double>();
    if (d >= 9223372036854775808.0) return kMax;
    if (d < -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(d);
  }
  if (value->is_number_unsigned() && value->get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)) return kMax;
  return value->get<std::int64_t>();
}

inline double number_at(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = member(object, key);
  return value != nullptr && value->is_number() ? value->get<double>() : 0.0;
}

// Option values are documented as strings; anything else is kept as its JSON text rather than lost.
inline std::string as_option_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// An exception's message without nlohmann's "[json.exception.parse_error.101] " prefix, which tells a
// user nothing.
inline std::string error_text(const nlohmann::json::exception& error) {
  std::string text = error.what();
  const std::size_t bracket = text.find("] ");
  return bracket == std::string::npos ? text : text.substr(bracket + 2);
}

// Whole nanoseconds of a time in microseconds: the writer prints three decimals, so times and
// durations add up exactly in nanoseconds where their doubles would not.
inline std::int64_t ns_of_us(double us) { return std::llround(us * 1000.0); }

}  // namespace kvremap::trace::detail
