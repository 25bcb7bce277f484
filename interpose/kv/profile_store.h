// Profile files on disk: where they live, which directories and files are trusted, an atomic write that a kill
// never leaves half-done and that follows no link, a bounded read that never blocks, the per-start failed-start markers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/profile.h"
#include "policy/start_marker.h"

namespace kvremap::interpose {

// The profile directory for a KVREMAP_PROFILE_DIR value: the value itself; for an empty one
// $XDG_CACHE_HOME/kvremap, else $HOME/.cache/kvremap (`is_default` set). Empty when profiles are `off`
// or no home is known. `xdg_cache_home` and `home` are the variables' values (null when unset).
struct ProfileDirectory {
  ProfileDirectory() = default;
  ProfileDirectory(std::string path_, bool is_default_, std::string origin_ = {}, bool read_only_ = false)
      : path(std::move(path_)), is_default(is_default_), origin(std::move(origin_)), read_only(read_only_) {}
  std::string path;
  bool is_default = false;
  // What named it, for its error lines; empty: KVREMAP_PROFILE_DIR (XDG_CACHE_HOME or HOME when is_default).
  std::string origin;
  bool read_only = false;  // a KVREMAP_PROFILE_PATH layer: searched, never written
};
ProfileDirectory profile_directory(std::string_view option, const char* xdg_cache_home, const char* home);

// This process as a marker names it (policy::StartIdentity): its host name, boot id, PID namespace, pid
// and start time, read from the kernel once per process (the pid and start time again after a fork).
policy::StartIdentity this_start();
// The start time of `pid` on this host in clock ticks (/proc/<pid>/stat), nothing when no such process.
std::optional<std::uint64_t> process_start_ticks(std::int64_t pid);

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
  // The text of `name` under load()'s rules (a trusted regular file, never a link, never blocking, at most
  // one byte past policy::kMaxProfileBytes), unparsed: the `kvremap profile` tool reads every profile of a
  // directory, whatever its key. Nothing with `problem` empty when it is missing.
  std::optional<std::string> read_trusted(std::string_view name, std::string* problem) const;

  // The names in the directory (not "." or ".."), sorted; the tool's listing, checks and pruning.
  std::vector<std::string> entries() const;
  // Removes the entry `name` (never a directory); false with `problem` set (one line) when it cannot.
  bool remove(std::string_view name, std::string* problem) const;

  // The failed-start markers of profile `name` (policy/start_marker.h), one per start a profile sized:
  // `<name>.unconfirmed.<host>.<pid>.<start ticks>`, created (whole: written under a temporary name and
  // renamed) before that start reports its shifted figure to the engine, removed when it writes its
  // profile. A marker whose start is known to have failed means a start it sized never reached its
  // commit (failed, killed or crashed), so the next start is not sized from it.
  bool mark(std::string_view name, const policy::StartIdentity& me, std::string* problem) const;
  void unmark(std::string_view name, const policy::StartIdentity& me) const;

  // One marker of a profile, as a start `here` judges it.
  struct Marker {
    std::string file;                              // its name in the directory
    std::optional<policy::StartIdentity> owner;    // none: the shared `<name>.unconfirmed` of no start
    bool failed = false;
    std::string problem;  // set (one line naming the file) when the entry is no kvremap marker: ignored
  };
  // Every marker of `name`: read only when a regular file (never through a link, never blocking) of
  // this user or root, writable by nobody else and at most policy::kMaxMarkerBytes; others come back
  // with `problem` set and count for nothing. `now` is seconds since the epoch.
  std::vector<Marker> markers(std::string_view name, const policy::StartIdentity& here, std::int64_t now) const;
  // Removes the markers of `name` judged failed (never one of a start still running, never an entry
  // that is no marker).
  void remove_failed(std::string_view name, const policy::StartIdentity& here, std::int64_t now) const;

 private:
  ProfileStore(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace kvremap::interpose
