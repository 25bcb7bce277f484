// Learned sizing: the next start's shift from a profile settles in one step and stays there.
#include "policy/sizing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::int64_t kCushion = static_cast<std::int64_t>(kSizingCushionBytes);

// 48 tensors of 2 MiB granules: a KV step of 96 MiB.
Profile measured(std::int64_t margin, std::int64_t shift = 0, std::uint64_t kv = 20 * kGiB) {
  Profile p;
  p.kv_requested_bytes = kv;
  p.kv_tensors = 48;
  p.granularity_bytes = 2 * kMiB;
  p.margin_bytes = margin;
  p.sizing_shift_bytes = shift;
  p.headroom_bytes = 3 * kGiB;
  return p;
}

constexpr std::int64_t s64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

// A stand-in engine: its KV cache is what its sizing query leaves, rounded down to whole blocks of
// all its tensors; the device holds `fits` bytes of KV beside the headroom. Returns the profile its
// start writes.
struct Engine {
  std::uint64_t sizes_from = 24 * kGiB + 37 * kMiB + 12345;  // KV the engine sizes with the driver's figure
  std::uint64_t fits = 23 * kGiB + 300 * kMiB + 777;
  std::uint64_t block = 96 * kMiB;  // per-tensor rounding times 48 tensors
  Profile start(std::int64_t shift) const {
    const std::int64_t told = s64(sizes_from) - shift;
    const std::uint64_t kv = static_cast<std::uint64_t>(told) / block * block;
    return measured(s64(fits) - s64(kv), shift, kv);
  }
};

}  // namespace

TEST(Sizing, ADeficitShrinksToTheLargestStepThatFitsBelowTheCushion) {
  const Profile p = measured(-s64(526 * kMiB));
  const SizingStep s = next_sizing(p, SizingWhen::learned);
  EXPECT_EQ(s.step_bytes, 96 * kMiB);
  EXPECT_EQ(s.slack_bytes, -s64(526 * kMiB));
  // 20 GiB - 526 MiB - 8 MiB = 19946 MiB, down to 207 steps of 96 MiB = 19872 MiB.
  EXPECT_EQ(s.target_kv_bytes, 19872 * kMiB);
  EXPECT_EQ(s.shift_bytes, s64(20 * kGiB - 19872 * kMiB));
  EXPECT_NE(s.reason.find("lacked 526.00 MiB"), std::string::npos) << s.reason;
}

TEST(Sizing, ASurplusIsHandedBackOnlyUnderFit) {
  const Profile p = measured(s64(2 * kGiB));
  EXPECT_EQ(next_sizing(p, SizingWhen::learned).shift_bytes, 0) << "learned never grows beyond the engine's own figure";
  EXPECT_NE(next_sizing(p, SizingWhen::learned).reason.find("never gives more KV"), std::string::npos);
  const SizingStep fit = next_sizing(p, SizingWhen::fit);
  EXPECT_EQ(fit.target_kv_bytes, (20 * kGiB + 2 * kGiB - kSizingCushionBytes) / (96 * kMiB) * (96 * kMiB));
  EXPECT_EQ(fit.shift_bytes, s64(20 * kGiB) - s64(fit.target_kv_bytes));
  EXPECT_LT(fit.shift_bytes, 0);
  // An earlier shrink is given back under learned, down to none.
  const Profile shrunk = measured(s64(2 * kGiB), s64(3 * kGiB));
  EXPECT_EQ(next_sizing(shrunk, SizingWhen::learned).shift_bytes, s64(3 * kGiB) + fit.shift_bytes);
  EXPECT_EQ(next_sizing(measured(s64(2 * kGiB), s64(kGiB)), SizingWhen::learned).shift_bytes, 0);
}

