// `kvremap profile verify` and `prune`: every file of a directory checked as the library would judge it, and
// the removal of profiles by age or key.
#include "tools/exit_status.h"
#include "tools/profile_actions.h"
#include "tools/text.h"

namespace kvremap::cli {

int profile_verify(const std::vector<ProfileLayer>& layers, bool explicit_dir) {
  std::size_t problems = 0, files = 0;
  for (const ProfileLayer& layer : layers) {
    std::string problem;
    interpose::DirectoryProblem kind = interpose::DirectoryProblem::none;
    const auto store =
        interpose::ProfileStore::open({layer.path, false, layer.origin, !layer.writable}, false, &kind, &problem);
    if (!store) {
      // A writable directory not made yet holds no profile yet: nothing is wrong with it.
      if (kind == interpose::DirectoryProblem::none && layer.writable && !explicit_dir) continue;
      if (problem.empty()) problem = text("the profile directory {} does not exist", layer.path);
      say("profile verify", problem);
      ++problems;
      continue;
    }
    for (const ProfileEntry& e : judge_entries(*store, now_seconds())) {
      ++files;
      if (e.problem.empty()) continue;
      say("profile verify", e.problem);
      ++problems;
    }
  }
  if (problems) return kExitTraceProblem;
  std::printf("%zu file%s in %zu director%s: clean\n", files, files == 1 ? "" : "s", layers.size(),
              layers.size() == 1 ? "y" : "ies");
  return kExitOk;
}

int profile_prune(const ProfileLayer& layer, const PruneRule& rule) {
  std::string problem;
  const auto store = open_layer(layer, &problem);
  if (!store) {
    say("profile prune", problem);
    return kExitTraceProblem;
  }
  const std::int64_t now = now_seconds();
  const std::vector<ProfileEntry> entries = judge_entries(*store, now);
  int status = kExitOk;
  std::size_t profiles = 0, removed = 0;
  for (const ProfileEntry& e : entries) {
    if (!e.profile) continue;
    ++profiles;
    const std::int64_t age = now - e.profile->written_at;
    if (rule.older_than_seconds && age <= *rule.older_than_seconds) continue;
    if (rule.key_contains && e.profile->key.find(*rule.key_contains) == std::string::npos) continue;
    const std::string what = text("{}  {}  written {} ago", e.name, key_summary(*e.parts), policy::format_age(age));
    if (rule.dry_run) {
      std::printf("would remove %s\n", what.c_str());
      ++removed;
      continue;
    }
    if (!store->remove(e.name, &problem)) {
      say("profile prune", problem);
      status = kExitTraceProblem;
      continue;
    }
    // Its markers go with it: they speak of starts this profile sized.
    for (const ProfileEntry& other : entries)
      if (other.kind == EntryKind::marker && other.name.starts_with(e.name + ".unconfirmed")) store->remove(other.name, &problem);
    std::printf("removed %s\n", what.c_str());
    ++removed;
  }
  std::printf("%s %zu of %zu profile%s in %s\n", rule.dry_run ? "would remove" : "removed", removed, profiles,
              profiles == 1 ? "" : "s", policy::printable(store->path()).c_str());
  return status;
}

}  // namespace kvremap::cli
