// The path settings through the user's path: the library preloaded onto the simulated driver under a bad
// KVREMAP_TRACE_DIR or KVREMAP_PROFILE_DIR, the kvremap tool under a KVREMAP_LIBRARY that is no libkvremap.so,
// and a profile written onto a full disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_program.h"

namespace fs = std::filesystem;
using kvremap::testing::count_of;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

std::vector<std::string> seed_argv(const std::string& program) {
  return {program, "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95"};
}

// The seed start-up deferred under kvremap, with `extra` settings added (and overriding).
RunResult run_seed(const std::vector<std::string>& extra, const std::string& cwd = "",
                   const std::string& preload = KVREMAP_PRELOAD) {
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
  env.insert(env.end(), {"LD_PRELOAD=" + preload, "KVREMAP_MODE=defer"});
  env.insert(env.end(), extra.begin(), extra.end());
  return run_program(seed_argv(link_as(VLLM_LIKE, "vllm")), env, {}, 120, 9, cwd);
}

// The lines of `text` that hold `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

// The tool's runs: LD_PRELOAD holds the sanitizer runtime or nothing, no kvremap setting inherited.
kvremap::testing::Preload split_preload() { return kvremap::testing::split_preload(KVREMAP_PRELOAD); }
std::vector<std::string> tool_env(const std::vector<std::string>& extra) {
  std::vector<std::string> env = extra;
  if (!split_preload().runtime.empty()) env.push_back("LD_PRELOAD=" + split_preload().runtime);
  return env;
}
std::vector<std::string> tool_unset() {
  std::vector<std::string> unset = {"KVREMAP_TRACE_DIR", "KVREMAP_PROFILE_DIR", "KVREMAP_LIBRARY"};
  if (split_preload().runtime.empty()) unset.push_back("LD_PRELOAD");
  return unset;
}

}  // namespace

TEST(Paths, ATraceDirectoryWithAnEscapeIsOneLineNamingTheVariableAndNoTrace) {
  const std::string good = make_temp_dir();
  const RunResult ok = run_seed({"KVREMAP_TRACE_DIR=" + good, "KVREMAP_PROFILE_DIR=off"});
  ASSERT_EQ(trace_files(good).size(), 1u) << ok.err;

  const std::string base = make_temp_dir();
  const std::string cwd = make_temp_dir();
  const std::string bad = base + "/traces\x1b[31m";
  const RunResult r = run_seed({"KVREMAP_TRACE_DIR=" + bad, "KVREMAP_PROFILE_DIR=off"}, cwd);
  EXPECT_EQ(r.exit_code, ok.exit_code) << r.err;
  const auto lines = lines_with(r.err, "KVREMAP_TRACE_DIR");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("KVREMAP_TRACE_DIR='" + base + "/traces\\x1b[31m' holds a control character"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("no trace is written"), std::string::npos) << lines[0];
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << "the escape never reaches the terminal";
  EXPECT_TRUE(entries(base).empty()) << "nothing by the bad name";
  EXPECT_TRUE(entries(cwd).empty()) << "no trace in the working directory either";
}

TEST(Paths, AFiveThousandByteTraceDirectoryIsOneLineNamingTheVariableAndNoTrace) {
  const std::string good = make_temp_dir();
  const RunResult ok = run_seed({"KVREMAP_TRACE_DIR=" + good, "KVREMAP_PROFILE_DIR=off"});
  ASSERT_EQ(trace_files(good).size(), 1u) << ok.err;

  const std::string cwd = make_temp_dir();
  std::string bad;
  while (bad.size() < 5000) bad += std::string(99, 'd') + "/";
  bad.resize(5000);
  const RunResult r = run_seed({"KVREMAP_TRACE_DIR=" + bad, "KVREMAP_PROFILE_DIR=off"}, cwd);
  EXPECT_EQ(r.exit_code, ok.exit_code) << r.err;
  const auto lines = lines_with(r.err, "KVREMAP_TRACE_DIR");
  ASSERT_EQ(lines.size(), 1u) << r.err.substr(0, 2000);
  EXPECT_NE(lines[0].find("' is 5000 bytes long, over the 4095 a path may have"), std::string::npos)
      << lines[0].substr(0, 300);
  EXPECT_NE(lines[0].find("no trace is written"), std::string::npos);
  EXPECT_TRUE(entries(cwd).empty());
}

TEST(Paths, AProfileDirectoryWithAControlCharacterTurnsProfilesOffAndCreatesNothing) {
  const std::string good = make_temp_dir();
  const RunResult ok = run_seed({"KVREMAP_TRACE_DIR=" + make_temp_dir(), "KVREMAP_PROFILE_DIR=" + good});
  ASSERT_EQ(entries(good).size(), 1u) << "a good directory gets the profile: " << ok.err;

  const std::string cwd = make_temp_dir();
  const RunResult r = run_seed({"KVREMAP_TRACE_DIR=" + make_temp_dir(), "KVREMAP_PROFILE_DIR=prof\x01iles"}, cwd);
  EXPECT_EQ(r.exit_code, ok.exit_code) << r.err;
  const auto lines = lines_with(r.err, "KVREMAP_PROFILE_DIR='");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("KVREMAP_PROFILE_DIR='prof\\x01iles' holds a control character"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("profiles are off for this process"), std::string::npos) << lines[0];
  EXPECT_TRUE(entries(cwd).empty()) << "no directory of that name in the engine's working directory";
}

