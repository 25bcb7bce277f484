// The kvremap CLI entry point; later issues add run, plot and replay subcommands.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "interpose/version_number.h"
#include "policy/options.h"
#include "tools/report.h"
#include "tools/trace/trace_reader.h"

namespace {

// Exit codes shared by every subcommand, so scripts can tell a bad trace from a bad command line.
constexpr int kExitOk = 0;
constexpr int kExitTraceProblem = 1;
constexpr int kExitUsage = 2;

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
    std::fprintf(stderr, "kvremap: %s (see kvremap --help)\n", message.c_str());
    return kExitUsage;
  }

  if (help_env->parsed()) {
    std::printf("%s", kvremap::policy::options_markdown_table().c_str());
    return kExitOk;
  }
  if (libpath->parsed()) {
    std::printf("%s/libkvremap.so\n", KVREMAP_BUILD_LIBDIR);
    return kExitOk;
  }
  if (report->parsed()) return run_report(report_paths);
  if (validate->parsed()) return run_validate(validate_paths);
  std::printf("%s", app.help().c_str());
  return kExitOk;
}
