// KVREMAP_METRICS_FILE end to end: a two-rank replica's processes write one Prometheus text file that Debian's
// python3-prometheus-client parses strictly, with the figures of their traces; `kvremap status` lists the
// processes that run.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

// Parses the file with prometheus_client's parser (it raises on anything the format does not allow) and prints
// one line per sample: NAME pid device value.
constexpr const char* kParse = R"(
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        print(s.name, s.labels.get("pid"), s.labels.get("device", "-"), int(s.value))
)";

std::vector<std::string> replica(const std::string& vllm) {
  return {vllm, "serve", "--scenario", SEED_SCENARIO, "--gpu-memory-utilization", "0.95", "--ranks", "2"};
}

}  // namespace

TEST(Metrics, TwoRanksWriteOneFileAStrictParserReadsWithTheirTracesFigures) {
  const std::string dir = make_temp_dir(), traces = make_temp_dir();
  const std::string file = dir + "/kvremap.prom";
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 2);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_METRICS_FILE=" + file, "KVREMAP_TRACE_DIR=" + traces,
                         "KVREMAP_PROFILE_DIR=" + make_temp_dir()});
  // The file holds the series of the processes alive at its last rewrite: the ranks serve on
  // (VLLM_LIKE_KEEP_SERVING=1) until both have committed, the file is copied then, and SIGTERM ends them.
  env.push_back("VLLM_LIKE_KEEP_SERVING=1");
  const std::string seen = dir + "/seen.prom";
  const std::string script =
      "\"$@\" & pid=$!; i=0; "
      "while [ \"$(grep -c '^kvremap_commit_time_seconds{' " + file + " 2>/dev/null)\" != 2 ] && [ $i -lt 1200 ]; do "
      "sleep 0.1; i=$((i+1)); done; cp " + file + " " + seen + "; kill -TERM $pid; wait $pid";
  std::vector<std::string> argv = {"/bin/sh", "-c", script, "sh"};
  for (const std::string& a : replica(link_as(VLLM_LIKE, "vllm"))) argv.push_back(a);
  const RunResult r = run_program(argv, env, {}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RunResult parsed = run_program({"/usr/bin/python3", "-c", kParse, seen}, {}, {"LD_PRELOAD"}, 60);
  ASSERT_EQ(parsed.exit_code, 0) << "the strict parser refused the file: " << parsed.err;

  const auto files = trace_files(traces);
  ASSERT_EQ(files.size(), 2u);
  for (const std::string& path : files) {
    const auto trace = kvremap::trace::read_trace(path);
    const std::string pid = std::to_string(trace.header.pid);
    for (const auto& e : trace.other_events) {
      if (e.name != "kv committed") continue;
      const std::string device = std::to_string(e.args.at("device").get<int>());
      for (const auto& [name, field] : {std::pair{"kvremap_kv_device_bytes", "device_bytes"},
                                        std::pair{"kvremap_kv_host_bytes", "host_bytes"},
                                        std::pair{"kvremap_headroom_bytes", "headroom_bytes"}}) {
        const std::string line = std::string(name) + " " + pid + " " + device + " " +
                                 std::to_string(e.args.at(field).get<std::uint64_t>()) + "\n";
        EXPECT_NE(parsed.out.find(line), std::string::npos) << line << parsed.out;
      }
      EXPECT_NE(parsed.out.find("kvremap_kv_scratch_bytes " + pid + " " + device + " 0\n"), std::string::npos)
          << "committed: nothing left on scratch";
      EXPECT_NE(parsed.out.find("kvremap_phase " + pid + " " + device + " 1\n"), std::string::npos);
      EXPECT_NE(parsed.out.find("kvremap_serving_overflows_total " + pid + " " + device + " 0\n"), std::string::npos);
    }
  }
  // Both processes have ended: status lists none of them.
  const RunResult status = run_program({KVREMAP_CLI, "status", "--metrics-file", file}, {}, {}, 30);
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("no process under kvremap with a KV cache runs now"), std::string::npos) << status.out;
}

TEST(Metrics, StatusListsTheServingProcessesWithTheirKv) {
  const std::string dir = make_temp_dir();
  const std::string file = dir + "/kvremap.prom";
  std::vector<std::string> env = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO, 2);
  env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_METRICS_FILE=" + file, "KVREMAP_TRACE=0",
                         "KVREMAP_PROFILE_DIR=" + make_temp_dir(), "VLLM_LIKE_KEEP_SERVING=1", "KVREMAP=" KVREMAP_CLI});
  // The replica serves on in the background; once both ranks serve, status runs (without LD_PRELOAD) and the
  // server is stopped. The waiting is bounded by counting, not by the clock alone.
  std::string script = "\"$@\" & server=$!\n"
                       "for i in $(seq 600); do [ \"$(grep -c 'phase=\"serving\"' \"$METRICS\" 2>/dev/null)\" = 2 ] && break; "
                       "sleep 0.1; done\n"
                       "env -u LD_PRELOAD \"$KVREMAP\" status --metrics-file \"$METRICS\"; status=$?\n"
                       "kill -TERM $server; wait $server; exit $status\n";
  env.push_back("METRICS=" + file);
  std::vector<std::string> argv = {"/bin/sh", "-c", script, "sh"};
  for (const std::string& a : replica(link_as(VLLM_LIKE, "vllm"))) argv.push_back(a);
  const RunResult r = run_program(argv, env, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PHASE"), std::string::npos) << r.out;
  // One row per rank (the replica's own lines on the same stdout never hold its title).
  std::size_t rows = 0;
  for (std::size_t at = r.out.find("VLLM::EngineCore"); at != std::string::npos;
       at = r.out.find("VLLM::EngineCore", at + 1))
    ++rows;
  EXPECT_EQ(rows, 2u) << r.out;
  EXPECT_NE(r.out.find("  serving  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("22.59 GiB"), std::string::npos) << r.out;
}
