// Secrets and options under LD_PRELOAD: no secret in a trace or its reports, private trace files, and
// configuration mistakes that turn off only what they configure, each said in one line.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0",
                                             "SIMCUDA_GRAPH_EXEC_BYTES=6MiB", "SIMCUDA_GRAPH_NODE_BYTES=0",
                                             "SIMCUDA_MODULE_BYTES=0"};
const std::vector<std::string> kSecrets = {"sk-xsecret", "hf_xsecret", "ysecret", "urlsecret"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A program under kvremap in a fresh directory `*dir`: its working directory, and its trace directory
// unless `env` names one.
RunResult run_kvremap(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* dir) {
  *dir = make_temp_dir();
  std::vector<std::string> all = with(kSimulator, {"LD_PRELOAD=" KVREMAP_PRELOAD});
  if (std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.starts_with("KVREMAP_TRACE_DIR="); }))
    all.push_back("KVREMAP_TRACE_DIR=" + *dir);
  return run_program(argv, with(all, env), {}, 60, 9, *dir);
}

std::uint32_t mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0xffffffffu;
  return st.st_mode & 07777u;
}

}  // namespace

// The command line is in the trace's header, so a secret on it would sit in a file others may be shown:
// flag values (both spellings) and URL passwords are redacted, and the file is private to its user.
TEST(Hardening, TraceHeaderHoldsNoSecretAndTheFileIsPrivate) {
  std::string dir;
  const RunResult r = run_kvremap({CUDA_PROGRAM, "routes", "--api-key", "sk-xsecret", "--hf-token", "hf_xsecret",
                                   "--db-password=ysecret", "postgres://user:urlsecret@db.example/x"},
                                  {"KVREMAP_MODE=observe"}, &dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> traces = trace_files(dir);
  ASSERT_EQ(traces.size(), 1u);
  const std::string text = read_file(traces[0]);
  for (const std::string& secret : kSecrets) EXPECT_EQ(text.find(secret), std::string::npos) << secret;
  EXPECT_NE(text.find(R"(--api-key <redacted> --hf-token <redacted> --db-password=<redacted> )"
                      R"(postgres://user:<redacted>@db.example/x")"),
            std::string::npos)
      << text.substr(0, 600);
  EXPECT_EQ(mode_of(traces[0]), 0600u);

  // What the tools copy from the header is the redacted text.
  const RunResult report = run_program({KVREMAP_CLI, "report", "--json", traces[0]}, {}, {"LD_PRELOAD"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = dir + "/plot.html";
  const RunResult plot = run_program({KVREMAP_CLI, "plot", traces[0], "-o", html}, {}, {"LD_PRELOAD"});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  for (const std::string& secret : kSecrets) {
    EXPECT_EQ(report.out.find(secret), std::string::npos) << secret;
    EXPECT_EQ(read_file(html).find(secret), std::string::npos) << secret;
  }
  EXPECT_NE(report.out.find("<redacted>"), std::string::npos);
}

TEST(Hardening, TraceModeWidensThePermissionsOnRequest) {
  std::string dir;
  const RunResult r = run_kvremap({CUDA_PROGRAM, "routes"}, {"KVREMAP_MODE=observe", "KVREMAP_TRACE_MODE=0640"}, &dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> traces = trace_files(dir);
  ASSERT_EQ(traces.size(), 1u);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(mode_of(traces[0]), 0640u & ~static_cast<std::uint32_t>(mask)) << "less what the umask removes";

  const RunResult bad = run_kvremap({CUDA_PROGRAM, "routes"}, {"KVREMAP_MODE=observe", "KVREMAP_TRACE_MODE=4755"}, &dir);
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_EQ(count(bad.err, "KVREMAP_TRACE_MODE='4755' is invalid"), 1u) << bad.err;
  ASSERT_EQ(trace_files(dir).size(), 1u);
  EXPECT_EQ(mode_of(trace_files(dir)[0]), 0600u);
}

// An unset shell variable (`KVREMAP_TRACE_DIR=$DIR`) costs the trace, never the deferral: the KV cache
// is still deferred and committed, and one line says what happened.
TEST(Hardening, EmptyTraceDirKeepsDeferral) {
  std::string dir;
  const RunResult r = run_kvremap({CUDA_PROGRAM, "tagged"}, {"KVREMAP_TRACE_DIR=", "KVREMAP_LOG_LEVEL=info"}, &dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "KVREMAP_TRACE_DIR"), 1u) << r.err;
  EXPECT_NE(r.err.find("kvremap: KVREMAP_TRACE_DIR='' is invalid: expected a non-empty directory path; no trace is "
                       "written; KV deferral and tracking go on\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("KV burst over: 3 tensors"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("KV committed before"), std::string::npos) << r.err;
  EXPECT_TRUE(trace_files(dir).empty()) << "no trace, in the working directory or anywhere";
}

// KVREMAP_KV_TENSOR_BYTES names a size; outside the KV window an allocation of that size (here the
// program's first, 1 MiB, before any memory query) stays ordinary: only the three tagged KV tensors are
// deferred.
TEST(Hardening, TensorSizeOptionLeavesAllocationsOutsideTheWindowAlone) {
  std::string dir;
  const RunResult r =
      run_kvremap({CUDA_PROGRAM, "tagged"}, {"KVREMAP_KV_TENSOR_BYTES=1MiB", "KVREMAP_LOG_LEVEL=info"}, &dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KV burst over: 3 tensors"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("KV burst over: 4 tensors"), std::string::npos) << r.err;
}

// Settings only the device can check are refused before the driver sees them, naming the variables and
// what would work; KVREMAP_STRICT=1 stops the process on them as on a bad value at load.
TEST(Hardening, DeviceTimeMisconfigurationNamesTheVariablesAndStrictStops) {
  struct Case {
    std::vector<std::string> settings;
    std::string line;
  };
  for (const Case& c :
       {Case{{"KVREMAP_SCRATCH_BYTES=1MiB"},
             "kvremap: KVREMAP_SCRATCH_BYTES=1.00 MiB is not a multiple of device 0's VMM granularity (2.00 MiB): "
             "the scratch is mapped in whole granules; use 2.00 MiB or another multiple of the granularity that "
             "divides KVREMAP_CHUNK_BYTES=512.00 MiB\n"},
        Case{{"KVREMAP_CHUNK_BYTES=16GiB"},
             "kvremap: KVREMAP_CHUNK_BYTES=16.00 GiB is larger than the KV arena (KVREMAP_ARENA_BYTES=0: twice device "
             "0's memory, 8.00 GiB): the arena must hold at least one chunk; use a chunk of at most 8.00 GiB or set "
             "KVREMAP_ARENA_BYTES to at least 16.00 GiB\n"}}) {
    SCOPED_TRACE(c.settings[0]);
    std::string dir;
    const RunResult lenient = run_kvremap({CUDA_PROGRAM, "tagged"}, c.settings, &dir);
    EXPECT_EQ(lenient.exit_code, 0) << "the KV cache stays in ordinary allocations: " << lenient.err;
    EXPECT_EQ(count(lenient.err, c.line), 1u) << lenient.err;
    EXPECT_EQ(lenient.err.find("driver error"), std::string::npos) << lenient.err;

    const RunResult strict = run_kvremap({CUDA_PROGRAM, "tagged"}, with(c.settings, {"KVREMAP_STRICT=1"}), &dir);
    EXPECT_EQ(strict.exit_code, 1) << strict.err;
    EXPECT_NE(strict.err.find(c.line), std::string::npos) << strict.err;
  }
}

// Settings that give up what deferral gains say so once, at start.
TEST(Hardening, SettingsThatGiveUpTheGainSaySoOnce) {
  for (const auto& [setting, line] : std::vector<std::pair<std::string, std::string>>{
           {"KVREMAP_COMMIT=first-launch",
            "KVREMAP_COMMIT=first-launch: the KV cache is committed before the first launch after the KV burst; "
            "autotuning and CUDA-graph capture get no extra memory\n"},
           {"KVREMAP_ENGINE=other", "KVREMAP_ENGINE=other: no capture is expected after the KV cache, so the KV cache "
                                    "is committed before the first launch after the KV burst; autotuning and CUDA-graph "
                                    "capture get no extra memory\n"}}) {
    std::string dir;
    const RunResult r = run_kvremap({CUDA_PROGRAM, "tagged"}, {setting}, &dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.err, line), 1u) << r.err;
  }
}

namespace {

// `churn` under kvremap with trace_disk_fills.cpp preloaded after it: the trace file's room ends halfway
// through its first write of at least 8 KiB (a batch of whole lines, as the background writer writes
// them), the write is short, and the next is refused (`mode`: ENOSPC, or EFBIG under the file-size limit
// the room becomes). The trace must keep every whole line that reached the file, less only the fewest
// lines off its end that make room for the "trace stopped" event, which ends it.
void check_room_kept(const std::string& mode, const std::string& error) {
  std::string dir;
  const std::string copy = make_temp_dir() + "/reached";
  const RunResult r = run_kvremap({CUDA_PROGRAM, "churn"},
                                  {"LD_PRELOAD=" KVREMAP_PRELOAD ":" TRACE_DISK_FILLS, "TRACE_DISK_FILLS_AT=8192",
                                   "TRACE_DISK_FILLS_MODE=" + mode, "TRACE_DISK_FILLS_COPY=" + copy,
                                   "KVREMAP_MODE=observe"},
                                  &dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "trace file: " + error + "; tracing stops here"), 1u) << r.err;
  const auto files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const std::string reached = read_file(copy);
  ASSERT_GT(reached.size(), 8192u / 2) << "the file's room never ended: no write of 8 KiB";
  const std::string file = read_file(files[0]);
  // The stop line, and what precedes it.
  ASSERT_FALSE(file.empty());
  ASSERT_EQ(file.back(), '\n') << "the file ends with a whole line";
  const std::size_t stop_at = file.rfind('\n', file.size() - 2) + 1;
  const std::string stop = file.substr(stop_at);
  const std::string kept = file.substr(0, stop_at);
  EXPECT_NE(stop.find("\"name\":\"trace stopped\""), std::string::npos) << stop;
  EXPECT_NE(stop.find("\"error\":\"" + error + "\""), std::string::npos) << stop;
  EXPECT_LE(file.size(), reached.size()) << "the file outgrew its room";
  ASSERT_LE(kept.size(), reached.size());
  EXPECT_EQ(reached.compare(0, kept.size(), kept), 0) << "the trace is not what reached the file";
  // The line after the kept ones, whole in what reached the file, would not have left room for the stop line.
  const std::size_t next_end = reached.find('\n', kept.size());
  const bool another_whole_line = next_end != std::string::npos;
  EXPECT_TRUE(!another_whole_line || next_end + 1 + stop.size() > reached.size())
      << "a whole line that reached the file was cut: " << kept.size() << " of " << reached.size()
      << " bytes kept, the next line ends at " << next_end + 1 << ", the stop line is " << stop.size();
  const auto trace = kvremap::trace::read_trace(files[0]);
  EXPECT_EQ(kvremap::trace::validate(trace), std::vector<std::string>{});
  EXPECT_EQ(trace.stopped, error);
  EXPECT_FALSE(trace.truncated);
}

}  // namespace

// A full disk halfway through a batch: the lines of the batch that reached the file stay (they were cut
// back to the batch's start), and the file ends with why it stopped.
TEST(Hardening, AShortWriteOnAFullDiskKeepsTheLinesThatReachedTheFile) { check_room_kept("enospc", "No space left on device"); }

// The same under a file-size limit the batch crosses: the kernel writes up to the limit, then refuses.
TEST(Hardening, AFileSizeLimitKeepsEveryWholeLineThatFittedAndSaysWhyItStopped) {
  check_room_kept("fsize", "File too large");
}
