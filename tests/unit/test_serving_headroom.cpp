// The serving headroom: SGLang's prefill estimate from its flags, and the measured or learned need that replaces it.
#include "policy/serving_headroom.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "policy/engine.h"
#include "policy/sglang_model.h"

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

EngineProfile sglang(std::vector<std::string> flags) {
  std::vector<std::string> argv = {"python3", "-m", "sglang.launch_server"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return profile_engine(argv);
}

}  // namespace

// server_args.py:3431-3488: the chunk follows the device's memory when not given.
TEST(SglangModel, TheDefaultChunkFollowsTheDevicesMemory) {
  EXPECT_EQ(sglang_default_chunked_prefill(24 * kGiB), 2048u);
  EXPECT_EQ(sglang_default_chunked_prefill(40 * kGiB), 4096u);
  EXPECT_EQ(sglang_default_chunked_prefill(79 * kGiB), 8192u);
  EXPECT_EQ(sglang_default_chunked_prefill(139 * kGiB), 8192u);
  EXPECT_EQ(sglang_default_chunked_prefill(179 * kGiB), 16384u);
}

// server_args.py:3568-3571: 1.5 MiB per token of the chunk, or of --max-prefill-tokens with chunking off,
// at least 2048 tokens.
TEST(SglangModel, ThePrefillEstimateIsOnePointFiveMiBPerTokenOfItsBatch) {
  const SglangPrefillEstimate by_default = sglang_prefill_estimate(sglang({}), 79 * kGiB);
  EXPECT_EQ(by_default.tokens, 8192u);
  EXPECT_EQ(by_default.bytes, 12 * kGiB);
  EXPECT_EQ(by_default.basis, "--chunked-prefill-size 8192, its default on a 79.00 GiB device");
  EXPECT_EQ(sglang_prefill_estimate(sglang({"--chunked-prefill-size", "4096"}), 79 * kGiB).bytes, 6 * kGiB);
  EXPECT_EQ(sglang_prefill_estimate(sglang({"--chunked-prefill-size=512"}), 79 * kGiB).bytes, 3 * kGiB)
      << "at least 2048 tokens";
  const SglangPrefillEstimate off = sglang_prefill_estimate(sglang({"--chunked-prefill-size", "-1"}), 79 * kGiB);
  EXPECT_EQ(off.tokens, 16384u);
  EXPECT_EQ(off.bytes, 24 * kGiB);
  EXPECT_EQ(off.basis, "--max-prefill-tokens 16384, chunked prefill off");
  EXPECT_EQ(
      sglang_prefill_estimate(sglang({"--chunked-prefill-size", "0", "--max-prefill-tokens", "4Ki"}), 79 * kGiB).bytes,
      6 * kGiB);
  EXPECT_EQ(
      sglang_prefill_estimate(sglang({"--chunked-prefill-size", "-1", "--max-prefill-tokens", "8k"}), 79 * kGiB).tokens,
      8000u);
  // A value SGLang would refuse or kvremap cannot read: SGLang's default stands in.
  EXPECT_EQ(sglang_prefill_estimate(sglang({"--chunked-prefill-size", "many"}), 79 * kGiB).tokens, 8192u);
}

