// The kvremap CLI entry point: run, size, status, report, validate, plot, diff, merge, what-if, help-env, libpath.
#include <CLI/CLI.hpp>
#include <sys/ioctl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "interpose/version_number.h"
#include "policy/options.h"
#include "policy/path_rules.h"
#include "policy/printable.h"
#include "policy/units.h"
#include "tools/analysis.h"
#include "tools/diff.h"
#include "tools/exit_status.h"
#include "tools/library_location.h"
#include "tools/merge.h"
#include "tools/output_file.h"
#include "tools/plot.h"
#include "tools/profile_cmd.h"
#include "tools/progress.h"
#include "tools/report.h"
#include "tools/report_json.h"
#include "tools/what_if.h"
#include "tools/run_command.h"
#include "tools/status.h"
#include "tools/text.h"
#include "tools/trace_paths.h"
#include "tools/trace/trace_reader.h"

namespace {

using kvremap::cli::kExitOk;
using kvremap::cli::kExitTraceProblem;
using kvremap::cli::kExitUsage;

constexpr const char* kRunDescription = R"(kvremap run [OPTIONS] -- COMMAND [ARGS...]

The command runs with LD_PRELOAD set to the entries it already has (kept first: a sanitizer runtime
must stay ahead) followed by the library, unless one of them already is that file; KVREMAP_TRACE_DIR
set to --trace-dir, else to the environment's KVREMAP_TRACE_DIR, else to a new run directory
$XDG_STATE_HOME/kvremap/runs/DATE-PID (~/.local/state/... without XDG_STATE_HOME), which is kept and
named with the commands that read it (--discard-traces: a temporary directory removed at the end,
kept while a process the command started still runs); KVREMAP_PROFILE_DIR set to --profile-dir when given.
Every KVREMAP_* variable is checked first: with any bad name or value the command is not started. The rest of the environment is
passed unchanged. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to kvremap are passed
on to the command; those the terminal sends (Ctrl-C) reach it directly and are not sent twice.

Restart: when the first start fails and a trace it wrote holds the library's `kv restart` event
(KVREMAP_DEFICIT=restart: a KV deficit, its profile written, status 75), the command is started
once more with the same environment, sized from that profile. A status 75 alone restarts nothing.
Never more than once, and not after SIGINT, SIGTERM, SIGHUP or SIGQUIT.

At the end, one line per process and device whose trace appeared in the trace directory: the KV
cache requested, committed on the device and on the host, the margin, the largest post-KV peaks, the
profile used or written and the flags for the same start without kvremap.

Exit status: the command's (of its last start), or 128+N when signal N killed it; 2 for a bad command
line, a bad KVREMAP_* variable, a missing library or an unusable trace directory; 126 when the command cannot be executed,
127 when it is not found.)";

constexpr const char* kSizeDescription = R"(kvremap size [OPTIONS] -- COMMAND [ARGS...]

A sizing run: the command starts as under kvremap run (the same environment, traces and profiles), and
kvremap follows its traces. Once every process that deferred its KV cache has committed it and written its
profile, and nothing new happened for --settle seconds, the command is sent SIGTERM, as a supervisor stops
a server, and SIGKILL after --grace seconds more. What an init container or a deployment pipeline runs once
per configuration and GPU type: later starts of the same configuration, with the same profile directory, are
sized from what it measured. Ends with one line: the KV each process holds on the device and on host
memory, and the profiles written. Needs KVREMAP_MODE=defer (the default) and a profile directory.

Exit status: 0 when every process that deferred its KV cache wrote its profile; otherwise the command's
status (1 when it exited 0) with a line saying what was missing; 2 for a bad command line, a bad
KVREMAP_* variable, a missing
library, an unusable trace directory, KVREMAP_MODE=observe or profiles off; 126 or 127 when the command
cannot be executed or is not found.)";

constexpr const char* kExitCodes =
    "Exit status: 0 success; 1 a trace could not be read (missing, truncated before its header, not a\n"
    "kvremap trace, another schema version, an event that breaks the schema: the line `kvremap validate`\n"
    "prints for it) or cannot answer the question; 2 a bad command line or an output file that cannot be\n"
    "written. Progress goes to stderr when reading takes more than a second.";

