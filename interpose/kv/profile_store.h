// Profile files on disk: where they live, an atomic write that a kill never leaves half-done, a bounded load.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "policy/profile.h"

namespace kvremap::interpose {

// The profile directory for a KVREMAP_PROFILE_DIR value: the value itself; for an empty one
// $XDG_CACHE_HOME/kvremap, else $HOME/.cache/kvremap (`is_default` set). Empty when profiles are `off`
// or no home is known. `xdg_cache_home` and `home` are the variables' values (null when unset).
struct ProfileDirectory {
  std::string path;
  bool is_default = false;
};
ProfileDirectory profile_directory(std::string_view option, const char* xdg_cache_home, const char* home);

// Writes `text` to `directory`/`name` so that the final name only ever holds a whole file: the text goes
// to `<name>.tmp.<pid>` beside it (so ranks and concurrent starts never share one), is fsynced, then
// renamed over `name`. Creates the directory and its parents first (0700 when `private_directory`: the
// default cache directory is the user's own). Returns the final path, or sets `problem` to one line naming
// the path and the error and returns nothing; never throws.
std::optional<std::string> write_profile_file(const ProfileDirectory& directory, std::string_view name,
                                              std::string_view text, std::string* problem);

// Reads `path` as a profile for `expected_key` (a policy::key_text()), at most policy::kMaxProfileBytes.
// Nothing when the file is missing (`problem` left empty: no profile yet is not a problem), or when it
// is unreadable, too large, corrupt or of another version or key (`problem` says which, one line).
std::optional<policy::Profile> load_profile_file(const std::string& path, std::string_view expected_key,
                                                 std::string* problem);

}  // namespace kvremap::interpose
