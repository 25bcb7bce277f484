// Learned sizing: the next start's shift from a profile settles in one step and stays there.
#include "policy/sizing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

Profile measured(std::int64_t margin, std::int64_t shift = 0, std::uint64_t kv = 20 * kGiB) {
  Profile p;
  p.kv_requested_bytes = kv;
  p.margin_bytes = margin;
  p.sizing_shift_bytes = shift;
  p.headroom_bytes = 3 * kGiB;
  return p;
}

// A stand-in engine: KV is what its sizing query leaves, rounded down to whole blocks; the start's
// margin is what the device holds for KV beyond it. Returns the next profile.
struct Engine {
  std::uint64_t sizes_from = 24 * kGiB;  // KV the engine sizes with the driver's true figure
  std::uint64_t fits = 23 * kGiB + 300 * kMiB;  // KV the device holds with the headroom kept
  std::uint64_t block = 5 * kMiB + 123;
  Profile start(std::int64_t shift) const {
    const auto told = static_cast<std::int64_t>(sizes_from) - shift;
    const std::uint64_t kv = static_cast<std::uint64_t>(told) / block * block;
    return measured(static_cast<std::int64_t>(fits) - static_cast<std::int64_t>(kv), shift, kv);
  }
};

}  // namespace

TEST(Sizing, ADeficitShrinksByItPlusHalfTheTolerance) {
  const SizingStep s = next_sizing(measured(-526 * static_cast<std::int64_t>(kMiB)), SizingWhen::learned);
  EXPECT_EQ(s.tolerance_bytes, 80 * kMiB) << "1/256 of 20 GiB";
  EXPECT_EQ(s.slack_bytes, -526 * static_cast<std::int64_t>(kMiB));
  EXPECT_EQ(s.shift_bytes, static_cast<std::int64_t>(526 * kMiB + 40 * kMiB));
  EXPECT_NE(s.reason.find("lacked 526.00 MiB"), std::string::npos) << s.reason;
}

TEST(Sizing, ASurplusIsHandedBackOnlyUnderFit) {
  const Profile p = measured(static_cast<std::int64_t>(2 * kGiB));
  EXPECT_EQ(next_sizing(p, SizingWhen::learned).shift_bytes, 0) << "learned never grows beyond the engine's own figure";
  EXPECT_EQ(next_sizing(p, SizingWhen::fit).shift_bytes, -static_cast<std::int64_t>(2 * kGiB - 40 * kMiB));
  // An earlier shrink is given back under learned, down to none.
  const Profile shrunk = measured(static_cast<std::int64_t>(2 * kGiB), static_cast<std::int64_t>(3 * kGiB));
  EXPECT_EQ(next_sizing(shrunk, SizingWhen::learned).shift_bytes, static_cast<std::int64_t>(kGiB + 40 * kMiB));
  const Profile little = measured(static_cast<std::int64_t>(2 * kGiB), static_cast<std::int64_t>(kGiB));
  EXPECT_EQ(next_sizing(little, SizingWhen::learned).shift_bytes, 0);
}

TEST(Sizing, InsideTheBandTheShiftStays) {
  for (std::int64_t margin : {std::int64_t{0}, std::int64_t{1}, static_cast<std::int64_t>(80 * kMiB)}) {
    EXPECT_EQ(next_sizing(measured(margin, 777), SizingWhen::learned).shift_bytes, 777) << margin;
    EXPECT_EQ(next_sizing(measured(margin, -777), SizingWhen::fit).shift_bytes, -777) << margin;
  }
}

TEST(Sizing, ServingBeyondTheHeadroomIsTakenFromTheSurplus) {
  Profile p = measured(static_cast<std::int64_t>(kGiB));
  p.serving_peak_bytes = 5 * kGiB;  // 2 GiB beyond the 3 GiB headroom
  const SizingStep s = next_sizing(p, SizingWhen::fit);
  EXPECT_EQ(s.slack_bytes, -static_cast<std::int64_t>(kGiB));
  EXPECT_EQ(s.shift_bytes, static_cast<std::int64_t>(kGiB + 40 * kMiB));
  EXPECT_NE(s.reason.find("serving needed 2.00 GiB beyond its headroom"), std::string::npos) << s.reason;
  p.serving_peak_bytes = kGiB;  // below the headroom: nothing to take
  EXPECT_EQ(next_sizing(p, SizingWhen::fit).slack_bytes, static_cast<std::int64_t>(kGiB));
}

// A profile from another --gpu-memory-utilization: the engine now asks for the difference times the
// device more (or less) KV, and the shift takes it away again.
TEST(Sizing, AnotherShareMovesTheShiftByTheDifference) {
  Profile p = measured(static_cast<std::int64_t>(3 * kGiB));  // fitted at 0.9 with 3 GiB to spare
  p.memory_share = 0.9;
  EXPECT_EQ(next_sizing(p, SizingWhen::learned, 0.9, 80 * kGiB).shift_bytes, 0);
  const SizingStep s = next_sizing(p, SizingWhen::learned, 0.95, 80 * kGiB);
  EXPECT_EQ(s.shift_bytes, static_cast<std::int64_t>(4 * kGiB - 3 * kGiB + 40 * kMiB));
  EXPECT_NE(s.reason.find("4.00 GiB more for the share (0.9 then, 0.95 now)"), std::string::npos) << s.reason;
  EXPECT_EQ(next_sizing(p, SizingWhen::learned, 0.8, 80 * kGiB).shift_bytes, 0) << "less KV asked for: nothing to take";
  EXPECT_EQ(next_sizing(p, SizingWhen::learned, std::nullopt, 80 * kGiB).shift_bytes, 0) << "no share: nothing moves";
}

