// SIGTERM/SIGINT under kvremap: a program's own disposition behaves exactly as without the library (one
// client per way servers install them), and a default one still leaves a summary and ends the process.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0"};

struct Runs {
  RunResult plain, preloaded;
  std::vector<kvremap::trace::Trace> traces;
};

// The client once without and once with kvremap (tracing into a fresh directory).
Runs run_both(const std::string& mode) {
  Runs r;
  r.plain = run_program({SIGNAL_CLIENT, mode}, kSimulator, {"LD_PRELOAD"}, 60);
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = kSimulator;
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir});
  r.preloaded = run_program({SIGNAL_CLIENT, mode}, env, {}, 60);
  for (const std::string& f : trace_files(dir)) r.traces.push_back(kvremap::trace::read_trace(f));
  return r;
}

void expect_same(const Runs& r) {
  EXPECT_EQ(r.preloaded.out, r.plain.out) << "stderr: " << r.preloaded.err;
  EXPECT_EQ(r.preloaded.exit_code, r.plain.exit_code);
  EXPECT_EQ(r.preloaded.signal, r.plain.signal);
}

TEST(Signals, AnSaSiginfoHandlerGetsTheRealSiginfoAndContext) {
  const Runs r = run_both("siginfo");
  ASSERT_EQ(r.plain.out, "siginfo signo=15 from_self=1 context=1\n") << r.plain.err;
  expect_same(r);
}

TEST(Signals, AnSaRestartHandlerKeepsABlockingReadGoing) {
  const Runs r = run_both("restart");
  ASSERT_EQ(r.plain.out, "read returned 1 (ok) after 1 handler call(s)\n") << r.plain.err;
  expect_same(r);
}

TEST(Signals, AnSaResethandHandlerLetsTheSecondSignalKill) {
  const Runs r = run_both("resethand");
  ASSERT_EQ(r.plain.signal, SIGINT);
  ASSERT_EQ(r.plain.out, "first SIGINT handled 1 time(s)\n");
  expect_same(r);
}

TEST(Signals, AnIgnoredSignalStaysIgnoredForTheProgramAndItsExecdChildren) {
  const Runs r = run_both("ignored");
  ASSERT_EQ(r.plain.out, "SIGINT is SIG_IGN\nchild survived SIGINT\nchild exited\n") << r.plain.err;
  expect_same(r);
}

TEST(Signals, SigactionReportsTheProgramsOwnDefaultAndItsNewHandlersRun) {
  const Runs r = run_both("query");
  ASSERT_EQ(r.plain.out,
            "SIGTERM is SIG_DFL (flags 0), SIGINT is SIG_DFL (flags 0)\nsignal(SIGINT) replaced SIG_DFL\n"
            "own handlers ran 2 time(s)\n")
      << r.plain.err;
  expect_same(r);
  ASSERT_EQ(r.traces.size(), 1u);
  ASSERT_TRUE(r.traces[0].summary.has_value());
  EXPECT_EQ(r.traces[0].summary->exit, "atexit");
}

}  // namespace
