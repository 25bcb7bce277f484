// The signs of an engine-mapped KV cache: expandable-segment reservations, kvcached's zero page, elastic capacity.
#include "policy/engine_mapped_kv.h"

#include <gtest/gtest.h>

using kvremap::policy::EngineMappedKv;
using kvremap::policy::MappedKv;

namespace {
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
}  // namespace

TEST(EngineMappedKvSigns, AReservationOfAnEighthMoreThanTheDeviceIsExpandableSegments) {
  EngineMappedKv e;
  e.on_reserve(0x100000000, 8 * kGiB, 8 * kGiB);  // a whole-device reservation is not one
  e.on_map(0x100000000, 8 * kGiB, 1);
  EXPECT_EQ(e.seen(), MappedKv::none);
  // 20 MiB × ceil(1.125 × 8 GiB / 20 MiB)
  e.on_reserve(0x400000000, 461 * 20 * kMiB, 8 * kGiB);
  EXPECT_EQ(e.seen(), MappedKv::expandable_segments);
  EXPECT_NE(e.why().find("expandable segments"), std::string::npos) << e.why();
}

TEST(EngineMappedKvSigns, OneHandleMappedTwiceIsKvcachedsZeroPage) {
  EngineMappedKv e;
  e.on_reserve(0x100000000, 256 * kMiB, 8 * kGiB);
  e.on_map(0x100000000, 2 * kMiB, 7);
  e.on_unmap(0x100000000, 2 * kMiB);
  e.on_map(0x100000000, 2 * kMiB, 7);  // mapped again where it was: still one mapping
  e.on_map(0x100200000, 254 * kMiB, 8);
  EXPECT_EQ(e.seen(), MappedKv::none);
  e.on_map(0x200000000, 2 * kMiB, 7);
  EXPECT_EQ(e.seen(), MappedKv::elastic_kv);
  EXPECT_NE(e.why().find("zero page"), std::string::npos) << e.why();
}

TEST(EngineMappedKvSigns, CapacityMostlyUnmappedIsElasticWhileAWholeMappingIsNot) {
  EngineMappedKv whole;  // vLLM sleep mode, torch_memory_saver: reserve S, map S
  whole.on_reserve(0x100000000, 512 * kMiB, 8 * kGiB);
  whole.on_map(0x100000000, 512 * kMiB, 1);
  EXPECT_EQ(whole.seen(), MappedKv::none);
  EngineMappedKv small;  // a small reservation partly mapped is no KV capacity
  small.on_reserve(0x100000000, 32 * kMiB, 8 * kGiB);
  small.on_map(0x100000000, 2 * kMiB, 1);
  EXPECT_EQ(small.seen(), MappedKv::none);
  EngineMappedKv elastic;  // vLLM's extensible KV: one block of the capacity mapped
  elastic.on_reserve(0x100000000, 256 * kMiB, 8 * kGiB);
  elastic.on_map(0x100000000, 2 * kMiB, 1);
  EXPECT_EQ(elastic.seen(), MappedKv::elastic_kv);
  // Once seen, it stays, even when the rest is mapped later (extend_kv_cache).
  elastic.on_map(0x100200000, 254 * kMiB, 2);
  EXPECT_EQ(elastic.seen(), MappedKv::elastic_kv);
  EXPECT_NE(elastic.why().find("extensible"), std::string::npos) << elastic.why();
}

TEST(EngineMappedKvSigns, AFreedReservationCountsNoMore) {
  EngineMappedKv e;
  e.on_reserve(0x100000000, 256 * kMiB, 8 * kGiB);
  e.on_address_free(0x100000000);
  e.on_map(0x100000000, 2 * kMiB, 1);  // no reservation holds it any more
  EXPECT_EQ(e.seen(), MappedKv::none);
}
