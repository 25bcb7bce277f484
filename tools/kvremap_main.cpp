// The kvremap CLI entry point; later issues add plot and replay subcommands.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "interpose/version_number.h"
#include "policy/options.h"
#include "tools/exit_status.h"
#include "tools/report.h"
#include "tools/run_command.h"
#include "tools/trace/trace_reader.h"

namespace {

using kvremap::cli::kExitOk;
using kvremap::cli::kExitTraceProblem;
using kvremap::cli::kExitUsage;

// The libkvremap.so this tool was built with: what `libpath` prints and `run` preloads by default.
const std::string kBuiltLibrary = std::string(KVREMAP_BUILD_LIBDIR) + "/libkvremap.so";

constexpr const char* kRunDescription = R"(kvremap run [OPTIONS] -- COMMAND [ARGS...]

The command runs with LD_PRELOAD set to the entries it already has (kept first: a sanitizer runtime
must stay ahead) followed by the library, unless one of them already is that file; KVREMAP_TRACE_DIR
set to --trace-dir, else to the environment's KVREMAP_TRACE_DIR, else to a private directory removed
at the end; KVREMAP_PROFILE_DIR set to --profile-dir when given. The rest of the environment is
passed unchanged. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to kvremap are passed
on to the command; those the terminal sends (Ctrl-C) reach it directly and are not sent twice.

Restart: when the first start exits with status 75 (KVREMAP_DEFICIT=restart: a KV deficit, its
profile written), the command is started once more with the same environment, sized from that
profile. Never more than once, and not after SIGINT, SIGTERM, SIGHUP or SIGQUIT.

At the end, one line per process and device whose trace appeared in the trace directory: the KV
cache requested, committed on the device and on the host, the margin, the largest post-KV peaks, the
profile used or written and the flags for the same start without kvremap.

Exit status: the command's (of its last start), or 128+N when signal N killed it; 2 for a bad command
line, a missing library or an unusable trace directory; 126 when the command cannot be executed,
127 when it is not found.)";

// Any failure to read one trace is one line on stderr naming the file, and exit status 1; the
// reader reports its problems as TraceError, anything else (out of memory) is caught here too.
void print_read_failure(const char* command, const std::string& path, const std::exception& error) {
  if (dynamic_cast<const kvremap::trace::TraceError*>(&error) != nullptr) {
    std::fprintf(stderr, "kvremap %s: %s\n", command, error.what());
  } else {
    std::fprintf(stderr, "kvremap %s: %s: cannot read: %s\n", command, path.c_str(), error.what());
  }
}

int run_report(const std::vector<std::string>& paths) {
  int status = kExitOk;
  bool first = true;
  for (const std::string& path : paths) {
    try {
      // The report only needs typed records; the raw JSON would multiply memory use on large traces.
      const kvremap::trace::Trace trace = kvremap::trace::read_trace(path, {.keep_raw_events = false});
      std::printf("%s%s", first ? "" : "\n", kvremap::report::render_report(trace).c_str());
      first = false;
    } catch (const std::exception& error) {
      print_read_failure("report", path, error);
      status = kExitTraceProblem;
    }
  }
  return status;
}

int run_validate(const std::vector<std::string>& paths) {
  int status = kExitOk;
  for (const std::string& path : paths) {
    try {
      // One streaming pass: memory stays small whatever the trace's size.
      const kvremap::trace::FileValidation result = kvremap::trace::validate_file(path);
      for (const std::string& problem : result.problems) std::printf("%s\n", problem.c_str());
      if (!result.problems.empty()) {
        status = kExitTraceProblem;
        continue;
      }
      const std::string ending = result.trace.complete            ? ""
                                 : !result.trace.stopped.empty() ? ", stopped early: the trace file could not grow (" +
                                                                       result.trace.stopped + ")"
                                                                 : ", no closing ']' (process did not exit cleanly)";
      std::printf("%s: ok, %zu events%s%s\n", path.c_str(), result.trace.event_count, ending.c_str(),
                  result.trace.truncated ? ", incomplete last line ignored" : "");
    } catch (const std::exception& error) {
      std::fflush(stdout);  // problems already printed for earlier files come first
      print_read_failure("validate", path, error);
      status = kExitTraceProblem;
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvremap: defer LLM KV-cache backing until start-up memory is measured"};
  app.set_version_flag("--version", std::string("kvremap ") + KVREMAP_VERSION_STRING);
  app.require_subcommand(0, 1);
  auto* libpath = app.add_subcommand("libpath", "Print the path of the libkvremap.so this tool was built with");

  kvremap::run::RunOptions run_options;
  run_options.library = kBuiltLibrary;
  auto* run = app.add_subcommand("run",
                                 "Run a command under libkvremap.so, restart it once after a KV deficit, "
                                 "summarise its KV cache per process");
  run->add_option("--trace-dir", run_options.trace_dir, "Directory for the traces (created if missing)");
  run->add_option("--profile-dir", run_options.profile_dir, "Directory for the profiles (KVREMAP_PROFILE_DIR)");
  run->add_option("--library", run_options.library, "The libkvremap.so to preload")->capture_default_str();
  // After "--" every word is the command's, options included.
  run->add_option("COMMAND", run_options.command, "The command and its arguments")->allow_extra_args();
  run->footer(kRunDescription);

  auto* help_env = app.add_subcommand("help-env", "Print the KVREMAP_* environment variables the library reads");

  std::vector<std::string> report_paths;
  auto* report = app.add_subcommand("report", "Summarise memory per category, checkpoints and captures of traces");
  report->add_option("TRACE", report_paths, "kvremap-<host>-<pid>.json trace files")->required();

  std::vector<std::string> validate_paths;
  auto* validate = app.add_subcommand("validate", "Check traces against the trace schema (exit 1 on any problem)");
  validate->add_option("TRACE", validate_paths, "kvremap-<host>-<pid>.json trace files")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version arrive as "errors" with exit code 0; CLI11 prints those itself.
    if (error.get_exit_code() == 0) return app.exit(error);
    std::string message = error.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    // Without "--", the command's own options look like run's.
    if (run->parsed() && dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr)
      message += "; the command goes after '--'";
    std::fprintf(stderr, "kvremap: %s (see kvremap --help)\n", message.c_str());
    return kExitUsage;
  }

  if (help_env->parsed()) {
    std::printf("%s", kvremap::policy::options_markdown_table().c_str());
    return kExitOk;
  }
  if (libpath->parsed()) {
    std::printf("%s\n", kBuiltLibrary.c_str());
    return kExitOk;
  }
  if (run->parsed()) return kvremap::run::run_command(run_options);
  if (report->parsed()) return run_report(report_paths);
  if (validate->parsed()) return run_validate(validate_paths);
  std::printf("%s", app.help().c_str());
  return kExitOk;
}
