// Profile keys (normalised command line, device, rank, driver) and the profile's JSON text, written and checked.
#include "policy/profile.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>

#include "policy/json_depth.h"
#include "policy/phases.h"
#include "policy/redact.h"
#include "policy/sglang_model.h"
#include "policy/units.h"
#include "policy/vllm_model.h"

namespace kvremap::policy {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The ignored flag `arg` spells (`--f`, `--f=v`, or `--no-f` for a boolean), or nullptr.
const FlagSpec* ignored_flag_named(std::span<const FlagSpec> flags, std::string_view arg) {
  for (const FlagSpec& flag : flags) {
    if (arg == flag.name) return &flag;
    if (arg.starts_with(flag.name) && arg.size() > flag.name.size() && arg[flag.name.size()] == '=') return &flag;
    if (flag.takes == Takes::nothing && arg.starts_with("--no-") && arg.substr(5) == flag.name.substr(2)) return &flag;
  }
  return nullptr;
}

bool is_option(std::string_view arg) { return arg.size() > 1 && arg.front() == '-'; }

// Arguments made of these need no quotes in the key text; anything else (space, quote, ';', bytes
// outside printable ASCII) is quoted and escaped, so the text stays one line and unambiguous.
bool needs_no_quotes(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
  });
}

std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char escape[5];
      std::snprintf(escape, sizeof escape, "\\x%02x", byte);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string in_quotes_if_needed(std::string_view text) {
  return needs_no_quotes(text) ? std::string(text) : in_quotes(text);
}

// ---- reading -------------------------------------------------------------------------------------

// A profile nests three levels (the object, post_kv, one category); anything much deeper is not one,
// and never reaches the JSON library's recursive parser. Brackets inside strings do not count.
constexpr std::size_t kMaxProfileNesting = 8;

// The JSON library's messages quote the input: keep them to one short line of printable ASCII.
std::string one_line(std::string_view message) {
  constexpr std::size_t kMaxChars = 160;
  std::string out(message.substr(0, kMaxChars));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (message.size() > kMaxChars) out += "...";
  return out;
}

ProfileRead refuse(std::string problem) { return ProfileRead{std::nullopt, std::move(problem)}; }

// Typed access to the profile's fields; the first problem is kept and every later read returns zero.
class FieldReader {
 public:
  const std::string& problem() const { return problem_; }

  const json* member(const json& object, std::string_view name, const std::string& path) {
    const auto found = object.find(name);
    if (found == object.end()) {
      fail("missing field " + path);
      return nullptr;
    }
    return &*found;
  }

  std::uint64_t uint(const json& object, std::string_view name, const std::string& path,
                     std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const json* value = member(object, name, path);
    if (value == nullptr) return 0;
    if (value->is_number_unsigned()) {
      const auto n = value->get<std::uint64_t>();
      if (n <= max) return n;
      fail("field " + path + ": " + std::to_string(n) + " is out of range (at most " + std::to_string(max) + ")");
    } else if (value->is_number_integer()) {
      fail("field " + path + ": negative (" + std::to_string(value->get<std::int64_t>()) + ")");
    } else {
      fail("field " + path + ": " + type_problem(*value, "a non-negative integer"));
    }
    return 0;
  }

