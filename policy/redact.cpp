// Redaction of secrets in command lines: secret flags by their words, URL passwords by their syntax.
#include "policy/redact.h"

#include <array>
#include <cctype>

namespace kvremap::policy {
namespace {

// A flag word ending in one of these names a secret: `token`, `hftoken`, `apikey`, `dbpassword`.
constexpr std::array<std::string_view, 10> kSecretWordEndings{
    "token", "key", "keys", "secret", "secrets", "password", "passwd", "passphrase", "credential", "credentials"};

bool secret_word(std::string_view word) {
  std::string lower(word);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view ending : kSecretWordEndings)
    if (lower.ends_with(ending)) return true;
  return false;
}

// nargs="+" secret flags: every argument up to the next option is a value.
bool takes_many_values(std::string_view flag) { return flag == "--api-key" || flag == "--api-keys"; }

bool is_word_separator(char c) { return c == '-' || c == '_' || c == '.'; }

// An environment-style assignment `NAME=value` whose NAME is a secret word (`HF_TOKEN=hf_…`), as
// launchers pass through (`env`, `-e`): the position of '=' or npos.
std::size_t secret_assignment(std::string_view arg) {
  const std::size_t equals = arg.find('=');
  if (equals == std::string_view::npos || equals == 0) return std::string_view::npos;
  const std::string_view name = arg.substr(0, equals);
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return std::string_view::npos;
  return is_secret_flag(name) ? equals : std::string_view::npos;
}

// `--secret-flag` alone, its value (if any) in the next arguments.
bool bare_secret_flag(std::string_view arg) {
  return arg.starts_with('-') && arg.find('=') == std::string_view::npos && is_secret_flag(arg);
}

// The position of '=' in `--secret-flag=value`, or npos.
std::size_t secret_inline_value(std::string_view arg) {
  if (!arg.starts_with('-')) return std::string_view::npos;
  const std::size_t equals = arg.find('=');
  if (equals == std::string_view::npos) return std::string_view::npos;
  return is_secret_flag(arg.substr(0, equals)) ? equals : std::string_view::npos;
}

// Every `scheme://user:password@host` in `text` with its password replaced: by kRedacted (keeping the
// ':'), or removed with its ':' when `drop` is set. The authority ends at '/', '?', '#', a quote or
// white space (a password written there unescaped is not a URL's); its last '@' ends the user part.
std::string without_url_passwords(std::string_view text, bool drop) {
  std::string out;
  std::size_t from = 0;
  for (std::size_t scheme_end = text.find("://"); scheme_end != std::string_view::npos;
       scheme_end = text.find("://", from)) {
    const std::size_t start = scheme_end + 3;
    std::size_t end = start;
    while (end < text.size() && std::string_view("/?#\"' \t\n").find(text[end]) == std::string_view::npos) ++end;
    const std::string_view authority = text.substr(start, end - start);
    const std::size_t at = authority.rfind('@');
    const std::size_t colon = at == std::string_view::npos ? at : authority.substr(0, at).find(':');
    out.append(text.substr(from, start - from));
    if (colon != std::string_view::npos && colon + 1 < at) {
      out.append(authority.substr(0, drop ? colon : colon + 1));
      if (!drop) out.append(kRedacted);
      out.append(authority.substr(at));
    } else {
      out.append(authority);
    }
    from = end;
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace

bool is_secret_flag(std::string_view flag) {
  while (flag.starts_with('-')) flag.remove_prefix(1);
  std::size_t start = 0;
  for (std::size_t i = 0; i <= flag.size(); ++i) {
    if (i < flag.size() && !is_word_separator(flag[i])) continue;
    if (i > start && secret_word(flag.substr(start, i - start))) return true;
    start = i + 1;
  }
  return false;
}

std::size_t secret_value_count(std::span<const std::string> argv, std::size_t i) {
  if (i >= argv.size() || !bare_secret_flag(argv[i])) return 0;
  // A value may begin with '-' (keys are random text); one beginning with "--" is the next flag.
  std::size_t n = 0;
  if (i + 1 < argv.size() && !argv[i + 1].starts_with("--")) ++n;
  if (n == 1 && takes_many_values(argv[i]))
    while (i + n + 1 < argv.size() && !argv[i + n + 1].starts_with('-')) ++n;
  return n;
}

std::string redact_argument(std::string_view arg) {
  std::size_t equals = secret_inline_value(arg);
  if (equals == std::string_view::npos) equals = secret_assignment(arg);
  if (equals != std::string_view::npos) return std::string(arg.substr(0, equals + 1)) + std::string(kRedacted);
  return without_url_passwords(arg, false);
}

std::vector<std::string> redact_command_line(std::span<const std::string> argv) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (std::size_t i = 0; i < argv.size(); ++i) {
    out.push_back(redact_argument(argv[i]));
    for (std::size_t n = secret_value_count(argv, i); n > 0; --n, ++i) out.emplace_back(kRedacted);
  }
  return out;
}

std::vector<std::string> without_secrets(std::span<const std::string> argv) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (std::size_t i = 0; i < argv.size(); ++i) {
    // The program itself is kept whatever its name: it says which engine runs.
    if (i > 0) {
      if (bare_secret_flag(argv[i])) {
        i += secret_value_count(argv, i);
        continue;
      }
      if (secret_inline_value(argv[i]) != std::string_view::npos || secret_assignment(argv[i]) != std::string_view::npos)
        continue;
    }
    out.push_back(without_url_passwords(argv[i], true));
  }
  return out;
}

}  // namespace kvremap::policy
