// Unit tests for policy/commit_plan: device, host share at every tensor's end or failure, the margin, and the hints.
#include "policy/commit_plan.h"
#include "policy/vllm_model.h"

#include <gtest/gtest.h>

#include <string>

using namespace kvremap::policy;

namespace {
constexpr std::uint64_t kGiB = 1ULL << 30;
constexpr std::uint64_t kMiB = 1ULL << 20;

// 40 tensors of 512 MiB (20 GiB of KV) on an 80 GiB device, 1 GiB headroom, 2 MiB granularity.
CommitInputs seed(std::uint64_t free_bytes) {
  CommitInputs in;
  in.tensor_bytes.assign(40, 512 * kMiB);
  in.granularity = 2 * kMiB;
  in.chunk_bytes = 512 * kMiB;
  in.device_free_bytes = free_bytes;
  in.device_total_bytes = 80 * kGiB;
  in.headroom_bytes = 1 * kGiB;
  in.host_vmm_supported = true;
  return in;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST(CommitPlan, EverythingOnTheDeviceWhenKvAndHeadroomFit) {
  const CommitPlan p = plan_commit(seed(24 * kGiB));
  EXPECT_EQ(p.verdict, CommitVerdict::all_device);
  EXPECT_EQ(p.kv_bytes, 20 * kGiB);
  EXPECT_EQ(p.device_bytes, 20 * kGiB);
  EXPECT_EQ(p.host_bytes, 0u);
  EXPECT_EQ(p.host_bytes_per_tensor, 0u);
  ASSERT_EQ(p.tensors.size(), 40u);
  for (const TensorSplit& t : p.tensors) {
    EXPECT_EQ(t.device_bytes, 512 * kMiB);
    EXPECT_EQ(t.host_bytes, 0u);
  }
  EXPECT_EQ(p.margin_bytes, static_cast<std::int64_t>(3 * kGiB)) << "the surplus the next start may hand back";
  EXPECT_EQ(p.deficit_bytes, 0u);
  EXPECT_FALSE(has(p.message, "kvremap")) << "no transient, nothing to suggest: " << p.message;
}

TEST(CommitPlan, ExactFitIsStillAllDevice) {
  const CommitPlan p = plan_commit(seed(21 * kGiB));
  EXPECT_EQ(p.verdict, CommitVerdict::all_device);
  EXPECT_EQ(p.margin_bytes, 0);
}

TEST(CommitPlan, TheDeficitGoesToTheEndOfEveryTensorRoundedUpToTheGranularity) {
  // 256 MiB short: 6.4 MiB per tensor, 8 MiB with the 2 MiB granularity, on each of the 40.
  const CommitPlan p = plan_commit(seed(20 * kGiB + 768 * kMiB));
  EXPECT_EQ(p.verdict, CommitVerdict::host_tail);
  EXPECT_EQ(p.deficit_bytes, 256 * kMiB);
  EXPECT_EQ(p.margin_bytes, -static_cast<std::int64_t>(256 * kMiB));
  EXPECT_EQ(p.host_bytes_per_tensor, 8 * kMiB);
  EXPECT_EQ(p.host_bytes, 40 * 8 * kMiB);
  EXPECT_EQ(p.device_bytes, 20 * kGiB - 320 * kMiB);
  for (const TensorSplit& t : p.tensors) {
    EXPECT_EQ(t.host_bytes, 8 * kMiB);
    EXPECT_EQ(t.device_bytes, 504 * kMiB);
  }
  EXPECT_TRUE(has(p.message, "the last 8.00 MiB of each of 40 tensors")) << p.message;
}

// vLLM >= 0.29's KV cache is one allocation: the deficit is its end, and the plan says what that is.
TEST(CommitPlan, TheHostPartOfAOneAllocationKvCacheIsItsEnd) {
  CommitInputs in = seed(20 * kGiB + 768 * kMiB);
  in.tensor_bytes = {20 * kGiB};
  const CommitPlan p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::host_tail);
  ASSERT_EQ(p.tensors.size(), 1u);
  EXPECT_EQ(p.tensors[0].host_bytes, 256 * kMiB);
  EXPECT_EQ(p.tensors[0].device_bytes, 20 * kGiB - 256 * kMiB);
  EXPECT_TRUE(has(p.message,
                  "the last 256.00 MiB of the one KV allocation (with a layer-major layout as vLLM's, "
                  "whole last layers that every forward pass reads from host memory)"))
      << p.message;
}

TEST(CommitPlan, AnExactMultipleNeedsNoRounding) {
  const CommitPlan p = plan_commit(seed(20 * kGiB + kGiB - 80 * kMiB));  // 80 MiB short: 2 MiB each
  EXPECT_EQ(p.host_bytes, 80 * kMiB);
  EXPECT_EQ(p.host_bytes_per_tensor, 2 * kMiB);
  // Without a granularity the share is byte-exact: ceil(80 MiB + 1 / 40).
  CommitInputs in = seed(20 * kGiB + kGiB - 80 * kMiB - 1);
  in.granularity = 0;
  const CommitPlan q = plan_commit(in);
  EXPECT_EQ(q.host_bytes_per_tensor, 2 * kMiB + 1);
  EXPECT_GE(q.host_bytes, q.deficit_bytes);
}

TEST(CommitPlan, UnequalTensorsSpreadWhatASmallOneCannotHoldOverTheOthers) {
  CommitInputs in = seed(0);
  in.tensor_bytes = {4 * kMiB, 64 * kMiB, 64 * kMiB};
  in.headroom_bytes = 0;
  in.device_free_bytes = 132 * kMiB - 60 * kMiB;  // 60 MiB short: 20 each, but the small one holds 4
  const CommitPlan p = plan_commit(in);
  ASSERT_EQ(p.verdict, CommitVerdict::host_tail);
  EXPECT_EQ(p.tensors[0].host_bytes, 4 * kMiB);
  EXPECT_EQ(p.tensors[1].host_bytes, 28 * kMiB);
  EXPECT_EQ(p.tensors[2].host_bytes, 28 * kMiB);
  EXPECT_EQ(p.host_bytes, 60 * kMiB);
  EXPECT_EQ(p.host_bytes_per_tensor, 28 * kMiB);
  EXPECT_EQ(p.device_bytes + p.host_bytes, p.kv_bytes);
}

TEST(CommitPlan, NoFreeMemoryAtAllPutsEverythingOnHost) {
  const CommitPlan p = plan_commit(seed(512 * kMiB));  // less than the headroom
  EXPECT_EQ(p.verdict, CommitVerdict::host_tail);
  EXPECT_EQ(p.device_bytes, 0u);
  EXPECT_EQ(p.host_bytes, 20 * kGiB);
  EXPECT_EQ(p.host_bytes_per_tensor, 512 * kMiB) << "never more than the tensor";
}

TEST(CommitPlan, NoTensorsIsAllDeviceWithNothing) {
  CommitInputs in = seed(30 * kGiB);
  in.tensor_bytes.clear();
  const CommitPlan none = plan_commit(in);
  EXPECT_EQ(none.verdict, CommitVerdict::all_device);
  EXPECT_EQ(none.kv_bytes, 0u);
  EXPECT_TRUE(none.tensors.empty());
}

TEST(CommitPlan, FailIsOneLineWithTheExactMissingBytes) {
  CommitInputs in = seed(18 * kGiB);  // 3 GiB short with the headroom
  in.engine = EngineKind::vllm;
  in.gpu_memory_utilization = 0.95;
  in.deficit_mode = DeficitMode::fail;
  CommitPlan p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::fail);
  EXPECT_EQ(p.deficit_bytes, 3 * kGiB);
  EXPECT_EQ(p.host_bytes, 0u);
  EXPECT_EQ(p.message.find('\n'), std::string::npos);
  EXPECT_TRUE(has(p.message, "the KV cache (20.00 GiB) does not fit: 3.00 GiB missing on the device (" +
                                 std::to_string(3 * kGiB) + " bytes, with 1.00 GiB headroom of 18.00 GiB free)"))
      << p.message;
  // 17 GiB of KV fits; 0.95 - 3/80 = 0.9125 -> 0.91.
  EXPECT_TRUE(has(p.message,
                  "next start under kvremap: --gpu-memory-utilization 0.91; without kvremap: "
                  "--gpu-memory-utilization 0.91 or --kv-cache-memory " +
                      std::to_string(17 * kGiB)))
      << p.message;