TEST(Sizing, ServingBeyondTheHeadroomIsTakenFromTheSurplus) {
  Profile p = measured(s64(kGiB));
  p.serving_peak_bytes = 5 * kGiB;  // 2 GiB beyond the 3 GiB headroom
  const SizingStep s = next_sizing(p, SizingWhen::fit);
  EXPECT_EQ(s.slack_bytes, -s64(kGiB));
  EXPECT_GE(s.shift_bytes, s64(kGiB) + kCushion);
  EXPECT_NE(s.reason.find("serving needed 2.00 GiB beyond its headroom"), std::string::npos) << s.reason;
  p.serving_peak_bytes = kGiB;  // below the headroom: nothing to take
  EXPECT_EQ(next_sizing(p, SizingWhen::fit).slack_bytes, s64(kGiB));
}

// A profile from another --gpu-memory-utilization: the engine now asks for the difference times the
// device more (or less) KV, and the shift takes it away again.
TEST(Sizing, AnotherShareMovesTheShiftByTheDifference) {
  Profile p = measured(s64(3 * kGiB));  // fitted at 0.9 with 3 GiB to spare
  p.memory_share = 0.9;
  const std::int64_t same = next_sizing(p, SizingWhen::fit, 0.9, 80 * kGiB).shift_bytes;
  EXPECT_EQ(next_sizing(p, SizingWhen::fit, 0.95, 80 * kGiB).shift_bytes, same + s64(4 * kGiB));
  const SizingStep s = next_sizing(p, SizingWhen::learned, 0.95, 80 * kGiB);
  EXPECT_EQ(s.shift_bytes, same + s64(4 * kGiB));
  EXPECT_GT(s.shift_bytes, 0);
  EXPECT_NE(s.reason.find("4.00 GiB more for the share (0.9 then, 0.95 now)"), std::string::npos) << s.reason;
  EXPECT_EQ(next_sizing(p, SizingWhen::learned, 0.8, 80 * kGiB).shift_bytes, 0) << "less KV asked for: nothing to take";
  EXPECT_EQ(next_sizing(p, SizingWhen::learned, std::nullopt, 80 * kGiB).shift_bytes, 0) << "no share: nothing moves";
}

TEST(Sizing, TheShareIsVllmsUtilisation) {
  EngineProfile vllm;
  vllm.kind = EngineKind::vllm;
  EXPECT_EQ(memory_share(vllm), 0.92) << "vLLM's default";
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
  EXPECT_EQ(next_sizing(measured(-s64(kGiB), 5), SizingWhen::engine).shift_bytes, 0);
}

// The loop the library runs start after start, whatever the remainder the engine's rounding left:
// the second start holds the largest multiple of the step below what fits less the cushion, and no
// later start moves. With blocks finer than the step, every start still fits.
TEST(Sizing, RepeatedStartsSettleAfterOneStep) {
  for (const SizingWhen mode : {SizingWhen::learned, SizingWhen::fit}) {
    for (const std::uint64_t fits : {23 * kGiB + 300 * kMiB + 777, 22 * kGiB + 5, 23 * kGiB + 95 * kMiB, 25 * kGiB}) {
      for (const std::uint64_t block : {96 * kMiB, 3 * kMiB + 4096}) {
        for (const std::uint64_t sizes_from : {24 * kGiB + 37 * kMiB + 12345, 24 * kGiB + 95 * kMiB}) {
          SCOPED_TRACE(::testing::Message() << "fits " << fits << " block " << block << " from " << sizes_from);
          Engine e;
          e.fits = fits;
          e.block = block;
          e.sizes_from = sizes_from;
          Profile p = e.start(0);
          const bool shrinks = mode == SizingWhen::fit || fits < sizes_from;
          const SizingStep step = next_sizing(p, mode);
          std::int64_t shift = step.shift_bytes;
          p = e.start(shift);
          if (shrinks) {
            EXPECT_GE(p.margin_bytes, kCushion);
            EXPECT_LT(p.margin_bytes, kCushion + s64(step.step_bytes));
          }
          for (int start = 3; start <= 6; ++start) {
            const std::int64_t next = next_sizing(p, mode).shift_bytes;
            if (block == step.step_bytes) {
              EXPECT_EQ(next, shift) << "start " << start;
            }
            shift = next;
            p = e.start(next);
            EXPECT_GE(p.margin_bytes, 0) << "start " << start;
          }
        }
      }
    }
  }
}

