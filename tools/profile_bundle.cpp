// Writing and reading profile bundles (tools/profile_bundle.h).
#include "tools/profile_bundle.h"

#include <nlohmann/json.hpp>

#include "policy/json_depth.h"

namespace kvremap::cli {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kFormat = "kvremap profile bundle";
constexpr int kVersion = 1;
// The bundle, its list, an entry, then a profile's own three levels.
constexpr std::size_t kMaxNesting = 10;

}  // namespace

std::string bundle_text(const std::vector<ProfileEntry>& entries) {
  ordered_json bundle;
  bundle["format"] = kFormat;
  bundle["version"] = kVersion;
  bundle["profiles"] = ordered_json::array();
  for (const ProfileEntry& e : entries) {
    if (!e.profile) continue;
    bundle["profiles"].push_back({{"name", e.name}, {"profile", ordered_json::parse(policy::to_json(*e.profile))}});
  }
  return bundle.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

namespace {

std::optional<std::vector<BundleEntry>> read_checked(std::string_view text, std::string* problem) {
  if (text.size() > kMaxBundleBytes) {
    *problem = "larger than " + std::to_string(kMaxBundleBytes >> 20) + " MiB: not a kvremap profile bundle";
    return std::nullopt;
  }
  if (policy::json_nested_deeper_than(text, kMaxNesting)) {
    *problem = "nested deeper than " + std::to_string(kMaxNesting) + " levels: not a kvremap profile bundle";
    return std::nullopt;
  }
  ordered_json bundle;
  try {
    bundle = ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    *problem = "not JSON: not a kvremap profile bundle (kvremap profile export writes one)";
    return std::nullopt;
  }
  if (!bundle.is_object() || bundle.value("format", "") != kFormat) {
    *problem = "not a kvremap profile bundle (no \"format\": \"kvremap profile bundle\"; kvremap profile export writes one)";
    return std::nullopt;
  }
  if (!bundle.contains("version") || !bundle["version"].is_number_integer() || bundle["version"] != kVersion) {
    *problem = "bundle version " + (bundle.contains("version") ? bundle["version"].dump() : std::string("missing")) +
               ", expected " + std::to_string(kVersion) + ": export it again with this kvremap";
    return std::nullopt;
  }
  if (!bundle.contains("profiles") || !bundle["profiles"].is_array()) {
    *problem = "the bundle has no \"profiles\" list";
    return std::nullopt;
  }
  std::vector<BundleEntry> out;
  std::size_t index = 0;
  for (const ordered_json& entry : bundle["profiles"]) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("profile") ||
        !entry["profile"].is_object()) {
      *problem = "bundle entry " + std::to_string(index) + " is not {\"name\": FILE, \"profile\": {...}}";
      return std::nullopt;
    }
    out.push_back({entry["name"].get<std::string>(), entry["profile"].dump()});
    ++index;
  }
  return out;
}

}  // namespace

std::optional<std::vector<BundleEntry>> read_bundle(std::string_view text, std::string* problem) {
  try {
    return read_checked(text, problem);
  } catch (const std::exception&) {  // a field of the wrong type
    *problem = "not a kvremap profile bundle (a field of the wrong type; kvremap profile export writes one)";
    return std::nullopt;
  }
}

}  // namespace kvremap::cli
