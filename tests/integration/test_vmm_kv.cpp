// KV the engine maps itself (kv_vmm.h): every call taking its handle answered as the driver would, through LD_PRELOAD.
#include <gtest/gtest.h>

#include <cstdint>
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

// cuda_program `mode` (vmm-kv-handles, vmm-kv-edges, vmm-kv-host-tail) on two simulated devices of
// `device_memory` each, named as vLLM (graphs expected, so no kernel launch commits the deferred KV: the calls
// taking its handle must).
HandlesRun run_handles(bool preload, const std::string& mode = "vmm-kv-handles",
                       const std::string& device_memory = "8GiB") {
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = {"SIMCUDA_DEVICE_COUNT=2",   "SIMCUDA_DEVICE_MEMORY=" + device_memory,
                                  "KVREMAP_ENGINE=vllm",      "KVREMAP_MODE=defer",
                                  "KVREMAP_TRACE_DIR=" + dir, "KVREMAP_PROFILE_DIR=" + dir + "/profiles"};
  std::vector<std::string> unset;
  if (preload) {
    env.push_back("LD_PRELOAD=" KVREMAP_PRELOAD);
  } else {
    unset.push_back("LD_PRELOAD");
  }
  HandlesRun r;
  r.run = run_program({CUDA_PROGRAM, mode}, env, unset, 60);
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

// The mapping's edges: part of it unmapped is refused and it stays whole; a second mapping of its handle
// elsewhere commits first and sees the same memory; unmapped while deferred and mapped again, the handle
// gives usable memory. The same program passes on the driver alone.
TEST(VmmKv, TheEdgesOfAnAdoptedMappingAreAnsweredAsTheDriverWould) {
  const HandlesRun stock = run_handles(false, "vmm-kv-edges");
  EXPECT_EQ(stock.run.exit_code, 0) << stock.run.out << stock.run.err;
  EXPECT_EQ(stock.run.out.find("FAILED"), std::string::npos) << stock.run.out;
  const HandlesRun r = run_handles(true, "vmm-kv-edges");
  EXPECT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  EXPECT_EQ(r.run.out.find("FAILED"), std::string::npos) << r.run.out;
  ASSERT_EQ(r.traces.size(), 1u) << r.run.err;
  const auto* deferred = r.event("kv deferred");
  ASSERT_NE(deferred, nullptr) << r.run.err;
  EXPECT_EQ(deferred->args.at("regions").get<int>(), 2);
  const auto* committed = r.event("kv committed");
  ASSERT_NE(committed, nullptr) << r.run.err;
  EXPECT_EQ(committed->args.at("call").get<std::string>(), "cuMemMap") << "the second mapping commits";
}

// A tensor the commit could place only partly on the device (its end on host memory, a second handle): no
// single driver handle stands for it, so its export is refused with one line naming why — never a handle to
// part of it — and the tensor stays usable. Without kvremap the same export succeeds.
TEST(VmmKv, AnExportOfATensorWithAHostTailIsRefusedWithOneLine) {
  const HandlesRun stock = run_handles(false, "vmm-kv-host-tail", "1GiB");
  EXPECT_EQ(stock.run.exit_code, 0) << stock.run.out << stock.run.err;
  EXPECT_NE(stock.run.out.find("export: CUDA_SUCCESS"), std::string::npos) << stock.run.out;
  const HandlesRun r = run_handles(true, "vmm-kv-host-tail", "1GiB");
  EXPECT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  EXPECT_EQ(r.run.out.find("FAILED"), std::string::npos) << r.run.out;
  EXPECT_NE(r.run.out.find("export: CUDA_ERROR_NOT_SUPPORTED"), std::string::npos) << r.run.out << r.run.err;
  EXPECT_NE(r.run.err.find("no single driver handle stands for it"), std::string::npos) << r.run.err;
  ASSERT_EQ(r.traces.size(), 1u);
  const auto* committed = r.event("kv committed");
  ASSERT_NE(committed, nullptr) << r.run.err;
  EXPECT_GT(committed->args.at("host_bytes").get<std::uint64_t>(), 0u);
}

}  // namespace
