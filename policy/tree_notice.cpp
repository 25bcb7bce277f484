// Lines an engine tree prints once: the value handed down and the rule that reads it.
#include "policy/tree_notice.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "policy/profile.h"

namespace kvremap::policy {
namespace {

// The next ':'-separated field of `rest`, removed from it; the last field has no ':' after it.
std::string_view next_field(std::string_view& rest) {
  const std::size_t colon = rest.find(':');
  const std::string_view field = rest.substr(0, colon);
  rest.remove_prefix(colon == std::string_view::npos ? rest.size() : colon + 1);
  return field;
}

template <typename Number>
bool whole_number(std::string_view text, Number& value, int base = 10) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::uint64_t lines_hash(std::span<const std::string> lines) {
  std::string joined;
  for (const std::string& line : lines) joined += line + '\n';
  return fnv1a_64(joined);
}

std::string encode_tree_notice(const TreeNotice& notice) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(notice.lines));
  return "1:" + std::to_string(notice.printed_by.pid) + ":" + std::to_string(notice.printed_by.start_time) + ":" +
         hash;
}

std::optional<TreeNotice> decode_tree_notice(std::string_view value) {
  if (value.size() > 128) return std::nullopt;
  std::string_view rest = value;
  if (next_field(rest) != "1") return std::nullopt;
  TreeNotice notice;
  if (!whole_number(next_field(rest), notice.printed_by.pid) || notice.printed_by.pid <= 0) return std::nullopt;
  if (!whole_number(next_field(rest), notice.printed_by.start_time)) return std::nullopt;
  const std::string_view hash = next_field(rest);
  if (hash.size() != 16 || !rest.empty() || !whole_number(hash, notice.lines, 16)) return std::nullopt;
  if (value.back() == ':') return std::nullopt;
  return notice;
}

bool printed_by_ancestor(std::span<const std::string> lines, const std::optional<TreeNotice>& inherited,
                         std::span<const ProcessStamp> ancestors) {
  if (!inherited || inherited->lines != lines_hash(lines)) return false;
  return std::find(ancestors.begin(), ancestors.end(), inherited->printed_by) != ancestors.end();
}

}  // namespace kvremap::policy
