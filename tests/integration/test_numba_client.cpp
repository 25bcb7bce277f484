// Numba's CUDA driver binding (Debian's python3-numba), a real third-party driver client, on the simulated driver
// with and without kvremap: it initialises, queries, allocates, copies and frees, and the trace's bytes match.
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

constexpr std::uint64_t kMiB = 1ULL << 20;
// What numba_client.py allocates on the device: 3, 5 and 7 MiB arrays and a 4 KiB copy of a pinned array.
constexpr std::uint64_t kAllocated = 15 * kMiB + 4096;
const std::string kTotal = std::to_string(4ULL << 30);

std::vector<std::string> environment() {
  return {"NUMBA_CUDA_DRIVER=" SIMCUDA_DRIVER, "SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0",
          // Numba caches nothing here: a fresh directory keeps a user's cache out of the test.
          "NUMBA_CACHE_DIR=" + make_temp_dir()};
}

RunResult run_client(const std::vector<std::string>& extra, const std::string& cwd) {
  std::vector<std::string> env = environment();
  env.insert(env.end(), extra.begin(), extra.end());
  // Debian's interpreter: Debian's numba is installed for it, not for a pyenv python3 earlier on PATH.
  return run_program({"/usr/bin/python3", NUMBA_CLIENT, kTotal}, env, {"LD_PRELOAD"}, 120, 9, cwd);
}

}  // namespace

TEST(NumbaClient, RunsOnTheSimulatedDriver) {
  const RunResult r = run_client({}, make_temp_dir());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("numba-client: ok allocated=" + std::to_string(kAllocated)), std::string::npos) << r.out;
  // Every call numba made is simulated: no "not simulated" line.
  EXPECT_EQ(r.err.find("is not simulated"), std::string::npos) << r.err;
}

TEST(NumbaClient, RunsUnderKvremapAndTheTraceCountsItsBytes) {
  const std::string dir = make_temp_dir();
  const RunResult r = run_client({"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("numba-client: ok allocated=" + std::to_string(kAllocated)), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("is not simulated"), std::string::npos) << r.err;
  const std::vector<std::string> files = trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  const kvremap::trace::Trace trace = kvremap::trace::read_trace(files[0]);
  ASSERT_TRUE(trace.summary) << "a clean exit writes a summary";
  ASSERT_FALSE(trace.summary->devices.empty());
  std::uint64_t allocated = 0, live = 0, allocations = 0, frees = 0;
  for (const auto& [name, c] : trace.summary->devices.front().categories) {
    allocated += c.allocated_bytes;
    live += c.live_bytes;
    allocations += c.allocations;
    frees += c.frees;
  }
  EXPECT_EQ(allocated, kAllocated);
  EXPECT_EQ(allocations, 4u);
  EXPECT_EQ(frees, 4u);
  EXPECT_EQ(live, 0u) << "numba freed everything it allocated";
}
