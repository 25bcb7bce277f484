// Profile files on disk: where they live, which directories and files are trusted, an atomic write that a kill
// never leaves half-done and that follows no link, a bounded read that never blocks, the failed-start marker.
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

// Why a profile directory could not be opened.
enum class DirectoryProblem {
  none,       // opened (or, when not asked to create it, missing: no profile yet)
  unusable,   // it cannot be created or opened (not a directory, no permission, ...)
  untrusted,  // it exists but another user could change what is in it: profiles are off for the process
};

// One opened profile directory. Everything inside is reached through the directory's descriptor, so
// the directory checked is the one used. Every message names its path with control characters escaped
// (policy/printable.h) and is one line.
class ProfileStore {
 public:
  // Opens `directory`, creating it and its missing parents 0700 when `create` (existing ones are left
  // as they are). Trusted only when owned by this user or root and writable by neither group nor others
  // (symbolic links to it are followed: ~/.cache is often one). Nothing, with `kind` and `problem` set,
  // when it is missing (`create` false: kind none, problem empty), unusable or untrusted.
  static std::optional<ProfileStore> open(const ProfileDirectory& directory, bool create, DirectoryProblem* kind,
                                          std::string* problem);
  ProfileStore(ProfileStore&& other) noexcept;
  ProfileStore& operator=(ProfileStore&&) = delete;
  ProfileStore(const ProfileStore&) = delete;
  ~ProfileStore();

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view name) const { return path_ + "/" + std::string(name); }

  // Writes `text` under `name` so that the name only ever holds a whole file: the text goes to a new
  // temporary file beside it, created exclusively (never through a link or over an existing entry),
  // mode 0600, fsynced, then renamed over `name`. Returns the final path, or sets `problem` (one line
  // naming the path and the error) and returns nothing.
  std::optional<std::string> write(std::string_view name, std::string_view text, std::string* problem) const;

  // Reads `name` as a profile for `expected_key` (a policy::key_text()), at most policy::kMaxProfileBytes.
  // Nothing when it is missing (`problem` left empty: no profile yet is not a problem). Otherwise read
  // only when it is a regular file (opened without following a link and without blocking: a FIFO never
  // hangs the engine) owned by this user or root and writable by neither group nor others; any other
  // file, or one unreadable, too large, corrupt or of another version or key, sets `problem`.
  std::optional<policy::Profile> load(std::string_view name, std::string_view expected_key,
                                      std::string* problem) const;

  // The failed-start marker of profile `name` (`<name>.unconfirmed`): created, exclusively, before a
  // start sized from the profile reports its shifted figure to the engine, removed when that start
  // commits. A marker still there at the next start means a start it sized never reached its commit
  // (failed, killed or crashed), so that start is not sized from it.
  static std::string marker_name(std::string_view name);
  bool mark(std::string_view name, std::string* problem) const;
  bool marked(std::string_view name) const;
  void unmark(std::string_view name) const;

 private:
  ProfileStore(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace kvremap::interpose