// KVREMAP_LIBRARY naming a file that is not a libkvremap.so: `libpath` and `run` refuse it with one line
// and status 2, and `run` starts nothing.
TEST(Paths, ALibraryThatIsNotKvremapIsRefusedByLibpathAndRun) {
  const std::string not_kvremap = SIMCUDA;  // an ELF shared object: the simulated driver
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/etc/passwd", "is not an ELF file"},
      {not_kvremap,
       "is a shared object that does not define kvremap's entry points (no kvremap_version among its dynamic "
       "symbols)"}};
  for (const auto& [library, why] : cases) {
    const std::string named = "KVREMAP_LIBRARY='" + library + "' " + why +
                              ": name a libkvremap.so, or unset it to use the one installed beside kvremap\n";
    RunResult r = run_program({KVREMAP_CLI, "libpath"}, tool_env({"KVREMAP_LIBRARY=" + library}), tool_unset());
    EXPECT_EQ(r.exit_code, 2) << library;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "kvremap libpath: " + named);

    const std::string marker = make_temp_dir() + "/ran";
    r = run_program({KVREMAP_CLI, "run", "--", "touch", marker}, tool_env({"KVREMAP_LIBRARY=" + library}),
                    tool_unset());
    EXPECT_EQ(r.exit_code, 2) << library;
    EXPECT_EQ(r.err, "kvremap run: " + named);
    EXPECT_FALSE(fs::exists(marker)) << "the command never runs without kvremap";

    r = run_program({KVREMAP_CLI, "run", "--library", library, "--", "touch", marker}, tool_env({}), tool_unset());
    EXPECT_EQ(r.exit_code, 2) << library;
    EXPECT_EQ(r.err, "kvremap run: --library '" + library + "' " + why +
                         ": pass a built libkvremap.so with --library PATH\n");
    EXPECT_FALSE(fs::exists(marker));
  }
  // This build's library passes the same check.
  const RunResult r =
      run_program({KVREMAP_CLI, "libpath"}, tool_env({"KVREMAP_LIBRARY=" + split_preload().library}), tool_unset());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, fs::absolute(split_preload().library).lexically_normal().string() + "\n");
}

// A profile write that fails on a full disk says so with the write's own error, not one a later call left.
TEST(Paths, AProfileWriteOnAFullDiskReportsNoSpaceLeft) {
  const std::string profiles = fs::canonical(make_temp_dir()).string();
  const RunResult r = run_seed({"KVREMAP_TRACE_DIR=" + make_temp_dir(), "KVREMAP_PROFILE_DIR=" + profiles,
                                "PROFILE_DISK_FULL_DIR=" + profiles},
                               "", std::string(KVREMAP_PRELOAD) + ":" + PROFILE_DISK_FULL);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_with(r.err, "no profile written");
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("cannot write the profile " + profiles + "/"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(": No space left on device"), std::string::npos) << lines[0];
  EXPECT_EQ(count_of(r.err, "Resource temporarily unavailable"), 0u) << r.err;
  for (const std::string& name : entries(profiles)) ADD_FAILURE() << "left behind: " << name;
}

// The tool applies the same rules before it creates a trace or profile directory: status 2, nothing created,
// the command not run.
TEST(Paths, RunRefusesABadTraceOrProfileDirectoryBeforeCreatingIt) {
  const std::string base = make_temp_dir();
  const std::string marker = make_temp_dir() + "/ran";
  const std::string library = split_preload().library;
  RunResult r = run_program({KVREMAP_CLI, "run", "--library", library, "--trace-dir", base + "/t\x1b[31m", "--",
                             "touch", marker},
                            tool_env({}), tool_unset());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "kvremap run: --trace-dir='" + base +
                       "/t\\x1b[31m' holds a control character (byte " + std::to_string(base.size() + 3) + " of " +
                       std::to_string(base.size() + 7) +
                       "): expected a path without control characters, at most 4095 bytes, each component at most "
                       "255 bytes; the command is not run\n");
  r = run_program({KVREMAP_CLI, "run", "--library", library, "--trace-dir", base + "/traces", "--profile-dir",
                   base + "/p\n", "--", "touch", marker},
                  tool_env({}), tool_unset());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;
  EXPECT_NE(r.err.find("--profile-dir '" + base + "/p\\x0a' holds a control character"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(base).empty()) << "nothing created";
  EXPECT_FALSE(fs::exists(marker));
}
