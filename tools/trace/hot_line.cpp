// Scans the writer's hot lines in one pass; anything unexpected hands the line to the JSON parser.
#include "tools/trace/hot_line.h"

#include <charconv>
#include <limits>
#include <optional>
#include <system_error>

namespace kvremap::trace::detail {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  bool at_end() const { return pos_ == text_.size(); }
  bool take(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // A string of printable ASCII without escapes: what the writer emits for names, pointers and
  // categories. Escapes, control characters and UTF-8 are left to the full parser.
  std::optional<std::string_view> string() {
    if (!take('"')) return std::nullopt;
    const std::size_t start = pos_;
    while (pos_ < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        const std::string_view contents = text_.substr(start, pos_ - start);
        ++pos_;
        return contents;
      }
      if (c < 0x20 || c >= 0x7f || c == '\\') return std::nullopt;
      ++pos_;
    }
    return std::nullopt;
  }

  // A JSON integer without sign or leading zero, short enough to fit 64 bits without checking.
  std::optional<std::uint64_t> integer() {
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(text_[pos_] - '0');
      ++pos_;
    }
    const std::size_t digits = pos_ - start;
    if (digits == 0 || digits > 19 || (digits > 1 && text_[start] == '0')) return std::nullopt;
    return value;
  }

  // A non-negative JSON number, as the full parser's double: integers exactly as their unsigned
  // value converted, others correctly rounded like strtod.
  std::optional<double> number() {
    const std::size_t start = pos_;
    const std::optional<std::uint64_t> whole = integer();
    if (!whole) return std::nullopt;
    const bool fraction = pos_ < text_.size() && text_[pos_] == '.';
    const bool exponent = pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E');
    if (!fraction && !exponent) return static_cast<double>(*whole);
    if (fraction && !digits_after(1)) return std::nullopt;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits_after(0)) return std::nullopt;
    }
    double value = 0;
    const auto [end, error] = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (error != std::errc() || end != text_.data() + pos_) return std::nullopt;  // out of range: the parser's error
    return value;
  }

  bool flat_value(ScannedValue& value) {
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const std::optional<std::string_view> text = string();
      if (!text) return false;
      value.text = *text;
      value.is_string = true;
      return true;
    }
    const std::optional<std::uint64_t> number = integer();
    if (!number) return false;
    value.number = *number;
    return true;
  }

 private:
  // Skips `skip` characters, then needs at least one digit.
  bool digits_after(std::size_t skip) {
    pos_ += skip;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

bool scan_args(Cursor& cursor, ScannedEvent& event) {
  if (!cursor.take('{')) return false;
  if (cursor.take('}')) return true;
  do {
    if (event.arg_count == kMaxScannedArgs) return false;
    ScannedValue& value = event.args[event.arg_count];
    value = ScannedValue{};
    const std::optional<std::string_view> key = cursor.string();
    if (!key || !cursor.take(':') || !cursor.flat_value(value)) return false;
    value.key = *key;
    // A repeated key: the parser keeps the last one; rather than mirror that, let it decide.
    for (std::size_t i = 0; i < event.arg_count; ++i)
      if (event.args[i].key == value.key) return false;
    ++event.arg_count;
  } while (cursor.take(','));
  return cursor.take('}');
}

constexpr std::size_t kUnknownKey = 9;

// The top-level keys in the order scan_hot_line's switch takes them: ph, cat, name, s, pid, tid, ts,
// dur, args; kUnknownKey for any other. By length first: a linear search of the names showed in the profile.
std::size_t top_level_key(std::string_view key) {
  switch (key.size()) {
    case 1:
      return key[0] == 's' ? 3 : kUnknownKey;
    case 2:
      return key == "ph" ? 0 : key == "ts" ? 6 : kUnknownKey;
    case 3:
      return key == "cat" ? 1 : key == "pid" ? 4 : key == "tid" ? 5 : key == "dur" ? 7 : kUnknownKey;
    case 4:
      return key == "name" ? 2 : key == "args" ? 8 : kUnknownKey;
    default:
      return kUnknownKey;
  }
}

// "device 3 bytes" with plain digits: the only counter the writer emits.
bool is_device_counter(std::string_view name) {
  constexpr std::string_view kPrefix = "device ";
  constexpr std::string_view kSuffix = " bytes";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return false;
  for (char c : name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()))
    if (c < '0' || c > '9') return false;
  return true;
}

bool is_hot(const ScannedEvent& event) {
  if (event.cat == "alloc") return (event.ph == "i" && (event.name == "alloc" || event.name == "free")) ||
                                   (event.ph == "X" && event.name == "alloc");
  return event.cat == "memory" && event.ph == "C" && is_device_counter(event.name);
}

const ScannedValue* find_arg(const ScannedEvent& event, std::string_view key) {
  for (std::size_t i = 0; i < event.arg_count; ++i)
    if (event.args[i].key == key) return &event.args[i];
  return nullptr;
}

}  // namespace

std::string_view ScannedEvent::string_arg(std::string_view key) const {
  const ScannedValue* value = find_arg(*this, key);
  return value != nullptr && value->is_string ? value->text : std::string_view();
}

std::uint64_t ScannedEvent::uint_arg(std::string_view key) const {
  const ScannedValue* value = find_arg(*this, key);
  return value != nullptr && !value->is_string ? value->number : 0;
}

std::int64_t ScannedEvent::int_arg(std::string_view key) const {
  const std::uint64_t value = uint_arg(key);
  return value > static_cast<std::uint64_t>(kInt64Max) ? kInt64Max : static_cast<std::int64_t>(value);
}

bool scan_hot_line(std::string_view line, ScannedEvent& event) {
  // Field by field: clearing the whole args array for each of millions of lines shows in the profile.
  event.ph = event.cat = event.name = std::string_view();
  event.ts_us = event.dur_us = 0;
  event.pid = event.tid = 0;
  event.has_pid = event.has_dur = false;
  event.arg_count = 0;
  Cursor cursor(line);
  if (!cursor.take('{')) return false;
  unsigned seen = 0;  // one bit per top-level key
  bool has_ts = false;
  bool has_tid = false;
  bool has_args = false;
  do {
    const std::optional<std::string_view> key = cursor.string();
    if (!key || !cursor.take(':')) return false;
    const std::size_t which = top_level_key(*key);
    if (which == kUnknownKey || (seen & (1U << which)) != 0) return false;
    seen |= 1U << which;
    switch (which) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const std::optional<std::string_view> text = cursor.string();
        if (!text) return false;
        if (which == 0) event.ph = *text;
        if (which == 1) event.cat = *text;
        if (which == 2) event.name = *text;
        break;
      }
      case 4:
      case 5: {
        const std::optional<std::uint64_t> number = cursor.integer();
        if (!number) return false;
        const std::int64_t value =
            *number > static_cast<std::uint64_t>(kInt64Max) ? kInt64Max : static_cast<std::int64_t>(*number);
        if (which == 4) {
          event.pid = value;
          event.has_pid = true;
        } else {
          event.tid = value;
          has_tid = true;
        }
        break;
      }
      case 6:
      case 7: {
        const std::optional<double> number = cursor.number();
        if (!number) return false;
        (which == 6 ? event.ts_us : event.dur_us) = *number;
        has_ts = has_ts || which == 6;
        event.has_dur = event.has_dur || which == 7;
        break;
      }
      default:
        if (!scan_args(cursor, event)) return false;
        has_args = true;
    }
  } while (cursor.take(','));
  return cursor.take('}') && cursor.at_end() && has_ts && has_tid && has_args && is_hot(event);
}

}  // namespace kvremap::trace::detail
