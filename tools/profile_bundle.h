// A profile bundle: every valid profile of a directory in one JSON file, to carry profiles to another host.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/profile_files.h"

namespace kvremap::cli {

// Larger inputs are no bundle: a profile is at most policy::kMaxProfileBytes, and a directory of a few hundred
// configurations comes nowhere near this.
inline constexpr std::size_t kMaxBundleBytes = std::size_t{256} << 20;

// {"format": "kvremap profile bundle", "version": 1, "profiles": [{"name": NAME, "profile": {...}}, ...]}, the
// profiles of `entries` that read back whole, as they were written; '\n'-terminated.
std::string bundle_text(const std::vector<ProfileEntry>& entries);

// One entry of a bundle as it came: its name and its profile's JSON text, not yet judged.
struct BundleEntry {
  std::string name;
  std::string text;
};

// The entries of a bundle, or nothing with `problem` set to one line when the text is no bundle (not JSON,
// another format or version, too large or too deeply nested, an entry that is not {"name", "profile"}).
std::optional<std::vector<BundleEntry>> read_bundle(std::string_view text, std::string* problem);

}  // namespace kvremap::cli
