// The installed kvremap as a user gets it: `cmake --install` into a prefix that is then moved, and the
// Debian package unpacked into a root. From there `kvremap run` runs the example engine under the
// installed library, `kvremap libpath` names it, the C API builds a consumer through CMake and
// pkg-config, the Python helper imports and commits, the man page is the tool's help, and lintian's
// findings on the package are the listed ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "run_program.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::scenario_simcuda_env;
using kvremap::testing::trace_files;
namespace fs = std::filesystem;

namespace {

const std::string kLibrary = std::string(KVREMAP_INSTALL_LIBDIR) + "/" + KVREMAP_LIBRARY_SONAME;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `cmake --install` of this build into a fresh prefix, returned.
std::string install_prefix() {
  const std::string prefix = make_temp_dir() + "/prefix";
  const RunResult r = run_program({CMAKE_COMMAND, "--install", KVREMAP_BUILD_DIR, "--prefix", prefix}, {}, {}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return prefix;
}

// The installed tree moved elsewhere (the build tree's path and the install prefix both gone from
// the tool's view), canonical: what /proc/self/exe shows the tool.
std::string moved(const std::string& prefix) {
  const std::string to = make_temp_dir() + "/moved";
  fs::rename(prefix, to);
  return fs::canonical(to).string();
}

// The example engine, as vLLM, under `ROOT/bin/kvremap run` with no --library: the command prints the
// LD_PRELOAD it was given, then runs the engine; kvremap prints its summary.
void expect_kvremap_runs_the_engine(const std::string& root) {
  const std::string traces = make_temp_dir();
  std::vector<std::string> env = scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
  env.push_back("KVREMAP_PROFILE_DIR=off");
  const std::string engine = kvremap::testing::link_as(VLLM_LIKE, "vllm");
  const RunResult r = run_program({root + "/bin/kvremap", "run", "--trace-dir", traces, "--", "/bin/sh", "-c",
                                   "echo \"preload: $LD_PRELOAD\"; exec \"$0\" \"$@\"", engine, "--scenario",
                                   SEED_SCENARIO, "--gpu-memory-utilization", "0.95"},
                                  env, {"LD_PRELOAD", "KVREMAP_LIBRARY", "KVREMAP_TRACE_DIR"}, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("preload: " + root + "/" + kLibrary + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("kvremap run: attempt 1, pid "), std::string::npos) << "the summary: " << r.err;
  EXPECT_EQ(trace_files(traces).size(), 1u);
}

// Every line of `kvremap ARGS` (the installed tool's own help) is a line of the man page's text.
void expect_page_holds(const std::string& page, const std::string& tool, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {tool};
  argv.insert(argv.end(), args.begin(), args.end());
  const RunResult r = run_program(argv, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> page_lines = lines_of(page);
  const std::set<std::string> present(page_lines.begin(), page_lines.end());
  std::size_t checked = 0;
  for (const std::string& line : lines_of(r.out)) {
    if (line.empty()) continue;
    // roff's verbatim escapes (tools/man_page.cmake): \e is a backslash, \& before a leading dot.
    std::string escaped;
    for (char c : line) escaped += c == '\\' ? std::string("\\e") : std::string(1, c);
    if (escaped[0] == '.' || escaped[0] == '\'') escaped = "\\&" + escaped;
    EXPECT_TRUE(present.count(escaped)) << "kvremap " << args[0] << ": not in the man page: " << line;
    ++checked;
  }
  EXPECT_GT(checked, 2u);
}

}  // namespace

TEST(Install, KvremapRunsTheEngineFromAMovedInstallTree) {
  const std::string prefix = install_prefix();
  // What is installed: the tool, the library under its soname, nothing of the tests or examples.
  std::set<std::string> programs;
  for (const auto& entry : fs::directory_iterator(prefix + "/bin")) programs.insert(entry.path().filename());
  EXPECT_EQ(programs, std::set<std::string>{"kvremap"});
  std::set<std::string> libraries;
  for (const auto& entry : fs::directory_iterator(prefix + "/" + KVREMAP_INSTALL_LIBDIR))
    libraries.insert(entry.path().filename());
  const std::string versioned = std::string("libkvremap.so.") + KVREMAP_VERSION;
  EXPECT_EQ(libraries, (std::set<std::string>{"libkvremap.so", KVREMAP_LIBRARY_SONAME, versioned}));
  EXPECT_EQ(fs::read_symlink(prefix + "/" + kLibrary).string(), versioned);
  for (const auto& entry : fs::recursive_directory_iterator(prefix)) {
    const std::string name = entry.path().filename();
    for (const char* test_only : {"simcuda", "libcuda", "vllm_like", "remap_demo", "cuda_program", "test_"})
      EXPECT_EQ(name.find(test_only), std::string::npos) << "installed: " << entry.path();
  }
  for (const char* file :
       {"include/kvremap/kvremap.h", "share/man/man1/kvremap.1.gz", "share/doc/kvremap/copyright",
        "share/doc/kvremap/changelog.gz", "share/doc/kvremap/README.md", "share/doc/kvremap/docs/configuration.md"})
    EXPECT_TRUE(fs::is_regular_file(prefix + "/" + file)) << file;

  // Nothing installed reaches back into the build tree: no run path (the build's test programs have
  // one, to the simulator), no library path compiled in (the tool finds its library beside itself).
  for (const std::string& elf : {prefix + "/bin/kvremap", prefix + "/" + KVREMAP_INSTALL_LIBDIR + "/" + versioned}) {
    const RunResult dynamic = run_program({"/usr/bin/env", "readelf", "--dynamic", elf}, {});
    ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
    EXPECT_EQ(dynamic.out.find("PATH)"), std::string::npos) << elf << " has a run path:\n" << dynamic.out;
  }

  const std::string root = moved(prefix);
  RunResult r = run_program({root + "/bin/kvremap", "libpath"}, {}, {"KVREMAP_LIBRARY"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, root + "/" + kLibrary + "\n");
  expect_kvremap_runs_the_engine(root);

  // KVREMAP_LIBRARY names another library; one that names no file is a one-line error, status 2.
  r = run_program({root + "/bin/kvremap", "libpath"}, {"KVREMAP_LIBRARY=" KVREMAP_BUILD_LIBRARY});
  EXPECT_EQ(r.out, fs::path(KVREMAP_BUILD_LIBRARY).lexically_normal().string() + "\n");
  r = run_program({root + "/bin/kvremap", "run", "--", "true"}, {"KVREMAP_LIBRARY=" + root + "/nothing.so"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "kvremap run: KVREMAP_LIBRARY='" + root +
                       "/nothing.so' is not a file: name a libkvremap.so, or unset it to use the one installed "
                       "beside kvremap\n");
  // A tool with no library beside it says where it looked.
  fs::remove(root + "/" + kLibrary);
  r = run_program({root + "/bin/kvremap", "libpath"}, {}, {"KVREMAP_LIBRARY"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err.rfind("kvremap libpath: no libkvremap.so beside this kvremap (looked for " + root + "/" + kLibrary, 0), 0u)
      << r.err;
}

TEST(Install, TheCApiBuildsThroughCMakeAndPkgConfigAndRunsWithAndWithoutTheLibrary) {
  const std::string root = moved(install_prefix());
  const std::string work = make_temp_dir();
  const std::string library = root + "/" + kLibrary;

  // CMake: find_package(kvremap) from the moved prefix.
  RunResult r = run_program(
      {CMAKE_COMMAND, "-S", KVREMAP_CONSUMER_DIR, "-B", work + "/cmake", "-DCMAKE_PREFIX_PATH=" + root}, {}, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_program({CMAKE_COMMAND, "--build", work + "/cmake"}, {}, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_program({work + "/cmake/consumer"}, {}, {"LD_PRELOAD"});
  EXPECT_EQ(r.out, "consumer: package library " + library + "\nconsumer: kvremap not loaded\n");
  r = run_program({work + "/cmake/consumer"}, {"LD_PRELOAD=" + library, "KVREMAP_TRACE=off"});
  EXPECT_EQ(r.out, "consumer: package library " + library +
                       "\nconsumer: kvremap " KVREMAP_VERSION " loaded, tag_push 0, tag_pop 0, commit -1\n")
      << r.err;

  // pkg-config: the same header and flags, and the library to preload.
  const std::string pc_path = "PKG_CONFIG_PATH=" + root + "/" + KVREMAP_INSTALL_PKGCONFIGDIR;
  r = run_program({"/usr/bin/env", "pkg-config", "--cflags", "--libs", "kvremap"}, {pc_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("-DKVREMAP_OPTIONAL"), std::string::npos) << r.out;
  r = run_program({"/usr/bin/env", "pkg-config", "--variable=library", "kvremap"}, {pc_path});
  EXPECT_EQ(fs::canonical(lines_of(r.out).at(0)), fs::canonical(library)) << r.out;
  r = run_program({"/bin/sh", "-c", "cc $(pkg-config --cflags --libs kvremap) \"$0\" -o \"$1\" && \"$1\"",
                   std::string(KVREMAP_CONSUMER_DIR) + "/consumer.c", work + "/by-pkg-config"},
                  {pc_path, "LD_PRELOAD=" + library, "KVREMAP_TRACE=off"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "consumer: kvremap " KVREMAP_VERSION " loaded, tag_push 0, tag_pop 0, commit -1\n") << r.err;
}

TEST(Install, ThePythonHelperImportsFromTheInstalledTreeAndCommits) {
  const std::string root = moved(install_prefix());
  const std::string python_dir = root + "/" + KVREMAP_INSTALL_PYTHONDIR;
  const std::vector<std::string> env = {"PYTHON_HELPER_DRIVER=" SIMCUDA_DRIVER, "SIMCUDA_DEVICE_MEMORY=4GiB",
                                        "SIMCUDA_CONTEXT_BYTES=0", "PYTHONPATH=" + python_dir};
  RunResult r = run_program({"/usr/bin/python3", PYTHON_HELPER_CLIENT}, env, {"LD_PRELOAD"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("python_helper: module " + python_dir + "/kvremap/__init__.py\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python_helper: available False, version None\n"), std::string::npos) << r.out;

  std::vector<std::string> with = env;
  with.insert(with.end(), {"LD_PRELOAD=" + root + "/" + kLibrary, "KVREMAP_MODE=defer", "KVREMAP_TRACE=off"});
  r = run_program({"/usr/bin/python3", PYTHON_HELPER_CLIENT}, with, {}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("python_helper: available True, version " KVREMAP_VERSION "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python_helper: commit True\n"), std::string::npos) << r.out;
}

TEST(Install, TheManPageIsTheToolsHelp) {
  const std::string root = moved(install_prefix());
  const std::string tool = root + "/bin/kvremap";
  const RunResult page = run_program({"/usr/bin/env", "gzip", "-dc", root + "/share/man/man1/kvremap.1.gz"}, {});
  ASSERT_EQ(page.exit_code, 0) << page.err;
  expect_page_holds(page.out, tool, {"--help"});
  expect_page_holds(page.out, tool, {"help-env"});
  // Every subcommand the help lists has its section, holding its help.
  const RunResult top = run_program({tool, "--help"}, {});
  const std::string listing = top.out.substr(top.out.find("Subcommands:\n") + 13);
  std::size_t subcommands = 0;
  for (const std::string& line : lines_of(listing)) {
    if (line.rfind("  ", 0) != 0) continue;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    EXPECT_NE(page.out.find(".SS kvremap " + name + "\n"), std::string::npos) << name;
    expect_page_holds(page.out, tool, {name, "--help"});
    ++subcommands;
  }
  EXPECT_GE(subcommands, 9u);
}

// The package as CPack builds it: its control fields, the tree it unpacks to, lintian's findings.
TEST(DebianPackage, UnpackedItRunsTheEngineAndLintianFindsOnlyTheListed) {
  const std::string work = make_temp_dir();
  RunResult r = run_program(
      {CPACK_COMMAND, "-G", "DEB", "--config", KVREMAP_BUILD_DIR "/CPackConfig.cmake", "-B", work}, {}, {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string deb = work + "/kvremap_" KVREMAP_VERSION "_amd64.deb";
  ASSERT_TRUE(fs::is_regular_file(deb)) << r.out;

  r = run_program({"/usr/bin/env", "dpkg-deb", "-f", deb, "Package", "Version", "Architecture", "Depends"}, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Package: kvremap\nVersion: " KVREMAP_VERSION "\nArchitecture: amd64\n"), std::string::npos)
      << r.out;
  const std::string depends = r.out.substr(r.out.find("Depends: "));
  for (const char* package : {"libc6", "libstdc++6", "libunwind8", "libcairo2"})  // libcairo2: the tool's PNG
    EXPECT_NE(depends.find(package), std::string::npos) << package << " missing from " << depends;
  std::string lower = depends;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* absent : {"cuda", "nvidia", "libfmt", "gtest", "benchmark"})
    EXPECT_EQ(lower.find(absent), std::string::npos) << "the package depends on " << absent << ": " << depends;

  const std::string unpacked = work + "/root";
  r = run_program({"/usr/bin/env", "dpkg-deb", "-x", deb, unpacked}, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string usr = fs::canonical(unpacked + "/usr").string();
  r = run_program({usr + "/bin/kvremap", "libpath"}, {}, {"KVREMAP_LIBRARY"});
  EXPECT_EQ(r.out, usr + "/" + kLibrary + "\n") << r.err;
  expect_kvremap_runs_the_engine(usr);

  // lintian: each finding's tag must be listed, with its reason, in packaging/lintian-expected.
  // Informational findings too: each one stays only with a reason.
  r = run_program({"/usr/bin/env", "lintian", "--display-info", "--no-tag-display-limit", deb}, {}, {}, 300);
  std::set<std::string> listed;
  for (const std::string& line : lines_of(slurp(KVREMAP_LINTIAN_EXPECTED)))
    if (!line.empty() && line[0] != '#') listed.insert(line.substr(0, line.find(' ')));
  std::size_t findings = 0;
  for (const std::string& line : lines_of(r.out)) {
    // "X: kvremap: tag-name details"
    if (line.size() < 3 || line[1] != ':') continue;
    const std::size_t tag_start = line.find(": ", 3) + 2;
    const std::string tag = line.substr(tag_start, line.find(' ', tag_start) - tag_start);
    EXPECT_TRUE(listed.count(tag)) << "lintian finding not in packaging/lintian-expected: " << line;
    ++findings;
  }
  EXPECT_TRUE(r.exit_code == 0 || findings > 0) << "lintian failed without findings: " << r.err;
}
