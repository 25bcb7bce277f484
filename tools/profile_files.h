// The profile directories the `kvremap profile` subcommands read: which ones the library would use, and every
// entry of one judged by the library's rules (profiles, failed-start markers, temporary and stray files).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "interpose/kv/profile_store.h"
#include "policy/profile.h"
#include "policy/profile_key_parts.h"

namespace kvremap::cli {

// One directory the library searches for profiles, in its order.
struct ProfileLayer {
  std::string path;
  std::string origin;     // what named it: "KVREMAP_PROFILE_DIR", "XDG_CACHE_HOME or HOME", "KVREMAP_PROFILE_PATH", "DIR"
  bool writable = false;  // the directory profiles are written to; the others are only read
};

// The directories the library would use with this environment: the writable one (KVREMAP_PROFILE_DIR as
// interpose::profile_directory resolves it), then each entry of KVREMAP_PROFILE_PATH. Nothing, with `problem`
// set to one line, when profiles are off or a value breaks the path rules.
std::optional<std::vector<ProfileLayer>> layers_from_environment(std::string* problem);

// What an entry of a profile directory is, by its name.
enum class EntryKind { profile, marker, temporary, stray };

struct ProfileEntry {
  std::string name;
  EntryKind kind = EntryKind::stray;
  std::optional<policy::Profile> profile;  // a profile that reads back whole, of the key its name says
  std::optional<policy::KeyParts> parts;   // its key, field by field
  std::string problem;                     // one line naming the file when it is not what the library would use
};

// Opens `layer` as the library does (never creating it). Nothing, with `problem` set, when it is missing,
// unusable or untrusted.
std::optional<interpose::ProfileStore> open_layer(const ProfileLayer& layer, std::string* problem);

// Every entry of the directory, sorted by name, judged at `now` (seconds since the epoch): a profile is
// read under the store's trust rules and must be a valid profile (policy::read_profile_of_any_key) named
// as its key says and within its device's bounds; a marker is a problem when it is no kvremap marker, of
// no profile, or of a start known to have failed; a temporary file is a write a killed process left or
// one under way; anything else is stray.
std::vector<ProfileEntry> judge_entries(const interpose::ProfileStore& store, std::int64_t now);

// Reads one profile file (`path`: a file, or a name looked up in `layers` in order) under the same rules.
// The entry's problem is set when it cannot be used; `found_in` is the directory it was read from.
ProfileEntry read_one_profile(const std::string& path, const std::vector<ProfileLayer>& layers, std::string* found_in);

// Judges one profile's text as `name`: the checks judge_entries applies to a profile file.
ProfileEntry judge_profile_text(const std::string& name, const std::string& text, const std::string& shown_path);

// Seconds since the epoch, as the library's clock gives them.
std::int64_t now_seconds();

}  // namespace kvremap::cli
