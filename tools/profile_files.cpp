// The profile directories the tool reads and each entry in one, judged by the library's rules.
#include "tools/profile_files.h"

#include <cstdlib>
#include <ctime>

#include "policy/path_rules.h"
#include "policy/printable.h"
#include "policy/profile_layers.h"

namespace kvremap::cli {
namespace {

bool ends_with(const std::string& s, std::string_view tail) { return s.size() >= tail.size() && s.ends_with(tail); }

// The profile an entry belongs to, by the store's naming (interpose/kv/profile_store.h): "<name>.unconfirmed"
// and "<name>.unconfirmed.<...>" are markers, "<name>.tmp.<...>" temporaries.
EntryKind kind_of(const std::string& name, std::string* profile) {
  for (const auto& [infix, kind] : {std::pair{std::string_view(".json.unconfirmed"), EntryKind::marker},
                                    std::pair{std::string_view(".json.tmp."), EntryKind::temporary}}) {
    const std::size_t at = name.find(infix);
    if (at == std::string::npos) continue;
    if (kind == EntryKind::marker && at + infix.size() != name.size() && name[at + infix.size()] != '.') continue;
    *profile = name.substr(0, at + 5);
    return kind;
  }
  if (ends_with(name, ".json")) {
    *profile = name;
    return EntryKind::profile;
  }
  return EntryKind::stray;
}

std::string shown_path(const std::string& dir, const std::string& name) { return policy::printable(dir + "/" + name); }

}  // namespace

std::int64_t now_seconds() { return static_cast<std::int64_t>(std::time(nullptr)); }

std::optional<std::vector<ProfileLayer>> layers_from_environment(std::string* problem) {
  const char* option = std::getenv("KVREMAP_PROFILE_DIR");
  const std::string value = option ? option : "";
  if (const auto bad = policy::path_problem(value)) {
    *problem = "KVREMAP_PROFILE_DIR='" + policy::printable(value) + "' " + *bad + ": expected " +
               std::string(policy::kPathRulesSummary);
    return std::nullopt;
  }
  std::vector<ProfileLayer> layers;
  const interpose::ProfileDirectory dir =
      interpose::profile_directory(value, std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
  if (!dir.path.empty())
    layers.push_back({dir.path, dir.is_default ? "XDG_CACHE_HOME or HOME" : "KVREMAP_PROFILE_DIR", true});
  const char* path = std::getenv(std::string(policy::kProfilePathVariable).c_str());
  if (path && value != "off") {
    if (const auto bad = policy::profile_path_problem(path)) {
      *problem = bad->substr(std::string_view("kvremap: ").size());
      return std::nullopt;
    }
    for (const std::string& entry : policy::profile_path_entries(path))
      layers.push_back({entry, std::string(policy::kProfilePathVariable), false});
  }
  if (layers.empty()) {
    *problem = value == "off" ? "profiles are off (KVREMAP_PROFILE_DIR=off): name a directory"
                              : "no profile directory: neither KVREMAP_PROFILE_DIR, XDG_CACHE_HOME nor HOME is set; "
                                "name a directory";
    return std::nullopt;
  }
  return layers;
}

std::optional<interpose::ProfileStore> open_layer(const ProfileLayer& layer, std::string* problem) {
  interpose::DirectoryProblem kind = interpose::DirectoryProblem::none;
  auto store = interpose::ProfileStore::open({layer.path, false, layer.origin, !layer.writable}, false, &kind, problem);
  if (!store && kind == interpose::DirectoryProblem::none)
    *problem = "the profile directory " + policy::printable(layer.path) + " does not exist (no profile yet)";
  return store;
}

ProfileEntry judge_profile_text(const std::string& name, const std::string& text, const std::string& shown) {
  ProfileEntry e;
  e.name = name;
  e.kind = EntryKind::profile;
  policy::ProfileRead read = policy::read_profile_of_any_key(text);
  if (!read.profile) {
    e.problem = shown + ": " + policy::printable(read.problem);
    return e;
  }
  std::string why;
  auto parts = policy::parse_key_text(read.profile->key, &why);
  if (!parts) {
    e.problem = shown + ": " + why;
    return e;
  }
  const std::string expected = policy::profile_file_name_for_key(*parts, read.profile->key);
  if (expected != name) {
    e.problem = shown + ": its key is that of " + policy::printable(expected) +
                ", so the library never reads it under this name";
    return e;
  }
  if (const auto out = policy::profile_out_of_bounds(*read.profile, parts->device_total_bytes)) {
    e.problem = shown + ": " + *out;
    return e;
  }
  e.profile = std::move(read.profile);
  e.parts = std::move(parts);
  return e;
}

std::vector<ProfileEntry> judge_entries(const interpose::ProfileStore& store, std::int64_t now) {
  std::vector<ProfileEntry> out;
  const std::vector<std::string> names = store.entries();
  const auto present = [&](const std::string& n) {
    for (const std::string& other : names)
      if (other == n) return true;
    return false;
  };
  const policy::StartIdentity here = interpose::this_start();
  for (const std::string& name : names) {
    std::string profile;
    const EntryKind kind = kind_of(name, &profile);
    const std::string shown = shown_path(store.path(), name);
    ProfileEntry e;
    e.name = name;
    e.kind = kind;
    if (kind == EntryKind::stray) {
      e.problem = shown + ": not a profile, marker or temporary file of kvremap's (stray file)";
    } else if (kind == EntryKind::temporary) {
      e.problem = shown + ": a temporary file of a write under way, or one a killed process left (remove it once "
                          "no kvremap process writes here)";
    } else if (kind == EntryKind::marker && !present(profile)) {
      e.problem = shown + ": a failed-start marker of no profile in this directory";
    } else if (kind == EntryKind::marker) {
      for (const interpose::ProfileStore::Marker& m : store.markers(profile, here, now)) {
        if (m.file != name) continue;
        if (!m.problem.empty())
          e.problem = m.problem;
        else if (m.failed)
          e.problem = shown + ": a start sized from " + policy::printable(profile) +
                      " never reached its commit, so the next start is sized by the engine (its commit removes "
                      "the marker)";
      }
    } else {
      std::string problem;
      const std::optional<std::string> text = store.read_trusted(name, &problem);
      if (!text)
        e.problem = problem.empty() ? shown + ": removed while being read" : problem;
      else
        e = judge_profile_text(name, *text, shown);
    }
    out.push_back(std::move(e));
  }
  return out;
}

ProfileEntry read_one_profile(const std::string& path, const std::vector<ProfileLayer>& layers, std::string* found_in) {
  std::vector<ProfileLayer> where;
  std::string name = path;
  if (path.find('/') != std::string::npos) {
    const std::size_t slash = path.rfind('/');
    name = path.substr(slash + 1);
    where.push_back({slash == 0 ? "/" : path.substr(0, slash), "FILE", false});
  } else {
    where = layers;
  }
  ProfileEntry missing;
  missing.name = name;
  missing.problem = "no profile " + policy::printable(name) + " in " +
                    (where.size() == 1 ? policy::printable(where[0].path) : std::to_string(where.size()) + " directories");
  for (const ProfileLayer& layer : where) {
    std::string problem;
    const auto store = open_layer(layer, &problem);
    if (!store) {
      if (where.size() == 1) missing.problem = problem;
      continue;
    }
    const std::optional<std::string> text = store->read_trusted(name, &problem);
    if (!text) {
      if (!problem.empty()) {
        missing.problem = problem;
        return missing;
      }
      continue;
    }
    *found_in = store->path();
    return judge_profile_text(name, *text, shown_path(store->path(), name));
  }
  return missing;
}

}  // namespace kvremap::cli