  in.deficit_mode = DeficitMode::host;
  in.host_vmm_supported = false;
  p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::fail);
  EXPECT_TRUE(has(p.message, "no host memory tier")) << p.message;
}

// vLLM: KV = total * utilisation - the rest, so the utilisation drops by shrink / total.
TEST(CommitPlanHints, VllmUnderAndWithoutKvremapDifferByTheTransient) {
  CommitInputs in = seed(18 * kGiB);  // 3 GiB short
  in.engine = EngineKind::vllm;
  in.gpu_memory_utilization = 0.95;
  in.post_kv_transient_bytes = 8 * kGiB;  // stock also needed 8 GiB beside its KV: 11 GiB less
  const std::string hint = next_start_hint(in, -static_cast<std::int64_t>(3 * kGiB));
  // Under kvremap only the utilisation: --kv-cache-memory would take vLLM's sizing query away.
  EXPECT_EQ(hint,
            "next start under kvremap: --gpu-memory-utilization 0.91; without kvremap: "
            "--gpu-memory-utilization 0.81 or --kv-cache-memory " +
                std::to_string(9 * kGiB));
  EXPECT_TRUE(has(plan_commit(in).message, hint));
}

TEST(CommitPlanHints, VllmWithoutAUtilisationFlagStartsFromItsDefaultAndKvCacheMemoryWins) {
  CommitInputs in = seed(0);
  in.engine = EngineKind::vllm;
  // 4 GiB of 80 = 0.05: 0.92 - 0.05 = 0.87 exactly, not 0.86.
  EXPECT_EQ(next_start_hint(in, -static_cast<std::int64_t>(4 * kGiB)),
            "next start under kvremap: --gpu-memory-utilization 0.87 (from the default 0.92); without kvremap: "
            "--gpu-memory-utilization 0.87 (from the default 0.92) or --kv-cache-memory " +
                std::to_string(16 * kGiB));
  in.kv_cache_memory = 20 * kGiB;
  EXPECT_EQ(next_start_hint(in, -static_cast<std::int64_t>(4 * kGiB)),
            "next start under kvremap: --gpu-memory-utilization in place of --kv-cache-memory (with it vLLM takes "
            "no memory query after its weights, and kvremap defers nothing); without kvremap: --kv-cache-memory " +
                std::to_string(16 * kGiB));
}