  std::int64_t int64(const json& object, std::string_view name, const std::string& path) {
    const json* value = member(object, name, path);
    if (value == nullptr) return 0;
    if (value->is_number_unsigned()) {
      const auto n = value->get<std::uint64_t>();
      if (n <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return static_cast<std::int64_t>(n);
      fail("field " + path + ": " + std::to_string(n) + " is out of range for a signed 64-bit integer");
    } else if (value->is_number_integer()) {
      return value->get<std::int64_t>();
    } else {
      fail("field " + path + ": " + type_problem(*value, "an integer"));
    }
    return 0;
  }

  // A share of the device: a number in (0, 1], or nothing for null.
  std::optional<double> share(const json& object, std::string_view name, const std::string& path) {
    const json* value = member(object, name, path);
    if (value == nullptr || value->is_null()) return std::nullopt;
    if (value->is_number()) {
      const auto v = value->get<double>();
      if (v > 0.0 && v <= 1.0) return v;
      fail("field " + path + ": " + value->dump() + " is not a share in (0, 1]");
    } else {
      fail("field " + path + ": " + type_problem(*value, "a number or null"));
    }
    return std::nullopt;
  }

  std::string string(const json& object, std::string_view name, const std::string& path) {
    const json* value = member(object, name, path);
    if (value == nullptr) return {};
    if (value->is_string()) return value->get<std::string>();
    fail("field " + path + ": " + type_problem(*value, "a string"));
    return {};
  }

  const json* object(const json& parent, std::string_view name, const std::string& path, bool nullable) {
    const json* value = member(parent, name, path);
    if (value == nullptr || (nullable && value->is_null())) return nullptr;
    if (value->is_object()) return value;
    fail("field " + path + ": " + type_problem(*value, nullable ? "an object or null" : "an object"));
    return nullptr;
  }

  void fail(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
  }

 private:
  static std::string type_problem(const json& value, std::string_view wanted) {
    const std::string_view type = value.type_name();
    const std::string found =
        value.is_number_float()
            ? "not an integer"
            : std::string(type.front() == 'a' || type.front() == 'o' ? "an " : "a ") + value.type_name();
    return found + ", expected " + std::string(wanted);
  }

  std::string problem_;
};

bool is_phase_name(std::string_view name) {
  for (Phase phase : {Phase::init, Phase::loading, Phase::profiling, Phase::kv_allocation, Phase::post_kv_warmup,
                      Phase::capture, Phase::serving})
    if (to_string(phase) == name) return true;
  return false;
}

constexpr std::string_view kFormat = "kvremap profile";

// `expected_key` none: any key (the tool reads profiles of every configuration).
ProfileRead read_checked(std::string_view text, std::optional<std::string_view> expected_key) {
  if (text.size() > kMaxProfileBytes)
    return refuse("larger than " + std::to_string(kMaxProfileBytes >> 20) + " MiB: not a kvremap profile");
  if (json_nested_deeper_than(text, kMaxProfileNesting))
    return refuse("nested deeper than " + std::to_string(kMaxProfileNesting) + " levels: not a kvremap profile");
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& error) {
    return refuse("not JSON: " + one_line(error.what()));
  }
  if (!root.is_object()) return refuse(std::string("not a JSON object but ") + root.type_name());

  FieldReader fields;
  if (fields.string(root, "format", "format") != kFormat || !fields.problem().empty())
    return refuse("not a kvremap profile (no \"format\": \"kvremap profile\")");
  const std::uint64_t version = fields.uint(root, "schema_version", "schema_version");
  if (!fields.problem().empty()) return refuse(fields.problem());
  if (version != kProfileSchemaVersion)
    return refuse("schema version " + std::to_string(version) + ", expected " + std::to_string(kProfileSchemaVersion));
  Profile p;
  p.key = fields.string(root, "key", "key");
  if (!fields.problem().empty()) return refuse(fields.problem());
  if (expected_key && p.key != *expected_key) return refuse("written for another configuration (its key does not match)");

  p.kv_requested_bytes = fields.uint(root, "kv_requested_bytes", "kv_requested_bytes");
  p.kv_tensors = static_cast<std::uint32_t>(
      fields.uint(root, "kv_tensors", "kv_tensors", std::numeric_limits<std::uint32_t>::max()));
  p.granularity_bytes = fields.uint(root, "granularity_bytes", "granularity_bytes");
  p.headroom_bytes = fields.uint(root, "headroom_bytes", "headroom_bytes");
  // Optional: profiles written before the field took their whole headroom from measurement.
  if (root.contains("headroom_measured_bytes") && !root.at("headroom_measured_bytes").is_null())
    p.headroom_measured_bytes = fields.uint(root, "headroom_measured_bytes", "headroom_measured_bytes");
  p.margin_bytes = fields.int64(root, "margin_bytes", "margin_bytes");
  p.sizing_shift_bytes = fields.int64(root, "sizing_shift_bytes", "sizing_shift_bytes");
  p.memory_share = fields.share(root, "memory_share", "memory_share");
  p.measured_at = fields.int64(root, "measured_at", "measured_at");
  p.written_at = fields.int64(root, "written_at", "written_at");
  if (const json* serving = fields.member(root, "serving_peak_bytes", "serving_peak_bytes");
      serving != nullptr && !serving->is_null())
    p.serving_peak_bytes = fields.uint(root, "serving_peak_bytes", "serving_peak_bytes");
  if (const json* query = fields.object(root, "sizing_query", "sizing_query", true)) {
    SizingQuery q;
    q.index = static_cast<std::uint32_t>(
        fields.uint(*query, "index", "sizing_query.index", std::numeric_limits<std::uint32_t>::max()));
    q.phase = fields.string(*query, "phase", "sizing_query.phase");
    if (fields.problem().empty() && !is_phase_name(q.phase))
      fields.fail("field sizing_query.phase: " + in_quotes(one_line(q.phase)) + " is not a phase name");
    q.device_free_bytes = fields.uint(*query, "device_free_bytes", "sizing_query.device_free_bytes");
    p.sizing_query = std::move(q);
  }
  if (const json* post_kv = fields.object(root, "post_kv", "post_kv", false)) {
    for (std::size_t i = 0; i < kCategoryCount; ++i) {
      const std::string name(to_string(static_cast<Category>(i)));
      const std::string path = "post_kv." + name;
      if (const json* peak = fields.object(*post_kv, name, path, false)) {
        p.post_kv[i].resident_bytes = fields.uint(*peak, "resident_bytes", path + ".resident_bytes");
        p.post_kv[i].transient_bytes = fields.uint(*peak, "transient_bytes", path + ".transient_bytes");
      }
    }
  }
  if (!fields.problem().empty()) return refuse(fields.problem());
  return ProfileRead{std::move(p), {}};
}

}  // namespace

