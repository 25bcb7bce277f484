// The per-family driver-API clients (api_families.cpp) with and without kvremap: each passes its checks, and under
// kvremap the trace counts exactly the device bytes the client allocated and freed.
#include <gtest/gtest.h>

#include <ostream>
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

struct Family {
  const char* name;
  std::uint64_t allocated;  // device bytes the client allocates (and frees)
  std::size_t allocations;
};

const Family kFamilies[] = {
    {"events", 3 * kMiB, 1}, {"streams", 5 * kMiB, 1}, {"ipc", 7 * kMiB, 1},
    {"copies", 4 * kMiB, 2}, {"host", 1 * kMiB, 1},  {"pools", 3 * kMiB, 2},
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

class ApiFamily : public ::testing::TestWithParam<Family> {};

const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0"};

}  // namespace

TEST_P(ApiFamily, PassesOnTheSimulatedDriver) {
  const Family& f = GetParam();
  const RunResult r = run_program({API_FAMILIES, f.name}, kSimulator, {"LD_PRELOAD"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(std::string(f.name) + " ok allocated=" + std::to_string(f.allocated)), std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("is not simulated"), std::string::npos) << r.err;
}

TEST_P(ApiFamily, PassesUnderKvremapAndTheTraceCountsItsBytes) {
  const Family& f = GetParam();
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = kSimulator;
  env.push_back("LD_PRELOAD=" KVREMAP_PRELOAD);
  env.push_back("KVREMAP_TRACE_DIR=" + dir);
  const RunResult r = run_program({API_FAMILIES, f.name}, env, {}, 60, 9, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(std::string(f.name) + " ok"), std::string::npos) << r.out;
  // The ipc client's forked child writes a trace of its own (it allocates nothing): the parent's has the bytes.
  std::uint64_t allocated = 0, live = 0, allocations = 0, frees = 0;
  const std::vector<std::string> files = trace_files(dir);
  ASSERT_GE(files.size(), 1u);
  for (const std::string& file : files) {
    const kvremap::trace::Trace trace = kvremap::trace::read_trace(file);
    ASSERT_TRUE(trace.summary) << file;
    for (const auto& device : trace.summary->devices)
      for (const auto& [name, c] : device.categories) {
        allocated += c.allocated_bytes;
        live += c.live_bytes;
        allocations += c.allocations;
        frees += c.frees;
      }
  }
  EXPECT_EQ(allocated, f.allocated);
  EXPECT_EQ(allocations, f.allocations);
  EXPECT_EQ(frees, f.allocations);
  EXPECT_EQ(live, 0u);
}

INSTANTIATE_TEST_SUITE_P(Families, ApiFamily, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& info) { return std::string(info.param.name); });