// The estimate only where the deferral carried the start-up (its share unproven by any start), and only
// until serving was measured.
TEST(ServingHeadroom, SglangKeepsItsEstimateUntilServingWasMeasured) {
  HeadroomInputs in;
  in.engine = EngineKind::sglang;
  in.floor_bytes = 512 * kMiB;
  in.sglang_reserve_bytes = 1 * kGiB;
  in.sglang_prefill_estimate_bytes = 12 * kGiB;
  in.sglang_prefill_basis = "--chunked-prefill-size 8192";
  EXPECT_EQ(serving_headroom(in).bytes, 1 * kGiB) << "a start that passed start-up without the deferral";
  in.deferral_carried_start_up = true;
  const Headroom first = serving_headroom(in);
  EXPECT_EQ(first.bytes, 12 * kGiB);
  EXPECT_EQ(first.measured_bytes, 1 * kGiB);
  EXPECT_EQ(first.source, "SGLang's prefill estimate (1.5 MiB per token of --chunked-prefill-size 8192)");
  in.learned_serving_bytes = 3 * kGiB;
  const Headroom learned = serving_headroom(in);
  EXPECT_EQ(learned.bytes, 3 * kGiB);
  EXPECT_EQ(learned.measured_bytes, 3 * kGiB);
  EXPECT_EQ(learned.source, "serving need learned by the profile");
  in.sglang_reserve_bytes = 4 * kGiB;  // the reserve the user's share leaves is more: it stands
  EXPECT_EQ(serving_headroom(in).bytes, 4 * kGiB);
  EXPECT_EQ(serving_headroom(in).source, "SGLang's activation reserve");
}

TEST(ServingHeadroom, VllmKeepsItsProfiledPeakOrWhatServingNeededWhereMore) {
  HeadroomInputs in;
  in.engine = EngineKind::vllm;
  in.floor_bytes = 512 * kMiB;
  in.profiled_peak_bytes = 3 * kGiB;
  in.sglang_prefill_estimate_bytes = 40 * kGiB;  // not SGLang: ignored
  EXPECT_EQ(serving_headroom(in).bytes, 3 * kGiB);
  EXPECT_EQ(serving_headroom(in).source, "profiled activation peak");
  in.learned_serving_bytes = 5 * kGiB;
  EXPECT_EQ(serving_headroom(in).bytes, 5 * kGiB);
  EXPECT_EQ(serving_headroom(in).source, "serving need learned by the profile");
  in.learned_serving_bytes = 1 * kGiB;
  EXPECT_EQ(serving_headroom(in).bytes, 3 * kGiB);
  in.profiled_peak_bytes = 0;
  in.learned_serving_bytes.reset();
  EXPECT_EQ(serving_headroom(in).bytes, 512 * kMiB);
  EXPECT_EQ(serving_headroom(in).source, "KVREMAP_HEADROOM");
}

// A commit while start-up work still runs: what it holds is allocated already and counts toward the headroom once,
// the floor included; SGLang's reserve already counts what is held, so nothing more is taken there.
TEST(ServingHeadroom, WhatStartUpWorkHoldsAtAnEarlyCommitCountsTowardTheHeadroomOnce) {
  HeadroomInputs in;
  in.engine = EngineKind::vllm;
  in.floor_bytes = 256 * kMiB;
  in.profiled_peak_bytes = 4 * kGiB;
  in.live_start_up_bytes = 3 * kGiB;
  EXPECT_EQ(serving_headroom(in).bytes, 1 * kGiB);
  EXPECT_EQ(serving_headroom(in).measured_bytes, 1 * kGiB);
  EXPECT_EQ(serving_headroom(in).source, std::string("profiled activation peak") + kLiveStartUpSuffix);
  in.live_start_up_bytes = 5 * kGiB;
  EXPECT_EQ(serving_headroom(in).bytes, 0u);
  in.profiled_peak_bytes = 0;
  in.live_start_up_bytes = 100 * kMiB;
  EXPECT_EQ(serving_headroom(in).bytes, 156 * kMiB);
  EXPECT_EQ(serving_headroom(in).source, std::string("KVREMAP_HEADROOM") + kLiveStartUpSuffix);
  in.live_start_up_bytes = 0;
  EXPECT_EQ(serving_headroom(in).source, "KVREMAP_HEADROOM");
  in.engine = EngineKind::sglang;
  in.sglang_reserve_bytes = 2 * kGiB;
  in.live_start_up_bytes = 1 * kGiB;
  EXPECT_EQ(serving_headroom(in).bytes, 2 * kGiB);
}