std::span<const FlagSpec> flags_ignored_by_profiles(EngineKind kind) {
  switch (kind) {
    case EngineKind::vllm:
      return vllm_flags_ignored_by_profiles();
    case EngineKind::sglang:
      return sglang_flags_ignored_by_profiles();
    case EngineKind::other:
      break;
  }
  return {};
}

std::vector<std::string> normalised_cmdline(std::span<const std::string> full_argv) {
  // Secret flags and their values never reach a key (nor the profile file that stores it); flag names
  // as the engine's parser reads them (`--a_b` is `--a-b`).
  const std::vector<std::string> argv = dashed_flags(without_secrets(full_argv));
  std::vector<std::string> out;
  if (argv.empty()) return out;
  const std::string_view program = argv[0];
  const std::size_t slash = program.rfind('/');
  out.emplace_back(slash == std::string_view::npos ? program : program.substr(slash + 1));

  const EngineKind kind = profile_engine(argv).kind;
  const std::span<const FlagSpec> ignored = flags_ignored_by_profiles(kind);
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string_view arg = argv[i];
    if (const FlagSpec* flag = ignored_flag_named(ignored, arg)) {
      if (arg == flag->name) {
        if (flag->takes == Takes::one_value && i + 1 < argv.size()) ++i;
        if (flag->takes == Takes::values)
          while (i + 1 < argv.size() && !is_option(argv[i + 1])) ++i;
      }
      continue;
    }
    const std::size_t equals = arg.find('=');
    if (arg.starts_with("--") && equals != std::string_view::npos && equals > 2) {
      out.emplace_back(arg.substr(0, equals));
      out.emplace_back(arg.substr(equals + 1));
    } else {
      out.emplace_back(arg);
    }
  }
  if (kind == EngineKind::vllm) canonical_vllm_model(out);
  if (kind == EngineKind::sglang) canonical_sglang_model(out);
  return out;
}

namespace {

std::optional<std::size_t> model_value_index(EngineKind kind, std::span<const std::string> key_args) {
  switch (kind) {
    case EngineKind::vllm:
      return vllm_model_value_index(key_args);
    case EngineKind::sglang:
      return sglang_model_value_index(key_args);
    case EngineKind::other:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> model_argument(std::span<const std::string> argv) {
  const std::vector<std::string> key_args = normalised_cmdline(argv);
  const std::optional<std::size_t> at = model_value_index(profile_engine(argv).kind, key_args);
  if (!at) return std::nullopt;
  return key_args[*at];
}

std::string model_identity_text(std::string_view config_json) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a_64(config_json)));
  return std::string("config.json fnv1a:") + hex;
}

std::string key_text(const ProfileKey& key) {
  std::string text = "argv:";
  std::vector<std::string> key_args = normalised_cmdline(key.argv);
  // A model known by its config.json: the path it was found under is not part of the configuration.
  if (!key.model_identity.empty())
    if (const std::optional<std::size_t> at = model_value_index(profile_engine(key.argv).kind, key_args))
      key_args[*at] = "<model>";
  for (const std::string& arg : key_args) text += " " + in_quotes_if_needed(arg);
  text += "; device: " + in_quotes(key.device_name);
  text += "; total_bytes: " + std::to_string(key.device_total_bytes);
  text += "; rank: " + std::to_string(key.rank);
  text += "; driver: " + std::to_string(key.driver_version);
  text += "; schema: " + std::to_string(key.schema_version);
  // Only when set, so that a start without any of them keeps the key it always had.
  if (!key.environment.empty()) {
    text += "; env:";
    for (const std::string& variable : key.environment) text += " " + in_quotes_if_needed(variable);
  }
  if (!key.software.empty()) {
    text += "; software:";
    for (const std::string& module : key.software) text += " " + in_quotes(module);
  }
  if (!key.config.empty()) text += "; config: " + in_quotes(key.config);
  if (!key.model_identity.empty()) text += "; model: " + in_quotes(key.model_identity);
  return text;
}

