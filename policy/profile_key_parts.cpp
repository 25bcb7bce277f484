// Reading a profile key's text back into its fields (the inverse of key_text), its file name, durations and ages.
#include "policy/profile_key_parts.h"

#include <charconv>
#include <cstdio>
#include <limits>

#include "policy/engine.h"
#include "policy/profile.h"

namespace kvremap::policy {
namespace {

// The words of one field: space-separated, each bare or in key_text's quotes (\" \\ and \xHH escapes).
std::optional<std::vector<std::string>> words_of(std::string_view text, std::string* problem) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    std::string word;
    if (text[i] != '"') {
      while (i < text.size() && text[i] != ' ') word += text[i++];
      words.push_back(std::move(word));
      continue;
    }
    ++i;
    bool closed = false;
    while (i < text.size()) {
      const char c = text[i++];
      if (c == '"') {
        closed = true;
        break;
      }
      if (c != '\\') {
        word += c;
        continue;
      }
      if (i < text.size() && (text[i] == '"' || text[i] == '\\')) {
        word += text[i++];
      } else if (i + 2 < text.size() && text[i] == 'x') {
        unsigned byte = 0;
        const auto [end, error] = std::from_chars(text.data() + i + 1, text.data() + i + 3, byte, 16);
        if (error != std::errc() || end != text.data() + i + 3) break;
        word += static_cast<char>(byte);
        i += 3;
      } else {
        break;
      }
    }
    if (!closed) {
      *problem = "the key holds an unterminated or badly escaped quoted word";
      return std::nullopt;
    }
    words.push_back(std::move(word));
  }
  return words;
}

template <typename T>
bool number(std::string_view word, T* out) {
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), *out);
  return error == std::errc() && end == word.data() + word.size() && !word.empty();
}

// The key's fields, split at the semicolons outside quotes: "label: words".
std::vector<std::string_view> fields_of(std::string_view text) {
  std::vector<std::string_view> fields;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (quoted && text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      quoted = !quoted;
    } else if (!quoted && text[i] == ';') {
      fields.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  fields.push_back(text.substr(start));
  return fields;
}

}  // namespace

std::optional<KeyParts> parse_key_text(std::string_view text, std::string* problem) {
  KeyParts parts;
  std::vector<std::string> seen;
  for (std::string_view field : fields_of(text)) {
    while (field.starts_with(' ')) field.remove_prefix(1);
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos) {
      *problem = "the key has a field without a label";
      return std::nullopt;
    }
    const std::string label(field.substr(0, colon));
    for (const std::string& earlier : seen)
      if (earlier == label) {
        *problem = "the key names its " + label + " twice";
        return std::nullopt;
      }
    seen.push_back(label);
    auto words = words_of(field.substr(colon + 1), problem);
    if (!words) return std::nullopt;
    const auto one = [&](std::string* out) {
      if (words->size() != 1) return false;
      *out = (*words)[0];
      return true;
    };
    bool ok = true;
    if (label == "argv") {
      parts.argv = std::move(*words);
    } else if (label == "device") {
      ok = one(&parts.device_name);
    } else if (label == "total_bytes") {
      ok = words->size() == 1 && number((*words)[0], &parts.device_total_bytes);
    } else if (label == "rank") {
      ok = words->size() == 1 && number((*words)[0], &parts.rank);
    } else if (label == "driver") {
      ok = words->size() == 1 && number((*words)[0], &parts.driver_version);
    } else if (label == "schema") {
      ok = words->size() == 1 && number((*words)[0], &parts.schema_version);
    } else if (label == "env") {
      parts.environment = std::move(*words);
    } else if (label == "software") {
      parts.software = std::move(*words);
    } else if (label == "config") {
      ok = one(&parts.config);
    } else if (label == "model") {
      ok = one(&parts.model_identity);
    } else {
      *problem = "the key has an unknown field \"" + label + "\"";
      return std::nullopt;
    }
    if (!ok) {
      *problem = "the key's " + label + " field is not what kvremap writes there";
      return std::nullopt;
    }
  }
  for (const char* required : {"argv", "device", "total_bytes", "rank", "driver", "schema"}) {
    bool found = false;
    for (const std::string& label : seen) found = found || label == required;
    if (!found) {
      *problem = std::string("the key has no ") + required + " field";
      return std::nullopt;
    }
  }
  return parts;
}

std::string key_engine(const KeyParts& parts) { return std::string(to_string(profile_engine(parts.argv).kind)); }

std::string key_model(const KeyParts& parts) {
  if (!parts.model_identity.empty()) return parts.model_identity;
  return model_argument(parts.argv).value_or("-");
}

std::string profile_file_name_for_key(const KeyParts& parts, std::string_view text) {
  return profile_file_name(parts.argv, text, parts.rank);
}

std::optional<std::int64_t> parse_duration_seconds(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  std::int64_t unit = 0;
  switch (text.back()) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return std::nullopt;
  }
  std::int64_t count = 0;
  if (!number(text.substr(0, text.size() - 1), &count) || count < 0 ||
      count > std::numeric_limits<std::int64_t>::max() / unit)
    return std::nullopt;
  return count * unit;
}

std::string format_age(std::int64_t seconds) {
  if (seconds < 0) return "in the future";
  if (seconds < 120) return std::to_string(seconds) + " s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + " min";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + " h";
  return std::to_string(seconds / 86400) + " d";
}

}  // namespace kvremap::policy
