// `kvremap profile`: its subcommands' command lines and which directories each one reads.
#include "tools/profile_cmd.h"

#include <CLI/CLI.hpp>

#include "policy/path_rules.h"
#include "policy/printable.h"
#include "policy/profile_key_parts.h"
#include "tools/exit_status.h"
#include "tools/profile_actions.h"
#include "tools/text.h"

namespace kvremap::cli {

struct ProfileCommands::State {
  CLI::App* profile = nullptr;
  CLI::App *list = nullptr, *show = nullptr, *export_ = nullptr, *import = nullptr, *verify = nullptr,
           *prune = nullptr;
  std::string dir, file, output, bundle, older_than, key_contains;
  bool dry_run = false;
};

ProfileCommands::ProfileCommands(CLI::App& app) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.profile = app.add_subcommand("profile", "List, show, export, import, verify and prune the learned-sizing profiles");
  s.profile->require_subcommand(1);
  s.profile->footer(
      "DIR defaults to the directory the library writes (KVREMAP_PROFILE_DIR, else $XDG_CACHE_HOME/kvremap,\n"
      "else ~/.cache/kvremap); list, show and verify also read the read-only layers of KVREMAP_PROFILE_PATH.\n"
      "Exit status: 0, 1 when a file or directory has a problem (each one line on stderr), 2 for a bad command line.");
  const char* dir_help = "The profile directory (default: the library's)";
  s.list = s.profile->add_subcommand("list", "One row per profile: engine, model, device, rank, KV size, age");
  s.list->add_option("DIR", s.dir, dir_help);
  s.show = s.profile->add_subcommand("show", "A profile's figures in human units");
  s.show->add_option("PROFILE", s.file, "A profile file, or a profile's name looked up in the directories")->required();
  s.export_ = s.profile->add_subcommand("export", "Every valid profile of a directory into one JSON bundle");
  s.export_->add_option("DIR", s.dir, dir_help);
  s.export_->add_option("-o,--output", s.output, "The bundle to write (default: stdout)");
  s.import = s.profile->add_subcommand("import", "Check a bundle's profiles and write each valid one, atomically");
  s.import->add_option("BUNDLE", s.bundle, "A bundle kvremap profile export wrote; - for stdin")->required();
  s.import->add_option("DIR", s.dir, "The profile directory to write (default: the library's; created 0700)");
  s.verify = s.profile->add_subcommand("verify", "Check every file of the directories as the library would");
  s.verify->add_option("DIR", s.dir, "The profile directory (default: the library's and its read-only layers)");
  s.prune = s.profile->add_subcommand("prune", "Remove profiles older than a duration or whose key holds a text");
  s.prune->add_option("DIR", s.dir, dir_help);
  s.prune->add_option("--older-than", s.older_than, "Written longer ago than this: 30d, 12h, 90m, 2w");
  s.prune->add_option("--key-contains", s.key_contains, "Whose key text holds this text (a model, a flag)");
  s.prune->add_flag("--dry-run", s.dry_run, "Say what would be removed, remove nothing");
}

ProfileCommands::~ProfileCommands() = default;

std::optional<int> ProfileCommands::run() const {
  const State& s = *state_;
  if (!s.profile->parsed()) return std::nullopt;
  const std::string command = "profile " + s.profile->get_subcommands().front()->get_name();
  for (const std::string* path : {&s.dir, &s.file, &s.output, &s.bundle})
    if (const auto bad = policy::path_problem(*path)) {
      say(command, "'" + policy::printable(*path) + "' " + *bad + ": expected " + std::string(policy::kPathRulesSummary));
      return kExitUsage;
    }
  std::vector<ProfileLayer> layers;
  if (!s.dir.empty()) {
    layers.push_back({s.dir, "DIR", true});
  } else {
    std::string problem;
    auto from_environment = layers_from_environment(&problem);
    if (!from_environment) {
      say(command, problem + " (or give DIR)");
      return kExitUsage;
    }
    layers = std::move(*from_environment);
  }
  // Written to, exported from and pruned: the writable directory only, never a read-only layer.
  const ProfileLayer& writable = layers.front();
  if (s.list->parsed()) return profile_list(layers, !s.dir.empty());
  if (s.show->parsed()) return profile_show(s.file, layers);
  if (s.verify->parsed()) return profile_verify(layers, !s.dir.empty());
  if (!writable.writable) {
    say(command, "no writable profile directory (KVREMAP_PROFILE_DIR, XDG_CACHE_HOME and HOME are unset) and " +
                     policy::printable(writable.path) + " is a read-only layer: give DIR");
    return kExitUsage;
  }
  if (s.export_->parsed()) return profile_export(writable, s.output);
  if (s.import->parsed()) return profile_import(s.bundle, writable);
  PruneRule rule;
  rule.dry_run = s.dry_run;
  if (!s.key_contains.empty()) rule.key_contains = s.key_contains;
  if (!s.older_than.empty()) {
    rule.older_than_seconds = policy::parse_duration_seconds(s.older_than);
    if (!rule.older_than_seconds) {
      say(command, "--older-than '" + policy::printable(s.older_than) +
                       "' is not a duration: expected a whole number and s, m, h, d or w, such as 30d or 12h");
      return kExitUsage;
    }
  }
  if (!rule.older_than_seconds && !rule.key_contains) {
    say(command, "say which profiles to remove: --older-than DURATION, --key-contains TEXT, or both");
    return kExitUsage;
  }
  return profile_prune(writable, rule);
}

}  // namespace kvremap::cli