std::uint64_t fnv1a_64(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string profile_file_name(const ProfileKey& key) { return profile_file_name(key.argv, key_text(key), key.rank); }

std::string profile_file_name(std::span<const std::string> argv, std::string_view text, std::uint32_t rank) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(fnv1a_64(text)));
  return std::string(to_string(profile_engine(argv).kind)) + "-" + id + "-rank" + std::to_string(rank) + ".json";
}

std::string to_json(const Profile& profile) {
  ordered_json out;
  out["format"] = kFormat;
  out["schema_version"] = profile.schema_version;
  out["key"] = profile.key;
  out["measured_at"] = profile.measured_at;
  out["written_at"] = profile.written_at;
  out["kv_requested_bytes"] = profile.kv_requested_bytes;
  out["kv_tensors"] = profile.kv_tensors;
  out["granularity_bytes"] = profile.granularity_bytes;
  out["headroom_bytes"] = profile.headroom_bytes;
  out["headroom_measured_bytes"] =
      profile.headroom_measured_bytes ? ordered_json(*profile.headroom_measured_bytes) : ordered_json();
  out["margin_bytes"] = profile.margin_bytes;
  out["sizing_shift_bytes"] = profile.sizing_shift_bytes;
  out["memory_share"] = profile.memory_share ? ordered_json(*profile.memory_share) : ordered_json();
  out["serving_peak_bytes"] = profile.serving_peak_bytes ? ordered_json(*profile.serving_peak_bytes) : ordered_json();
  if (profile.sizing_query) {
    out["sizing_query"] = {{"index", profile.sizing_query->index},
                           {"phase", profile.sizing_query->phase},
                           {"device_free_bytes", profile.sizing_query->device_free_bytes}};
  } else {
    out["sizing_query"] = nullptr;
  }
  ordered_json post_kv = ordered_json::object();
  for (std::size_t i = 0; i < kCategoryCount; ++i)
    post_kv[std::string(to_string(static_cast<Category>(i)))] = {
        {"resident_bytes", profile.post_kv[i].resident_bytes}, {"transient_bytes", profile.post_kv[i].transient_bytes}};
  out["post_kv"] = std::move(post_kv);
  // Strings that are not UTF-8 (a key is ASCII, but a caller's phase name might not be) are replaced, not thrown on.
  return out.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

namespace {

// Byte figures beyond 2^58 (256 PiB) are no device's; clamped there, the sums below (at most twelve
// figures) never overflow.
constexpr std::int64_t kBoundsLimit = std::int64_t{1} << 58;
std::int64_t bounded(std::uint64_t v) { return static_cast<std::int64_t>(std::min<std::uint64_t>(v, kBoundsLimit)); }
std::int64_t bounded(std::int64_t v) { return std::clamp(v, -kBoundsLimit, kBoundsLimit); }
std::uint64_t magnitude(std::int64_t v) {
  return v < 0 ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
}
std::string signed_size(std::int64_t v) { return (v < 0 ? "-" : "") + format_bytes(magnitude(v)); }

}  // namespace

std::uint64_t profile_bounds_slack(std::uint64_t device_total) {
  return std::max<std::uint64_t>(std::uint64_t{1} << 30, device_total / 16);
}

std::optional<std::string> profile_out_of_bounds(const Profile& p, std::uint64_t device_total) {
  std::vector<std::string> problems;
  const std::string device = format_bytes(device_total);
  const auto at_most_device = [&](const std::string& field, std::uint64_t value, const std::string& shown) {
    if (value > device_total) problems.push_back(field + " " + shown + " is more than the device's " + device);
  };
  at_most_device("sizing_shift_bytes", magnitude(p.sizing_shift_bytes), signed_size(p.sizing_shift_bytes));
  at_most_device("margin_bytes", magnitude(p.margin_bytes), signed_size(p.margin_bytes));
  at_most_device("headroom_bytes", p.headroom_bytes, format_bytes(p.headroom_bytes));
  if (p.headroom_measured_bytes && *p.headroom_measured_bytes > p.headroom_bytes)
    problems.push_back("headroom_measured_bytes " + format_bytes(*p.headroom_measured_bytes) +
                       " is more than headroom_bytes " + format_bytes(p.headroom_bytes) + ", of which it is a part");
  at_most_device("granularity_bytes", p.granularity_bytes, format_bytes(p.granularity_bytes));
  if (p.serving_peak_bytes)
    at_most_device("serving_peak_bytes", *p.serving_peak_bytes, format_bytes(*p.serving_peak_bytes));
  if (p.sizing_query)
    at_most_device("sizing_query.device_free_bytes", p.sizing_query->device_free_bytes,
                   format_bytes(p.sizing_query->device_free_bytes));
  for (std::size_t i = 0; i < kCategoryCount; ++i) {
    const std::string name = "post_kv." + std::string(to_string(static_cast<Category>(i)));
    at_most_device(name + ".resident_bytes", p.post_kv[i].resident_bytes, format_bytes(p.post_kv[i].resident_bytes));
    at_most_device(name + ".transient_bytes", p.post_kv[i].transient_bytes, format_bytes(p.post_kv[i].transient_bytes));
  }
  // The relations below assume figures of this device's size: only checked when each one is.
  if (problems.empty()) {
    const std::int64_t total = bounded(device_total);
    const std::int64_t kv = bounded(p.kv_requested_bytes);
    const std::int64_t margin = bounded(p.margin_bytes);
    const std::int64_t headroom = bounded(p.headroom_bytes);
    const std::int64_t shift = bounded(p.sizing_shift_bytes);
    // The arena rounds each tensor up to whole granules: the KV the commit planned is at most this much more.
    const std::uint64_t granule = p.granularity_bytes;
    const std::uint64_t limit = static_cast<std::uint64_t>(kBoundsLimit);
    const std::int64_t rounding =
        granule == 0 ? 0 : bounded(p.kv_tensors > limit / granule ? limit : std::uint64_t{p.kv_tensors} * granule);
    // margin = free at the commit - headroom - KV, and the driver's free memory lies in [0, total].
    const std::int64_t free_at_commit = margin + headroom + kv;
    if (free_at_commit > total)
      problems.push_back("margin_bytes " + signed_size(p.margin_bytes) + " with headroom_bytes " +
                         format_bytes(p.headroom_bytes) + " and kv_requested_bytes " +
                         format_bytes(p.kv_requested_bytes) +
                         " make more free memory at the commit than the device's " + device);
    else if (free_at_commit + rounding < 0)
      problems.push_back("margin_bytes " + signed_size(p.margin_bytes) + " with headroom_bytes " +
                         format_bytes(p.headroom_bytes) + " and kv_requested_bytes " +
                         format_bytes(p.kv_requested_bytes) + " make less than no free memory at the commit");
    // The engine sized its KV cache from the free memory its sizing query reported (the driver's less
    // the shift); what it then lacked at the commit is what the device lost after that query: post-KV
    // work kept resident, and the headroom kept free for serving.
    std::int64_t resident = 0;
    for (const PostKvPeak& peak : p.post_kv) resident += bounded(peak.resident_bytes);
    const std::int64_t could_lack =
        headroom + resident + std::max<std::int64_t>(-shift, 0) + bounded(profile_bounds_slack(device_total));
    if (margin < 0 && -margin > could_lack)
      problems.push_back("margin_bytes " + signed_size(p.margin_bytes) + " is a larger deficit than the " +
                         format_bytes(static_cast<std::uint64_t>(could_lack)) +
                         " the start could have lacked (headroom, post-KV resident bytes, a negative shift and " +
                         format_bytes(profile_bounds_slack(device_total)) + " of slack)");
    // vLLM sizes its KV cache within share x total, less the weights, activations and the shift.
    if (p.memory_share) {
      const double within = *p.memory_share * static_cast<double>(total) + static_cast<double>(rounding);
      const double sized = static_cast<double>(kv) + static_cast<double>(shift);
      if (within < sized) {
        char share[32];
        std::snprintf(share, sizeof share, "%.4g", *p.memory_share);
        problems.push_back(std::string("memory_share ") + share + " of the device's " + device + " cannot hold the " +
                           format_bytes(p.kv_requested_bytes) + " of KV requested" +
                           (shift > 0 ? " and the " + format_bytes(magnitude(shift)) + " shift" : ""));
      }
    }
  }
  if (problems.empty()) return std::nullopt;
  std::string line = "out of range for this device: ";
  for (std::size_t i = 0; i < problems.size(); ++i) line += (i ? "; " : "") + problems[i];
  return line;
}

ProfileRead read_profile(std::string_view text, std::string_view expected_key) {
  try {
    return read_checked(text, expected_key);
  } catch (const std::exception& error) {
    return refuse("cannot read the profile: " + one_line(error.what()));
  }
}

ProfileRead read_profile_of_any_key(std::string_view text) {
  try {
    return read_checked(text, std::nullopt);
  } catch (const std::exception& error) {
    return refuse("cannot read the profile: " + one_line(error.what()));
  }
}

}  // namespace kvremap::policy
