// The Python helper (python/kvremap) as an engine that allocates its own KV cache uses it: tags, commit and
// availability through the preloaded library on the simulated driver, and harmless without the library.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

RunResult run_client(const std::vector<std::string>& extra) {
  std::vector<std::string> env = {"PYTHON_HELPER_DRIVER=" SIMCUDA_DRIVER, "SIMCUDA_DEVICE_MEMORY=4GiB",
                                  "SIMCUDA_CONTEXT_BYTES=0", "PYTHONPATH=" KVREMAP_PYTHON_DIR};
  env.insert(env.end(), extra.begin(), extra.end());
  // Debian's interpreter, as the other Python clients.
  return run_program({"/usr/bin/python3", PYTHON_HELPER_CLIENT}, env, {"LD_PRELOAD"}, 60);
}

const std::string kUnknownTag = "python_helper: kvremap.tag: 'weights' is not a tag; expected one of kv, none";

}  // namespace

TEST(PythonHelper, TagsAndCommitsThroughThePreloadedLibrary) {
  const std::string dir = make_temp_dir();
  const RunResult r = run_client({"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=defer", "KVREMAP_TRACE_DIR=" + dir});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("python_helper: available True, version "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python_helper: commit True\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python_helper: commit again False\n"), std::string::npos) << "committed once, for good";
  EXPECT_NE(r.out.find(kUnknownTag), std::string::npos) << r.out;
  const std::vector<std::string> files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  std::size_t regions = 0;
  std::string trigger;
  for (const auto& e : kvremap::trace::read_trace(files[0]).other_events) {
    if (e.name == "kv deferred") regions = e.args.at("regions").get<std::size_t>();
    if (e.name == "kv committed") trigger = e.args.at("trigger").get<std::string>();
  }
  EXPECT_EQ(regions, 2u) << "the two tensors allocated under the tag";
  EXPECT_EQ(trigger, "kvremap_commit");
}

TEST(PythonHelper, WithoutTheLibraryEveryCallIsANoOpThatSaysSo) {
  const RunResult r = run_client({});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("python_helper: available False, version None"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("python_helper: commit False\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(kUnknownTag), std::string::npos) << "a typo is caught without the library too";
}

// The wheel (python/CMakeLists.txt) in a fresh virtual environment, where vLLM and SGLang live: pip installs it
// offline, the environment's interpreter imports it from its own site-packages, and `python -m kvremap` says
// whether the library is loaded.
TEST(PythonHelper, TheWheelInstallsIntoAFreshVirtualEnvironmentAndImportsThere) {
  const std::string venv = make_temp_dir() + "/venv";
  const std::vector<std::string> unset = {"LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL"};
  const RunResult made = run_program({"/usr/bin/python3", "-m", "venv", venv}, {}, unset, 120);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const RunResult installed =
      run_program({venv + "/bin/python", "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", KVREMAP_WHEEL},
                  {"PIP_DISABLE_PIP_VERSION_CHECK=1"}, unset, 120);
  ASSERT_EQ(installed.exit_code, 0) << installed.out << installed.err;

  const RunResult imported =
      run_program({venv + "/bin/python", "-c", "import kvremap; print(kvremap.__file__); print(kvremap.available())"},
                  {}, unset, 60);
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(imported.out.rfind(venv + "/lib/python3", 0), 0u) << "imported from the environment: " << imported.out;
  EXPECT_NE(imported.out.find("/site-packages/kvremap/__init__.py\nFalse\n"), std::string::npos) << imported.out;

  const RunResult absent = run_program({venv + "/bin/python", "-m", "kvremap"}, {}, unset, 60);
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_EQ(absent.out.rfind("kvremap is not loaded in this process: run the program under `kvremap run -- COMMAND`", 0),
            0u)
      << absent.out;

  const RunResult loaded = run_program({venv + "/bin/python", "-m", "kvremap"},
                                       {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_MODE=observe", "KVREMAP_TRACE=0"},
                                       {"PYTHONPATH", "PYTHONHOME"}, 60);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.out << loaded.err;
  EXPECT_NE(loaded.out.find(" is loaded in this process ("), std::string::npos) << loaded.out;
  EXPECT_NE(loaded.out.find("libkvremap.so"), std::string::npos) << loaded.out;
  EXPECT_NE(loaded.out.find("  KVREMAP_MODE='observe'\n"), std::string::npos) << loaded.out;
}