TEST(Sizing, ExtremeFiguresNeverWrap) {
  Profile p = measured(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                       std::numeric_limits<std::uint64_t>::max());
  p.kv_tensors = std::numeric_limits<std::uint32_t>::max();
  p.granularity_bytes = std::numeric_limits<std::uint64_t>::max();
  p.serving_peak_bytes = std::numeric_limits<std::uint64_t>::max();
  const SizingStep s = next_sizing(p, SizingWhen::fit);
  EXPECT_GT(s.shift_bytes, 0);
  EXPECT_EQ(shifted_free(80 * kGiB, s.shift_bytes, 80 * kGiB), 0u);
  p = measured(std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min());
  p.kv_tensors = 0;
  p.granularity_bytes = 0;
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

// What the bounds on a profile (policy/profile.h) guarantee the next start: a profile within its
// device never sizes more KV than the device holds, even under `fit` and with a surplus as large as
// the device allows; beyond the bounds, a surplus would (so the bound is what keeps it out).
TEST(Sizing, AProfileWithinItsDeviceNeverSizesMoreKvThanTheDeviceHolds) {
  constexpr std::uint64_t total = 80 * kGiB;
  std::size_t accepted = 0;
  for (std::uint64_t kv = 0; kv <= total; kv += 5 * kGiB)
    for (std::int64_t margin = -s64(total); margin <= s64(total); margin += s64(5 * kGiB))
      for (const std::int64_t shift : {-s64(10 * kGiB), std::int64_t{0}, s64(10 * kGiB)}) {
        Profile p = measured(margin, shift, kv);
        p.memory_share = 1.0;
        if (profile_out_of_bounds(p, total)) continue;
        ++accepted;
        const SizingStep step = next_sizing(p, SizingWhen::fit, 1.0, total);
        EXPECT_LE(step.target_kv_bytes, total) << "kv " << kv << " margin " << margin << " shift " << shift;
      }
  EXPECT_GT(accepted, 50u);
  Profile huge = measured(s64(70 * kGiB), 0, 20 * kGiB);
  EXPECT_TRUE(profile_out_of_bounds(huge, total));
  EXPECT_GT(next_sizing(huge, SizingWhen::fit).target_kv_bytes, total) << "what the bound keeps out";
}

// A headroom an estimate raised (SGLang's prefill estimate before serving was measured): once serving is
// measured below it, the next start hands the difference back to its KV cache; before, it keeps it.
TEST(Sizing, AnEstimatedHeadroomIsHandedBackOnceServingIsMeasured) {
  Profile p = measured(-s64(6 * kGiB));  // 6 GiB on host beside a 12 GiB estimate
  p.headroom_bytes = 12 * kGiB;
  p.headroom_measured_bytes = 2 * kGiB;
  EXPECT_EQ(next_sizing(p, SizingWhen::learned).slack_bytes, -s64(6 * kGiB)) << "serving not measured yet";
  p.serving_peak_bytes = 4 * kGiB;
  const SizingStep s = next_sizing(p, SizingWhen::learned);
  EXPECT_EQ(s.slack_bytes, s64(2 * kGiB)) << "-6 + 12 - 4";
  EXPECT_NE(s.reason.find("serving needed 4.00 GiB of the 12.00 GiB headroom it kept"), std::string::npos)
      << s.reason;
  p.serving_peak_bytes = 1 * kGiB;  // below what was measured at the commit: that stands
  EXPECT_EQ(next_sizing(p, SizingWhen::learned).slack_bytes, s64(4 * kGiB));
}
