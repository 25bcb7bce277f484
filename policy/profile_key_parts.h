// A profile's key text read back into its parts, the file name that key gives, and the durations and ages the
// `kvremap profile` subcommands take and show.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

// What key_text() wrote (policy/profile.h), field by field: arguments unquoted and unescaped.
struct KeyParts {
  std::vector<std::string> argv;  // the normalised command line ("<model>" where the model is known by its config.json)
  std::string device_name;
  std::uint64_t device_total_bytes = 0;
  std::uint32_t rank = 0;
  std::int32_t driver_version = 0;
  std::uint32_t schema_version = 0;
  std::vector<std::string> environment;
  std::vector<std::string> software;
  std::string config;
  std::string model_identity;
};

// Reads a key_text() back. Nothing, with `problem` set to one line, when the text is not one
// (a missing or repeated field, an unterminated quote, a figure that is not a number).
std::optional<KeyParts> parse_key_text(std::string_view text, std::string* problem);

// The engine named by the key's command line ("vllm", "sglang", "other").
std::string key_engine(const KeyParts& parts);

// The model as a reader knows it: the model argument of the command line, or the config.json hash when
// the key holds that instead of the path.
std::string key_model(const KeyParts& parts);

// The name the library gives the profile of this key (profile_file_name for the ProfileKey the text came
// from): "<engine>-<16 hex digits of fnv1a_64(text)>-rank<r>.json".
std::string profile_file_name_for_key(const KeyParts& parts, std::string_view text);

// A duration as `prune --older-than` takes it: a whole number and a unit, s, m, h, d or w ("30d", "12h").
std::optional<std::int64_t> parse_duration_seconds(std::string_view text);

// An age in the largest whole unit that fits, as list and show print it: "45 s", "12 min", "3 h", "20 d".
std::string format_age(std::int64_t seconds);

}  // namespace kvremap::policy
