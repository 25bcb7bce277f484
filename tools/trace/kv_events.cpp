// Reads the "kv" events' args into KvEvent once, for report, report --json, what-if and run's summary.
#include "tools/trace/kv_events.h"

#include <array>
#include <limits>
#include <string_view>
#include <utility>

#include "tools/trace/json_access.h"

namespace kvremap::trace {
namespace {

using nlohmann::json;

// Integers only: a float or a string is a field written by something else, shown as unknown.
std::optional<std::uint64_t> unsigned_field(const json& args, std::string_view name) {
  const json* value = detail::member(args, name);
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned()) return value->get<std::uint64_t>();
  const std::int64_t signed_value = value->get<std::int64_t>();
  if (signed_value < 0) return std::nullopt;
  return static_cast<std::uint64_t>(signed_value);
}

std::optional<std::int64_t> signed_field(const json& args, std::string_view name) {
  const json* value = detail::member(args, name);
  if (value == nullptr || !value->is_number_integer()) return std::nullopt;
  if (value->is_number_unsigned() && value->get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
    return std::nullopt;
  return value->get<std::int64_t>();
}

KvEvent::Kind kind_of(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, KvEvent::Kind>, 10> kKinds{{
      {"kv arena reserved", KvEvent::Kind::arena_reserved},
      {"kv arena refused", KvEvent::Kind::arena_refused},
      {"kv deferred", KvEvent::Kind::deferred},
      {"kv nothing deferred", KvEvent::Kind::nothing_deferred},
      {"kv commit plan", KvEvent::Kind::commit_plan},
      {"kv committed", KvEvent::Kind::committed},
      {"kv sizing adjusted", KvEvent::Kind::sizing_adjusted},
      {"kv profile written", KvEvent::Kind::profile_written},
      {"kv restart", KvEvent::Kind::restart},
      {"kv serving overflow", KvEvent::Kind::serving_overflow},
  }};
  for (const auto& [known, kind] : kKinds)
    if (known == name) return kind;
  return KvEvent::Kind::other;
}

KvEvent read_kv_event(const OtherEvent& other) {
  const json& a = other.args;
  KvEvent kv;
  kv.event = other.event;
  kv.kind = kind_of(other.name);
  kv.name = other.name;
  kv.device = signed_field(a, "device");
  kv.regions = unsigned_field(a, "regions");
  kv.tensor_bytes = unsigned_field(a, "tensor_bytes");
  kv.deferred_bytes = unsigned_field(a, "deferred_bytes");
  kv.scratch_bytes = unsigned_field(a, "scratch_bytes");
  kv.bytes = unsigned_field(a, "bytes");
  kv.kv_bytes = unsigned_field(a, "kv_bytes");
  kv.tensors = unsigned_field(a, "tensors");
  kv.device_bytes = unsigned_field(a, "device_bytes");
  kv.host_bytes = unsigned_field(a, "host_bytes");
  kv.host_bytes_per_tensor = unsigned_field(a, "host_bytes_per_tensor");
  kv.granularity = unsigned_field(a, "granularity");
  kv.headroom_bytes = unsigned_field(a, "headroom_bytes");
  kv.margin_bytes = signed_field(a, "margin_bytes");
  kv.deficit_bytes = unsigned_field(a, "deficit_bytes");
  kv.device_free_bytes = unsigned_field(a, "device_free_bytes");
  kv.post_kv_transient_bytes = unsigned_field(a, "post_kv_transient_bytes");
  kv.verdict = detail::string_at(a, "verdict");
  kv.headroom_source = detail::string_at(a, "headroom_source");
  kv.sizing_shift_bytes = signed_field(a, "sizing_shift_bytes");
  kv.trigger = detail::string_at(a, "trigger");
  kv.same_start_flags = detail::string_at(a, "same_start_flags");
  if (const json* peaks = detail::member(a, "post_kv_peaks"); peaks != nullptr && peaks->is_object()) {
    kv.has_post_kv_peaks = true;
    for (const auto& [category, figures] : peaks->items()) {
      kv.post_kv_peaks.push_back({category, unsigned_field(figures, "at_kv_end"), unsigned_field(figures, "peak"),
                                  unsigned_field(figures, "peak_above")});
    }
  }
  kv.shift_bytes = signed_field(a, "shift_bytes");
  kv.profile = detail::string_at(a, "profile");
  kv.reason = detail::string_at(a, "reason");
  kv.path = detail::string_at(a, "path");
  return kv;
}

}  // namespace

std::vector<KvEvent> kv_events(const Trace& trace) {
  std::vector<KvEvent> events;
  for (const OtherEvent& event : trace.other_events)
    if (event.cat == "kv") events.push_back(read_kv_event(event));
  return events;
}

}  // namespace kvremap::trace
