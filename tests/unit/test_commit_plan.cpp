// Unit tests for policy/commit_plan: device, host tail or failure, the margin, and the fix-it message.
#include "policy/commit_plan.h"

#include <gtest/gtest.h>

using namespace kvremap::policy;

namespace {
constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

CommitInputs seed(std::uint64_t free_bytes) {
  CommitInputs in;
  in.kv_bytes = 20 * kGiB;
  in.chunk_bytes = 512 * kMiB;
  in.device_free_bytes = free_bytes;
  in.device_total_bytes = 80 * kGiB;
  in.headroom_bytes = 1 * kGiB;
  in.host_vmm_supported = true;
  return in;
}
}  // namespace

TEST(CommitPlan, EverythingOnTheDeviceWhenKvAndHeadroomFit) {
  const CommitPlan p = plan_commit(seed(24 * kGiB));
  EXPECT_EQ(p.verdict, CommitVerdict::all_device);
  EXPECT_EQ(p.device_chunks, 40u);
  EXPECT_EQ(p.host_chunks, 0u);
  EXPECT_EQ(p.margin_bytes, static_cast<std::int64_t>(3 * kGiB)) << "the surplus the next start may hand back";
  EXPECT_EQ(p.deficit_bytes, 0u);
}

TEST(CommitPlan, ExactFitIsStillAllDevice) {
  const CommitPlan p = plan_commit(seed(21 * kGiB));
  EXPECT_EQ(p.verdict, CommitVerdict::all_device);
  EXPECT_EQ(p.margin_bytes, 0);
}

TEST(CommitPlan, ADeficitPutsTheTailOnHostMemoryInWholeChunks) {
  // 19.75 GiB usable on the device: 39 whole chunks there, 1 on the host.
  const CommitPlan p = plan_commit(seed(20 * kGiB + 768 * kMiB));
  EXPECT_EQ(p.verdict, CommitVerdict::host_tail);
  EXPECT_EQ(p.device_chunks, 39u);
  EXPECT_EQ(p.host_chunks, 1u);
  EXPECT_EQ(p.deficit_bytes, 256 * kMiB);
  EXPECT_EQ(p.margin_bytes, -static_cast<std::int64_t>(256 * kMiB));
  EXPECT_NE(p.message.find("1 of 40 chunks on host memory"), std::string::npos) << p.message;
}

TEST(CommitPlan, FailModeOrNoHostTierGivesTheExactFix) {
  CommitInputs in = seed(18 * kGiB);  // 3 GiB short with the headroom
  in.gpu_memory_utilization = 0.95;
  in.deficit_mode = DeficitMode::fail;
  CommitPlan p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::fail);
  EXPECT_EQ(p.deficit_bytes, 3 * kGiB);
  // 17 GiB of KV fits; 0.95 - 3/80 = 0.9125 -> 0.91.
  EXPECT_NE(p.message.find("3.00 GiB missing"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("--kv-cache-memory " + std::to_string(17 * kGiB)), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("--gpu-memory-utilization 0.91"), std::string::npos) << p.message;

  in.deficit_mode = DeficitMode::host;
  in.host_vmm_supported = false;
  p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::fail);
  EXPECT_NE(p.message.find("no host memory tier"), std::string::npos) << p.message;
}

TEST(CommitPlan, NoFreeMemoryAtAllMeansNoDeviceChunks) {
  const CommitPlan p = plan_commit(seed(512 * kMiB));  // less than the headroom
  EXPECT_EQ(p.verdict, CommitVerdict::host_tail);
  EXPECT_EQ(p.device_chunks, 0u);
  EXPECT_EQ(p.host_chunks, 40u);
}

TEST(CommitPlan, APartialLastChunkCounts) {
  CommitInputs in = seed(30 * kGiB);
  in.kv_bytes = 20 * kGiB + 2 * kMiB;
  EXPECT_EQ(plan_commit(in).device_chunks, 41u);
  in.kv_bytes = 0;
  const CommitPlan none = plan_commit(in);
  EXPECT_EQ(none.verdict, CommitVerdict::all_device);
  EXPECT_EQ(none.device_chunks, 0u);
}

TEST(CommitPlan, UtilisationIsReadFromTheEngineCommandLine) {
  EXPECT_EQ(gpu_memory_utilization_from("vllm serve m --gpu-memory-utilization 0.95 --tp 8"), 0.95);
  EXPECT_EQ(gpu_memory_utilization_from("python -m vllm --gpu-memory-utilization=0.9"), 0.9);
  EXPECT_FALSE(gpu_memory_utilization_from("vllm serve m"));
  EXPECT_FALSE(gpu_memory_utilization_from("vllm --gpu-memory-utilization lots"));
  EXPECT_FALSE(gpu_memory_utilization_from("vllm --gpu-memory-utilizationx 0.9"));
}
