// Secrets out of command lines: the values of secret-bearing flags and the passwords of URLs, for traces and profile keys.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvremap::policy {

// What a redacted value is replaced with: one fixed text, so a reader can tell redaction from a value.
inline constexpr std::string_view kRedacted = "<redacted>";

// Whether a flag (`--api-key`, `-token`, `--DB_Password`; without its `=value`) carries a secret: one of
// its words (split at `-`, `_` and `.`, compared case-insensitively) is or ends with token, key, secret,
// password, passwd, passphrase or credential(s) (`--hf-token`, `--apikey`, `--ssl-key-password`).
// Words are compared rather than substrings so `--max-num-batched-tokens` and `--tokenizer`, which
// decide memory use, stay in traces and profile keys.
bool is_secret_flag(std::string_view flag);

// How many arguments after argv[i] are values of the secret flag argv[i] (`--api-key sk-1`): 0 when
// argv[i] is not a bare secret flag. One value, whatever it looks like (a key may begin with '-');
// `--api-key`/`--api-keys` take every argument up to the next option, as vLLM's nargs="+" does.
std::size_t secret_value_count(std::span<const std::string> argv, std::size_t i);

// One argument with its secrets replaced by kRedacted: the value of `--secret-flag=value`, of an
// environment-style `HF_TOKEN=value`, and the password of every URL written `scheme://user:pass@host`.
std::string redact_argument(std::string_view arg);

// A command line with every secret replaced by kRedacted (arguments kept, so its shape stays readable).
std::vector<std::string> redact_command_line(std::span<const std::string> argv);

// A command line with every secret flag dropped together with its values (`--flag v`, `--flag=v`) and
// URL passwords replaced: what a profile key may hold. Never contains a secret value, and does not
// depend on one, so two starts that differ only in a token share their profile.
std::vector<std::string> without_secrets(std::span<const std::string> argv);

}  // namespace kvremap::policy
