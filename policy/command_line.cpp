// Reading engine command lines as argparse does (see command_line.h).
#include "policy/command_line.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "policy/units.h"

namespace kvremap::policy {

std::vector<std::string> split_cmdline(std::string_view raw) {
  std::vector<std::string> argv;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string_view::npos) end = raw.size();
    argv.emplace_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

bool is_multiprocessing_child(std::span<const std::string> argv) {
  return std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
    return a == "--multiprocessing-fork" || a.find("from multiprocessing.spawn import") != std::string::npos ||
           a.find("from multiprocessing.forkserver import") != std::string::npos;
  });
}

bool is_process_title(std::span<const std::string> argv) {
  return !argv.empty() && std::all_of(argv.begin() + 1, argv.end(), [](const std::string& a) { return a.empty(); });
}

std::vector<std::string> dashed_flags(std::span<const std::string> argv) {
  std::vector<std::string> out(argv.begin(), argv.end());
  for (std::string& a : out) {
    if (!a.starts_with("--")) continue;
    const std::size_t end = std::min({a.find('='), a.find('.'), a.size()});
    std::replace(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(end), '_', '-');
  }
  return out;
}

bool names_program(std::string_view arg, std::string_view name) {
  return arg == name || arg.ends_with("/" + std::string(name)) || arg.starts_with(std::string(name) + ".");
}

bool starts_command(std::span<const std::string> argv, std::string_view program, std::string_view subcommand,
                    std::span<const std::string_view> modules) {
  const std::size_t n = std::min<std::size_t>(argv.size(), 5);
  bool named = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view a = argv[i];
    if (std::find(modules.begin(), modules.end(), a) != modules.end()) return true;
    if (named && a == subcommand) return true;
    if (names_program(a, program)) named = true;
  }
  return false;
}

std::optional<std::string_view> inline_value(std::string_view arg, std::string_view flag) {
  if (!arg.starts_with(flag) || arg.size() <= flag.size() || arg[flag.size()] != '=') return std::nullopt;
  return arg.substr(flag.size() + 1);
}

std::optional<std::string_view> flag_value(std::span<const std::string> argv, std::string_view flag) {
  std::optional<std::string_view> value;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == flag && i + 1 < argv.size())
      value = argv[i + 1];
    else if (auto v = inline_value(a, flag))
      value = v;
  }
  return value;
}

bool flag_on(std::span<const std::string> argv, std::string_view flag) {
  bool on = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (a == flag) {
      on = true;
      if (i + 1 < argv.size())
        if (auto b = parse_bool(argv[i + 1])) on = *b;
    } else if (auto v = inline_value(a, flag)) {
      on = parse_bool(*v).value_or(true);
    } else if (a == "--no-" + std::string(flag.substr(2))) {
      on = false;
    }
  }
  return on;
}

std::optional<std::string> config_file(std::span<const std::string> argv) {
  const std::vector<std::string> flags = dashed_flags(argv);
  if (auto file = flag_value(flags, "--config"); file && !file->empty()) return std::string(*file);
  return std::nullopt;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

std::uint16_t port_value(std::optional<std::string_view> text, std::uint16_t fallback) {
  if (!text) return fallback;
  const std::optional<std::uint64_t> value = parse_count(*text);
  return value && *value > 0 && *value <= 65535 ? static_cast<std::uint16_t>(*value) : 0;
}

std::optional<std::int64_t> signed_count(std::string_view text) {
  const bool negative = text.starts_with('-');
  const std::optional<std::uint64_t> magnitude = parse_count(negative ? text.substr(1) : text);
  if (!magnitude || *magnitude > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? -static_cast<std::int64_t>(*magnitude) : static_cast<std::int64_t>(*magnitude);
}

std::optional<std::uint64_t> human_readable_count(std::string_view text) {
  static constexpr std::pair<std::string_view, std::uint64_t> kSuffixes[] = {{"Ki", std::uint64_t{1} << 10},
                                                                             {"Mi", std::uint64_t{1} << 20},
                                                                             {"Gi", std::uint64_t{1} << 30},
                                                                             {"Ti", std::uint64_t{1} << 40},
                                                                             {"k", 1000},
                                                                             {"M", 1000000},
                                                                             {"G", 1000000000},
                                                                             {"T", 1000000000000}};
  for (const auto& [suffix, multiplier] : kSuffixes) {
    if (!text.ends_with(suffix)) continue;
    const std::optional<std::uint64_t> n = parse_count(text.substr(0, text.size() - suffix.size()));
    if (!n || *n > UINT64_MAX / multiplier) return std::nullopt;
    return *n * multiplier;
  }
  return parse_count(text);
}

}  // namespace kvremap::policy
