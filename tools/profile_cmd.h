// `kvremap profile list|show|export|import|verify|prune`: the profile directories, read, carried and kept.
#pragma once

#include <memory>
#include <optional>

namespace CLI {
class App;
}

namespace kvremap::cli {

// Registers `profile` and its subcommands on `app`; the options it binds live as long as this object.
class ProfileCommands {
 public:
  explicit ProfileCommands(CLI::App& app);
  ~ProfileCommands();
  ProfileCommands(const ProfileCommands&) = delete;
  ProfileCommands& operator=(const ProfileCommands&) = delete;

  // After parsing: the exit status of the subcommand given (0, 1 for problems found, 2 for a bad command
  // line), or nothing when the command line was not `kvremap profile ...`.
  std::optional<int> run() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvremap::cli