// Any failure to read one trace is one line on stderr naming the file, and exit status 1; the
// reader reports its problems as TraceError, anything else (out of memory) is caught here too.
void print_read_failure(const char* command, const std::string& path, const std::exception& error) {
  if (dynamic_cast<const kvremap::trace::TraceError*>(&error) != nullptr) {
    kvremap::cli::say(command, error.what());
  } else {
    kvremap::cli::say(command, path + ": cannot read: " + error.what());
  }
}

// Reads one trace for an analysing command with progress on stderr; typed records only, allocations
// and frees as compact steps (the raw JSON, or a record per event, would multiply memory use on large traces).
kvremap::trace::Trace read_for(const char* command, const std::string& path) {
  kvremap::cli::ReadProgress progress(command, path);
  kvremap::trace::ReadOptions options{
      .keep_raw_events = false, .keep_every_counter_sample = false, .memory_timeline_only = true};
  options.on_progress = [&progress](std::uint64_t done, std::uint64_t size) { progress(done, size); };
  return kvremap::trace::read_trace(path, options);
}

// The figures of one trace, or nothing after the one-line failure on stderr.
std::optional<kvremap::analysis::ProcessFigures> figures_for(const char* command, const std::string& path) {
  try {
    return kvremap::analysis::analyse(read_for(command, path));
  } catch (const std::exception& error) {
    print_read_failure(command, path, error);
    return std::nullopt;
  }
}

int run_report(const std::vector<std::string>& paths, bool json) {
  int status = kExitOk;
  bool first = true;
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& path : paths) {
    try {
      const kvremap::trace::Trace trace = read_for("report", path);
      const kvremap::analysis::ProcessFigures figures = kvremap::analysis::analyse(trace);
      if (json) {
        all.push_back(kvremap::report::report_json(figures));
        continue;
      }
      // The renderers show every string of the trace through kvremap::cli::shown (tools/text.h).
      std::printf("%s%s%s%s", first ? "" : "\n", kvremap::report::render_report(trace).c_str(),
                  kvremap::report::render_phase_attribution(figures).c_str(),
                  kvremap::report::render_oom_snapshots(figures).c_str());
      first = false;
    } catch (const std::exception& error) {
      print_read_failure("report", path, error);
      status = kExitTraceProblem;
    }
  }
  if (json) std::printf("%s\n", all.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return status;
}

// Writes `text` to `path` whole (tools/output_file.h), or says why not in one line.
bool write_file(const char* command, const std::string& path, const std::string& text) {
  kvremap::cli::OutputFile out(path);
  if (out.is_open()) out.stream() << text;
  if (!out.is_open() || !out.commit()) {
    kvremap::cli::say(command, path + ": cannot write: " + out.error());
    return false;
  }
  return true;
}

int run_plot(const std::vector<std::string>& paths, const std::string& output, const std::string& align_name) {
  // The format from the output's extension; a name without one (/dev/stdout, a FIFO) gets the HTML page.
  const auto format = kvremap::plot::format_for_path(output);
  if (!format) {
    kvremap::cli::say("plot", output + ": unknown extension " + output.substr(output.rfind('.')) +
                                  ": name the file .html (or .htm), .svg or .png");
    return kExitUsage;
  }
  if (align_name != "wall" && align_name != "start") {
    kvremap::cli::say("plot", "--align " + align_name + ": unknown; use wall (one wall-clock axis) or start (each "
                              "process from its own first event)");
    return kExitUsage;
  }
  const auto align = align_name == "start" ? kvremap::plot::Align::start : kvremap::plot::Align::wall;
  std::vector<kvremap::analysis::ProcessFigures> processes;
  int status = kExitOk;
  for (const std::string& path : paths) {
    auto figures = figures_for("plot", path);
    if (figures) {
      processes.push_back(std::move(*figures));
    } else {
      status = kExitTraceProblem;
    }
  }
  if (processes.empty()) return status;
  std::string error;
  const std::string drawn = kvremap::plot::render(processes, *format, align, error);
  if (drawn.empty()) {
    kvremap::cli::say("plot", output + ": cannot draw: " + error);
    return kExitTraceProblem;
  }
  if (!write_file("plot", output, drawn)) return kExitUsage;
  std::printf("%s", kvremap::cli::text("{}: {} processes\n", output, processes.size()).c_str());
  return status;
}

int run_diff(const std::string& a_path, const std::string& b_path) {
  const auto a = figures_for("diff", a_path);
  const auto b = figures_for("diff", b_path);
  if (!a || !b) return kExitTraceProblem;
  std::printf("%s", kvremap::diff::render_diff(*a, *b).c_str());
  return kExitOk;
}

