// KV the engine maps itself (kv_vmm.h): every call taking its handle answered as the driver would, through LD_PRELOAD.
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

struct HandlesRun {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
  const kvremap::trace::OtherEvent* event(const std::string& name) const {
    for (const auto& t : traces)
      for (const auto& e : t.other_events)
        if (e.name == name) return &e;
    return nullptr;
  }
};

// cuda_program vmm-kv-handles on two simulated devices, named as vLLM (graphs expected, so no kernel launch
// commits the deferred KV: the calls taking its handle must).
HandlesRun run_handles(bool preload) {
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = {"SIMCUDA_DEVICE_COUNT=2",   "SIMCUDA_DEVICE_MEMORY=8GiB",
                                  "KVREMAP_ENGINE=vllm",      "KVREMAP_MODE=defer",
                                  "KVREMAP_TRACE_DIR=" + dir, "KVREMAP_PROFILE_DIR=" + dir + "/profiles"};
  std::vector<std::string> unset;
  if (preload) {
    env.push_back("LD_PRELOAD=" KVREMAP_PRELOAD);
  } else {
    unset.push_back("LD_PRELOAD");
  }
  HandlesRun r;
  r.run = run_program({CUDA_PROGRAM, "vmm-kv-handles"}, env, unset, 60);
  for (const std::string& file : trace_files(dir)) r.traces.push_back(kvremap::trace::read_trace(file));
  return r;
}

TEST(VmmKv, TheHandleChecksPassOnTheDriverAlone) {
  const HandlesRun r = run_handles(false);
  EXPECT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  EXPECT_EQ(r.run.out.find("FAILED"), std::string::npos) << r.run.out;
}

// Deferred, then asked for its properties and retained (neither commits: they expose no backing), then
// exported (which commits first and hands out the committed memory's handle): every answer as the driver
// gives it for the engine's own handle, device 1's grant replayed, releases counted as the driver counts them.
TEST(VmmKv, EveryCallTakingTheHandleIsAnsweredAsTheDriverWouldAndTheExportCommitsFirst) {
  const HandlesRun r = run_handles(true);
  EXPECT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  EXPECT_EQ(r.run.out.find("FAILED"), std::string::npos) << r.run.out;
  ASSERT_EQ(r.traces.size(), 1u) << r.run.err;
  const auto* deferred = r.event("kv deferred");
  ASSERT_NE(deferred, nullptr) << r.run.err;
  EXPECT_EQ(deferred->args.at("regions").get<int>(), 1);
  const auto* committed = r.event("kv committed");
  ASSERT_NE(committed, nullptr) << r.run.err;
  EXPECT_EQ(committed->args.at("call").get<std::string>(), "cuMemExportToShareableHandle");
}

}  // namespace
