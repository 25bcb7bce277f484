// PyTorch's allocator settings: expandable segments on, off, ruled out by the backend, and refused values.
#include "policy/allocator_config.h"

#include <gtest/gtest.h>

using kvremap::policy::allocator_config;
using kvremap::policy::parse_allocator_config;

TEST(AllocatorConfig, ExpandableSegmentsTrueTurnsThemOn) {
  EXPECT_TRUE(parse_allocator_config("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True").expandable_segments);
  EXPECT_TRUE(parse_allocator_config("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:true").expandable_segments);
  EXPECT_TRUE(parse_allocator_config("X", " max_split_size_mb:128 , expandable_segments : True ").expandable_segments);
  EXPECT_TRUE(parse_allocator_config("X", "roundup_power2_divisions:[256:1,512:2],expandable_segments:True")
                  .expandable_segments);
}

TEST(AllocatorConfig, FalseMissingOrTheAsyncBackendLeaveThemOff) {
  EXPECT_FALSE(parse_allocator_config("X", "expandable_segments:False").expandable_segments);
  EXPECT_FALSE(parse_allocator_config("X", "expandable_segments:True,expandable_segments:False").expandable_segments);
  EXPECT_FALSE(parse_allocator_config("X", "max_split_size_mb:128").expandable_segments);
  EXPECT_FALSE(parse_allocator_config("X", "").expandable_segments);
  EXPECT_FALSE(parse_allocator_config("X", "backend:cudaMallocAsync,expandable_segments:True").expandable_segments);
  EXPECT_TRUE(parse_allocator_config("X", "backend:native,expandable_segments:True").expandable_segments);
  // A key that only begins like it is another key.
  EXPECT_FALSE(parse_allocator_config("X", "expandable_segments_x:True").expandable_segments);
}

TEST(AllocatorConfig, AValuePyTorchRefusesIsOneLineNamingTheVariable) {
  const auto c = parse_allocator_config("PYTORCH_ALLOC_CONF", "expandable_segments:yes");
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.problem,
            "PYTORCH_ALLOC_CONF: expandable_segments takes True or False, got 'yes' (PyTorch refuses it at its first "
            "CUDA allocation)");
  EXPECT_NE(parse_allocator_config("X", "expandable_segments").problem, "");
  EXPECT_EQ(parse_allocator_config("X", "expandable_segments:True").problem, "");
}

TEST(AllocatorConfig, PytorchAllocConfWinsOverTheOlderName) {
  const auto both = allocator_config(std::string("expandable_segments:False"), std::string("expandable_segments:True"));
  EXPECT_EQ(both.variable, "PYTORCH_ALLOC_CONF");
  EXPECT_FALSE(both.expandable_segments);
  const auto older = allocator_config(std::nullopt, std::string("expandable_segments:True"));
  EXPECT_EQ(older.variable, "PYTORCH_CUDA_ALLOC_CONF");
  EXPECT_TRUE(older.expandable_segments);
  const auto neither = allocator_config(std::nullopt, std::nullopt);
  EXPECT_EQ(neither.variable, "");
  EXPECT_FALSE(neither.expandable_segments);
}
