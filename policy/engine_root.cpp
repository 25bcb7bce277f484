// The engine's root command line, handed from the process that started the engine to its descendants.
#include "policy/engine_root.h"

#include <algorithm>
#include <charconv>

#include "policy/engine.h"

namespace kvremap::policy {
namespace {

constexpr std::string_view kVersion = "2";
constexpr char kDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <typename T>
std::optional<T> number(std::string_view s) {
  T value{};
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// The next ':'-separated field of `rest`, which loses it and its separator.
std::string_view next_field(std::string_view& rest) {
  const std::size_t colon = rest.find(':');
  const std::string_view field = rest.substr(0, colon);
  rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
  return field;
}

}  // namespace

std::string encode_engine_root(const EngineRoot& root) {
  std::string out = std::string(kVersion) + ":" + std::to_string(root.process.pid) + ":" +
                    std::to_string(root.process.start_time) + ":" + std::to_string(root.serving_flag_fd) + ":";
  for (std::size_t i = 0; i < root.argv.size(); ++i) {
    if (i > 0) out += "00";
    for (const unsigned char c : root.argv[i]) {
      out += kDigits[c >> 4];
      out += kDigits[c & 0xf];
    }
  }
  return out;
}

std::optional<EngineRoot> decode_engine_root(std::string_view value) {
  if (value.size() > kMaxEngineRootBytes || std::count(value.begin(), value.end(), ':') != 4) return std::nullopt;
  std::string_view rest = value;
  if (next_field(rest) != kVersion) return std::nullopt;
  const auto pid = number<std::int64_t>(next_field(rest));
  const auto start_time = number<std::uint64_t>(next_field(rest));
  const auto fd = number<int>(next_field(rest));
  if (!pid || *pid <= 0 || !start_time || !fd || *fd < -1 || rest.size() % 2 != 0) return std::nullopt;
  EngineRoot root{{*pid, *start_time}, {}, *fd};
  std::string arg;
  bool any = false;
  for (std::size_t i = 0; i < rest.size(); i += 2) {
    const int high = hex_value(rest[i]), low = hex_value(rest[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    const char c = static_cast<char>(high << 4 | low);
    any = true;
    if (c == '\0') {
      root.argv.push_back(std::move(arg));
      arg.clear();
    } else {
      arg += c;
    }
  }
  if (any) root.argv.push_back(std::move(arg));
  return root;
}

namespace {

// Field `n` of /proc/<pid>/stat (1-based, n >= 3), counted after the command name's closing ')'.
std::optional<std::string_view> stat_field(std::string_view stat, int n) {
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  for (int field = 3;; ++field) {
    const std::size_t begin = rest.find_first_not_of(" \n");
    if (begin == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(begin);
    const std::size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    if (field == n) return rest.substr(0, end);
    rest.remove_prefix(end);
  }
}

}  // namespace

std::optional<ProcessStamp> stamp_from_stat(std::int64_t pid, std::string_view stat) {
  const auto field = stat_field(stat, 22);
  const auto start_time = field ? number<std::uint64_t>(*field) : std::nullopt;
  if (pid <= 0 || !start_time) return std::nullopt;
  return ProcessStamp{pid, *start_time};
}

std::optional<std::int64_t> parent_from_stat(std::string_view stat) {
  const auto field = stat_field(stat, 4);
  return field ? number<std::int64_t>(*field) : std::nullopt;
}

bool root_is_ancestor(const EngineRoot& root, std::span<const ProcessStamp> ancestors) {
  return std::find(ancestors.begin(), ancestors.end(), root.process) != ancestors.end();
}

bool adopts_root(std::span<const std::string> own, const EngineRoot& root) {
  return named_engine(own) == EngineKind::other && named_engine(root.argv) != EngineKind::other;
}

}  // namespace kvremap::policy