TEST(Sizing, TheShareIsVllmsUtilisation) {
  EngineProfile vllm;
  vllm.kind = EngineKind::vllm;
  EXPECT_EQ(memory_share(vllm), 0.9) << "vLLM's default";
  vllm.gpu_memory_utilization = 0.95;
  EXPECT_EQ(memory_share(vllm), 0.95);
  vllm.kv_cache_memory = kGiB;
  EXPECT_EQ(memory_share(vllm), std::nullopt);
  EngineProfile sglang;
  sglang.kind = EngineKind::sglang;
  sglang.mem_fraction_static = 0.88;
  EXPECT_EQ(memory_share(sglang), std::nullopt) << "its reserve moves with its KV: the shift carries over";
}

TEST(Sizing, EngineModeNeverShifts) {
  EXPECT_EQ(next_sizing(measured(-static_cast<std::int64_t>(kGiB), 5), SizingWhen::engine).shift_bytes, 0);
}

// The loop the library runs start after start: a deficit is gone on the second start, which holds
// at least all but the tolerance of what fits, and nothing moves after that (no block rounding
// pushes a later start over the edge).
TEST(Sizing, RepeatedStartsSettleAfterOneStep) {
  for (const SizingWhen mode : {SizingWhen::learned, SizingWhen::fit}) {
    for (const std::uint64_t fits : {23 * kGiB + 300 * kMiB, 22 * kGiB, 25 * kGiB}) {
      Engine e;
      e.fits = fits;
      Profile p = e.start(0);
      const SizingStep step = next_sizing(p, mode);
      const std::int64_t second = step.shift_bytes;
      p = e.start(second);
      if (mode == SizingWhen::fit || fits < e.sizes_from) {
        EXPECT_GE(p.margin_bytes, 0) << fits;
        EXPECT_LE(static_cast<std::uint64_t>(p.margin_bytes), step.tolerance_bytes / 2 + e.block) << fits;
      }
      for (int start = 3; start <= 6; ++start) {
        const std::int64_t next = next_sizing(p, mode).shift_bytes;
        EXPECT_EQ(next, second) << "start " << start << ", fits " << fits;
        p = e.start(next);
        EXPECT_GE(p.margin_bytes, 0);
      }
    }
  }
}

TEST(Sizing, ExtremeFiguresNeverWrap) {
  Profile p = measured(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                       std::numeric_limits<std::uint64_t>::max());
  p.serving_peak_bytes = std::numeric_limits<std::uint64_t>::max();
  const SizingStep s = next_sizing(p, SizingWhen::fit);
  EXPECT_GT(s.shift_bytes, 0);
  EXPECT_EQ(shifted_free(80 * kGiB, s.shift_bytes, 80 * kGiB), 0u);
  p = measured(std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min());
  EXPECT_LT(next_sizing(p, SizingWhen::fit).shift_bytes, 0);
}

TEST(Sizing, ShiftedFreeStaysBetweenZeroAndTheDevice) {
  EXPECT_EQ(shifted_free(10 * kGiB, static_cast<std::int64_t>(kGiB), 80 * kGiB), 9 * kGiB);
  EXPECT_EQ(shifted_free(10 * kGiB, -static_cast<std::int64_t>(kGiB), 80 * kGiB), 11 * kGiB);
  EXPECT_EQ(shifted_free(kGiB, static_cast<std::int64_t>(2 * kGiB), 80 * kGiB), 0u);
  EXPECT_EQ(shifted_free(79 * kGiB, -static_cast<std::int64_t>(2 * kGiB), 80 * kGiB), 80 * kGiB);
}

TEST(Sizing, AGivenKvSizeCannotBeMoved) {
  EngineProfile vllm;
  vllm.kind = EngineKind::vllm;
  EXPECT_FALSE(sizing_not_applicable(vllm));
  vllm.kv_cache_memory = 20 * kGiB;
  ASSERT_TRUE(sizing_not_applicable(vllm));
  EXPECT_NE(sizing_not_applicable(vllm)->find("--kv-cache-memory"), std::string::npos);
}

TEST(Sizing, SameStartFlagsNameTheEnginesOwnFlags) {
  EngineProfile vllm;
  vllm.kind = EngineKind::vllm;
  EXPECT_EQ(same_start_flags(vllm, 0, 20 * kGiB, 80 * kGiB), "") << "nothing shifted: the command line as it is";
  EXPECT_EQ(same_start_flags(vllm, 5, 21474836480, 80 * kGiB), "--kv-cache-memory 21474836480");
  EngineProfile sglang;
  sglang.kind = EngineKind::sglang;
  EXPECT_EQ(same_start_flags(sglang, static_cast<std::int64_t>(kGiB), 20 * kGiB, 80 * kGiB), "")
      << "the share it ran with is unknown";
  sglang.mem_fraction_static = 0.9;
  EXPECT_EQ(same_start_flags(sglang, static_cast<std::int64_t>(8 * kGiB), 20 * kGiB, 80 * kGiB),
            "--mem-fraction-static 0.8000");
  EXPECT_EQ(same_start_flags(sglang, -static_cast<std::int64_t>(4 * kGiB), 20 * kGiB, 80 * kGiB),
            "--mem-fraction-static 0.9500");
  EngineProfile other;
  EXPECT_EQ(same_start_flags(other, 5, kGiB, 80 * kGiB), "");
}