// SGLang: KV = free after weights - (1 - fraction) * total, linear in the fraction the same way.
TEST(CommitPlanHints, SglangNamesMemFractionStatic) {
  CommitInputs in = seed(0);
  in.engine = EngineKind::sglang;
  in.mem_fraction_static = 0.88;
  in.post_kv_transient_bytes = 2 * kGiB;
  // Under kvremap: 0.88 - 1/80 = 0.8675 -> 0.86; without: 0.88 - 3/80 = 0.8425 -> 0.84.
  EXPECT_EQ(next_start_hint(in, -static_cast<std::int64_t>(kGiB)),
            "next start under kvremap: --mem-fraction-static 0.86; without kvremap: --mem-fraction-static 0.84");
  in.mem_fraction_static.reset();  // SGLang chose its own: say how far to lower it, rounded up
  EXPECT_EQ(next_start_hint(in, -static_cast<std::int64_t>(kGiB)),
            "next start under kvremap: --mem-fraction-static 0.02 lower; without kvremap: --mem-fraction-static "
            "0.04 lower");
}

TEST(CommitPlanHints, OtherEnginesGetTheKvBytesThatFitAndBothEnginesForms) {
  CommitInputs in = seed(0);
  const std::string hint = next_start_hint(in, -static_cast<std::int64_t>(2 * kGiB));
  EXPECT_EQ(hint, "next start under kvremap: a KV cache of " + std::to_string(18 * kGiB) +
                      " bytes (18.00 GiB) fits: vLLM --gpu-memory-utilization 0.89 (from the default 0.92); SGLang "
                      "--mem-fraction-static 0.03 lower; without kvremap: a KV cache of " +
                      std::to_string(18 * kGiB) +
                      " bytes (18.00 GiB) fits: vLLM --gpu-memory-utilization 0.89 (from the default 0.92) or "
                      "--kv-cache-memory " +
                      std::to_string(18 * kGiB) + "; SGLang --mem-fraction-static 0.03 lower");
}