int run_merge(const std::vector<std::string>& paths, const std::string& output) {
  // The merged file appears whole at the end, or not at all (tools/output_file.h).
  kvremap::cli::OutputFile out(output);
  if (!out.is_open()) {
    kvremap::cli::say("merge", output + ": cannot write: " + out.error());
    return kExitUsage;
  }
  std::vector<std::unique_ptr<kvremap::cli::ReadProgress>> progress;
  const kvremap::merge::ProgressFactory factory = [&progress](const std::string& path) {
    progress.push_back(std::make_unique<kvremap::cli::ReadProgress>("merge", path));
    kvremap::cli::ReadProgress* p = progress.back().get();
    return std::function<void(std::uint64_t, std::uint64_t)>(
        [p](std::uint64_t done, std::uint64_t size) { (*p)(done, size); });
  };
  std::string current;
  try {
    // Every header first: a file that is not a trace stops the merge before anything is written.
    for (const std::string& path : paths) {
      current = path;
      kvremap::merge::read_header(path);
    }
    current.clear();
    // merge_traces names the input in what it throws (a TraceError: file, line, event, field).
    const kvremap::merge::MergeResult result = kvremap::merge::merge_traces(paths, out.stream(), factory);
    for (auto& p : progress) p->finish();
    if (!out.commit()) {
      kvremap::cli::say("merge", output + ": cannot write: " + out.error());
      return kExitUsage;
    }
    std::printf("%s", kvremap::cli::text(
                          "{}: {} traces, {} events, aligned on {}\n", output, result.inputs.size(), result.events,
                          result.aligned_on_wall_clock ? "their wall-clock starts"
                                                       : "their first events (a header lacks start_unix_ns)")
                          .c_str());
    for (const auto& input : result.inputs)
      std::printf("%s", kvremap::cli::text("  {}: pid {}, starts at +{:.3f} ms\n", input.path, input.pid,
                                           static_cast<double>(input.offset_us) / 1e3)
                            .c_str());
  } catch (const std::exception& error) {
    for (auto& p : progress) p->finish();
    print_read_failure("merge", current.empty() ? output : current, error);
    // A merge cut short is no trace of the job: the temporary file goes, the target stays as it was.
    out.discard();
    return kExitTraceProblem;
  }
  return kExitOk;
}

int run_what_if(const std::string& path, const kvremap::what_if::Settings& settings, bool json) {
  const auto figures = figures_for("what-if", path);
  if (!figures) return kExitTraceProblem;
  try {
    const auto outcomes = kvremap::what_if::replay(*figures, settings);
    if (json) {
      std::printf("%s\n", kvremap::what_if::render_json(*figures, settings, outcomes).dump(2).c_str());
    } else {
      std::printf("%s", kvremap::what_if::render(*figures, settings, outcomes).c_str());
    }
  } catch (const std::invalid_argument& error) {
    kvremap::cli::say("what-if", path + ": " + error.what());
    return kExitTraceProblem;
  }
  return kExitOk;
}

int run_validate(const std::vector<std::string>& paths) {
  int status = kExitOk;
  for (const std::string& path : paths) {
    try {
      // One streaming pass: memory stays small whatever the trace's size.
      const kvremap::trace::FileValidation result = kvremap::trace::validate_file(path);
      for (const std::string& problem : result.problems)
        std::printf("%s\n", kvremap::policy::printable(problem).c_str());
      if (!result.problems.empty()) {
        status = kExitTraceProblem;
        continue;
      }
      // Valid as far as it goes: a trace that stopped early or never got past its header is no problem.
      const kvremap::trace::Trace& trace = result.trace;
      const std::string ending =
          trace.complete ? ""
          : !trace.stopped.empty()
              ? kvremap::cli::text(", stopped early at {:.3f} s: {} (the trace file could not grow)",
                                   trace.stopped_at_us / 1e6, trace.stopped)
              : ", no closing ']' (process did not exit cleanly)";
      std::printf("%s", kvremap::cli::text("{}: ok, {} events{}{}{}\n", path, trace.event_count,
                                           trace.event_count == trace.metadata_events ? " (the header only)" : "",
                                           ending, trace.truncated ? ", incomplete last line ignored" : "")
                            .c_str());
    } catch (const std::exception& error) {
      std::fflush(stdout);  // problems already printed for earlier files come first
      print_read_failure("validate", path, error);
      status = kExitTraceProblem;
    }
  }
  return status;
}