TEST(CommitPlanHints, ASurplusUnderKvremapCanStillBeADeficitWithoutIt) {
  CommitInputs in = seed(24 * kGiB);  // 3 GiB to spare
  in.engine = EngineKind::vllm;
  in.gpu_memory_utilization = 0.95;
  EXPECT_EQ(next_start_hint(in, 3 * static_cast<std::int64_t>(kGiB)), "") << "nothing to change";
  in.post_kv_transient_bytes = 5 * kGiB;  // stock would have been 2 GiB short
  const CommitPlan p = plan_commit(in);
  EXPECT_EQ(p.verdict, CommitVerdict::all_device);
  EXPECT_TRUE(has(p.message, "a start without kvremap needs --gpu-memory-utilization 0.92 or --kv-cache-memory " +
                                 std::to_string(18 * kGiB)))
      << p.message;
}

TEST(CommitPlan, UtilisationIsReadFromTheEngineCommandLine) {
  EXPECT_EQ(gpu_memory_utilization_from("vllm serve m --gpu-memory-utilization 0.95 --tp 8"), 0.95);
  EXPECT_EQ(gpu_memory_utilization_from("python -m vllm --gpu-memory-utilization=0.9"), 0.9);
  EXPECT_FALSE(gpu_memory_utilization_from("vllm serve m"));
  EXPECT_FALSE(gpu_memory_utilization_from("vllm --gpu-memory-utilization lots"));
  EXPECT_FALSE(gpu_memory_utilization_from("vllm --gpu-memory-utilizationx 0.9"));
}

// A headroom beyond any device (2^63 bytes and more) is a deficit of the whole cache, never a
// wrapped negative headroom that makes everything fit.
TEST(CommitPlan, HugeHeadroomSaturatesInsteadOfWrapping) {
  for (std::uint64_t headroom : {std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    CommitInputs in = seed(30 * kGiB);
    in.headroom_bytes = headroom;
    const CommitPlan plan = plan_commit(in);
    EXPECT_NE(plan.verdict, CommitVerdict::all_device) << headroom;
    EXPECT_LT(plan.margin_bytes, 0) << headroom;
  }
}

TEST(CommitPlan, VerdictsHaveTheTracesNames) {
  EXPECT_EQ(to_string(CommitVerdict::all_device), "all_device");
  EXPECT_EQ(to_string(CommitVerdict::host_tail), "host_tail");
  EXPECT_EQ(to_string(CommitVerdict::fail), "fail");
}

// While deferred, a query reports what would be free with the KV cache backed: the scratch stands
// in for the deferred bytes, so only the rest is hidden; below nothing is 0 and the shortfall.
TEST(CommitPlan, FreeWhileDeferredHidesTheKvBeyondTheScratch) {
  constexpr std::uint64_t kMiB = 1ull << 20;
  EXPECT_EQ(free_while_deferred(10'000 * kMiB, 4'000 * kMiB, 64 * kMiB).free_bytes, 6'064 * kMiB);
  EXPECT_EQ(free_while_deferred(10'000 * kMiB, 4'000 * kMiB, 64 * kMiB).short_bytes, 0u);
  const FreeWhileDeferred below = free_while_deferred(1'000 * kMiB, 4'000 * kMiB, 64 * kMiB);
  EXPECT_EQ(below.free_bytes, 0u);
  EXPECT_EQ(below.short_bytes, 2'936 * kMiB);
  EXPECT_EQ(free_while_deferred(500, 32, 64).free_bytes, 500u) << "less KV than scratch hides nothing";
  EXPECT_EQ(free_while_deferred(3'936 * kMiB, 4'000 * kMiB, 64 * kMiB).free_bytes, 0u);
  EXPECT_EQ(free_while_deferred(3'936 * kMiB, 4'000 * kMiB, 64 * kMiB).short_bytes, 0u);
}