// The width of the terminal standard output is, else $COLUMNS, else 80; within 40 to 120, where prose reads.
std::size_t terminal_columns() {
  std::size_t columns = 80;
  winsize size{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    columns = size.ws_col;
  } else if (const char* from_environment = std::getenv("COLUMNS")) {
    if (const auto n = std::strtoul(from_environment, nullptr, 10); n > 0) columns = n;
  }
  return std::clamp<std::size_t>(columns, 40, 120);
}

}  // namespace

int main(int argc, char** argv) {
  // Named, not taken from argv[0]: the help reads the same from any path (the man page is made of it).
  CLI::App app{"kvremap: defer LLM KV-cache backing until start-up memory is measured", "kvremap"};
  app.set_version_flag("--version", std::string("kvremap ") + KVREMAP_VERSION_STRING);
  app.require_subcommand(0, 1);
  auto* libpath = app.add_subcommand(
      "libpath", "Print the path of the libkvremap.so run preloads: KVREMAP_LIBRARY, else the one beside this kvremap");
  libpath->footer(
      "Beside this kvremap: in an installed tree, PREFIX/bin/kvremap preloads\n"
      "PREFIX/lib/.../kvremap/libkvremap.so.N; in a build tree, bin/kvremap preloads lib/libkvremap.so.N.\n"
      "Exit status 2 when there is none, or when KVREMAP_LIBRARY names no libkvremap.so (a 64-bit ELF shared\n"
      "object that defines kvremap_version), read from its ELF headers without loading it.");

  kvremap::run::RunOptions run_options;
  auto* run = app.add_subcommand("run",
                                 "Run a command under libkvremap.so, restart it once after a KV deficit, "
                                 "summarise its KV cache per process");
  run->add_option("--trace-dir", run_options.trace_dir, "Directory for the traces (created if missing)");
  run->add_option("--profile-dir", run_options.profile_dir, "Directory for the profiles (KVREMAP_PROFILE_DIR)");
  run->add_option("--library", run_options.library, "The libkvremap.so to preload (default: kvremap libpath)");
  run->add_flag("--discard-traces", run_options.discard_traces,
                 "Without --trace-dir: a temporary trace directory, removed at the end");
  // After "--" every word is the command's, options included.
  run->add_option("COMMAND", run_options.command, "The command and its arguments")->allow_extra_args();
  run->footer(kRunDescription);

  // `size` shares run's options: it is a run that ends once the start-up is measured.
  double size_settle_s = 2, size_grace_s = 30;
  auto* size = app.add_subcommand("size",
                                  "Run a command's start-up until kvremap has measured it, write its profile, end it");
  size->add_option("--trace-dir", run_options.trace_dir, "Directory for the traces (created if missing)");
  size->add_option("--profile-dir", run_options.profile_dir, "Directory for the profiles (KVREMAP_PROFILE_DIR)");
  size->add_option("--library", run_options.library, "The libkvremap.so to preload (default: kvremap libpath)");
  size->add_flag("--discard-traces", run_options.discard_traces,
                 "Without --trace-dir: a temporary trace directory, removed at the end");
  size->add_option("--settle", size_settle_s, "Seconds with nothing new after the last profile before ending (default 2)")
      ->check(CLI::Range(0.0, 3600.0));
  size->add_option("--grace", size_grace_s, "Seconds between SIGTERM and SIGKILL (default 30)")
      ->check(CLI::Range(0.0, 3600.0));
  size->add_option("COMMAND", run_options.command, "The command and its arguments")->allow_extra_args();
  size->footer(kSizeDescription);

  std::string status_file;
  double status_watch = 0;
  auto* status = app.add_subcommand("status", "List the engines running under kvremap here: phase, KV on device, host");
  status->add_option("--metrics-file", status_file, "The engines' KVREMAP_METRICS_FILE (default: the environment's)");
  status->add_option("--watch", status_watch, "Refresh every this many seconds until interrupted")
      ->check(CLI::Range(0.1, 3600.0));
  status->footer("Reads the Prometheus text file the library writes under KVREMAP_METRICS_FILE and shows one row per\n"
                 "running process and device. Exit status 2 when no file is named or it cannot be read.");

  auto* help_env = app.add_subcommand("help-env", "Print the KVREMAP_* environment variables the library reads");
  bool help_env_markdown = false;
  help_env->add_flag("--markdown", help_env_markdown, "The Markdown table of docs/configuration.md instead");

  std::vector<std::string> report_paths;
  bool report_as_json = false;
  auto* report =
      app.add_subcommand("report", "Summarise memory per category, checkpoints, captures and phases of traces");
  report->add_option("TRACE", report_paths, "kvremap-<host>-<pid>.json trace files, or directories of them")->required();
  report->add_flag("--json", report_as_json, "One JSON array on stdout, one object per trace (docs/tools.md)");
  report->footer(kExitCodes);

  std::vector<std::string> plot_paths;
  std::string plot_output;
  std::string plot_align = "wall";
  auto* plot = app.add_subcommand(
      "plot", "Draw device memory over time: a self-contained HTML page, an SVG or a PNG (by the output's extension)");
  plot->add_option("TRACE", plot_paths, "Trace files or directories of them; one panel per process and device, on one time axis")->required();
  plot->add_option("-o,--output", plot_output,
                   "The file to write: .html or .htm (the page), .svg or .png (the chart); a name without an "
                   "extension (/dev/stdout) gets the page")
      ->required();
  plot->add_option("--align", plot_align,
                   "wall: processes on one wall-clock axis from the earliest start; start: each from its own first "
                   "event, drawn over each other")
      ->default_str("wall");
  plot->footer(kExitCodes);

  std::string diff_a, diff_b;
  auto* diff = app.add_subcommand("diff", "Compare two traces per phase and category, largest differences first");
  diff->add_option("A", diff_a, "The first trace (or a directory holding only it)")->required();
  diff->add_option("B", diff_b, "The second trace (or a directory holding only it)")->required();
  diff->footer(kExitCodes);

  std::vector<std::string> merge_paths;
  std::string merge_output;
  auto* merge = app.add_subcommand("merge", "Merge traces into one Perfetto timeline aligned on wall-clock start");
  merge->add_option("TRACE", merge_paths, "Trace files or directories of them, one process track each")->required();
  merge->add_option("-o,--output", merge_output, "The merged trace to write")->required();
  merge->footer(kExitCodes);

  std::string what_if_path;
  kvremap::what_if::Settings what_if_settings;
  std::string what_if_headroom, what_if_chunk;
  auto* what_if =
      app.add_subcommand("what-if", "Replay a traced vLLM or SGLang start at another memory share: stock and kvremap");
  what_if->add_option("TRACE", what_if_path, "A trace of a start under KVREMAP_MODE=defer")->required();
  std::optional<double> what_if_utilization, what_if_fraction;
  auto* utilization_option =
      what_if->add_option("--gpu-memory-utilization", what_if_utilization, "vLLM: the share to replay at")
          ->check(CLI::Range(0.0, 1.0));
  auto* fraction_option =
      what_if->add_option("--mem-fraction-static", what_if_fraction, "SGLang: the share to replay at")
          ->check(CLI::Range(0.0, 1.0));
  utilization_option->excludes(fraction_option);
  what_if->add_option("--headroom", what_if_headroom, "KVREMAP_HEADROOM for the replay (a size: 256MiB, 1GiB)");
  what_if->add_option("--chunk", what_if_chunk, "KVREMAP_CHUNK_BYTES for the replay (a size)");
  bool what_if_json = false;
  what_if->add_flag("--json", what_if_json, "The figures as one JSON object");
  what_if->footer(kExitCodes);

  std::vector<std::string> validate_paths;
  auto* validate = app.add_subcommand("validate", "Check traces against the trace schema (exit 1 on any problem)");
  validate->add_option("TRACE", validate_paths, "kvremap-<host>-<pid>.json trace files, or directories of them")->required();

  // `kvremap profile ...` (tools/profile_cmd.cpp).
  const kvremap::cli::ProfileCommands profile_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version arrive as "errors" with exit code 0; CLI11 prints those itself.
    if (error.get_exit_code() == 0) return app.exit(error);
    std::string message = error.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    // Without "--", the command's own options look like run's.
    if ((run->parsed() || size->parsed()) && dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr)
      message += "; the command goes after '--'";
    // The help of the subcommand the mistake was made in says what it takes.
    std::string help = "kvremap --help";
    for (const CLI::App* sub : app.get_subcommands()) help = "kvremap " + sub->get_name() + " --help";
    std::fprintf(stderr, "kvremap: %s (see %s)\n", kvremap::policy::printable(message).c_str(), help.c_str());
    return kExitUsage;
  }

  if (const std::optional<int> status = profile_commands.run()) return *status;
  if (help_env->parsed()) {
    std::printf("%s", help_env_markdown ? kvremap::policy::options_markdown_table().c_str()
                                        : kvremap::policy::options_terminal_text(terminal_columns()).c_str());
    return kExitOk;
  }
  if (size->parsed()) {
    run_options.sizing_run = true;
    run_options.settle_ms = static_cast<int>(size_settle_s * 1000);
    run_options.grace_ms = static_cast<int>(size_grace_s * 1000);
  }
  if (libpath->parsed() || ((run->parsed() || size->parsed()) && run_options.library.empty())) {
    const kvremap::cli::LibraryLocation library = kvremap::cli::locate_own_library();
    if (!library.problem.empty()) {
      kvremap::cli::say(libpath->parsed() ? "libpath" : size->parsed() ? "size" : "run", library.problem);
      return kExitUsage;
    }
    if (libpath->parsed()) {
      std::printf("%s\n", library.path.c_str());
      return kExitOk;
    }
    run_options.library = library.path;
  }
  if (run->parsed() || size->parsed()) return kvremap::run::run_command(run_options);
  if (status->parsed()) {
    const char* origin = status_file.empty() ? "KVREMAP_METRICS_FILE" : "--metrics-file";
    if (status_file.empty())
      if (const char* from_environment = std::getenv("KVREMAP_METRICS_FILE")) status_file = from_environment;
    if (const auto bad = kvremap::policy::path_problem(status_file)) {
      kvremap::cli::say("status", std::string(origin) + "='" + kvremap::policy::printable(status_file) + "' " + *bad +
                                      ": expected " + std::string(kvremap::policy::kPathRulesSummary));
      return kExitUsage;
    }
    return kvremap::cli::run_status(status_file, status_watch);
  }
  // A directory among the trace arguments stands for the traces in it (tools/trace_paths.h), for every reader.
  for (auto* paths : {&report_paths, &plot_paths, &merge_paths, &validate_paths}) {
    if (paths->empty()) continue;
    const char* command = paths == &report_paths ? "report"
                          : paths == &plot_paths ? "plot"
                          : paths == &merge_paths ? "merge"
                                                  : "validate";
    auto expanded = kvremap::cli::expand_trace_paths(command, *paths);
    if (!expanded) return kExitUsage;
    *paths = std::move(*expanded);
  }
  for (auto [command, path] : {std::pair{"diff", &diff_a}, std::pair{"diff", &diff_b}, std::pair{"what-if", &what_if_path}}) {
    if (path->empty()) continue;
    auto expanded = kvremap::cli::expand_one_trace_path(command, *path);
    if (!expanded) return kExitUsage;
    *path = std::move(*expanded);
  }
  if (report->parsed()) return run_report(report_paths, report_as_json);
  if (plot->parsed()) return run_plot(plot_paths, plot_output, plot_align);
  if (diff->parsed()) return run_diff(diff_a, diff_b);
  if (merge->parsed()) return run_merge(merge_paths, merge_output);
  if (what_if->parsed()) {
    for (const auto& [text, target] : {std::pair{&what_if_headroom, &what_if_settings.headroom_bytes},
                                       std::pair{&what_if_chunk, &what_if_settings.chunk_bytes}}) {
      if (text->empty()) continue;
      *target = kvremap::policy::parse_size(*text);
      if (!*target) {
        std::fprintf(stderr, "kvremap: what-if: not a size: '%s' (see kvremap what-if --help)\n",
                     kvremap::policy::printable(*text).c_str());
        return kExitUsage;
      }
    }
    if (!what_if_utilization && !what_if_fraction) {
      std::fprintf(stderr,
                   "kvremap: what-if: give the share to replay at: --gpu-memory-utilization (vLLM) or "
                   "--mem-fraction-static (SGLang) (see kvremap what-if --help)\n");
      return kExitUsage;
    }
    what_if_settings.flag = what_if_fraction ? kvremap::what_if::ShareFlag::mem_fraction_static
                                             : kvremap::what_if::ShareFlag::gpu_memory_utilization;
    what_if_settings.share = what_if_fraction ? *what_if_fraction : *what_if_utilization;
    return run_what_if(what_if_path, what_if_settings, what_if_json);
  }
  if (validate->parsed()) return run_validate(validate_paths);
  std::printf("%s", app.help().c_str());
  return kExitOk;
}
