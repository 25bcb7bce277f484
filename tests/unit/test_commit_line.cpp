// The commit line: all on the device, or a host part with its share, where it sits and what follows.
#include "policy/commit_line.h"

#include <gtest/gtest.h>

using kvremap::policy::commit_line;
using kvremap::policy::CommitLineFacts;

TEST(CommitLine, AllOnTheDeviceSaysSoWithWhatIsToSpare) {
  CommitLineFacts f;
  f.device = 1;
  f.kv_bytes = 24ULL << 30;
  f.margin_bytes = 256LL << 20;
  f.tensors = 48;
  EXPECT_EQ(commit_line(f), "device 1: KV cache committed: 24.00 GiB, all on the device (256.00 MiB to spare)");
}

TEST(CommitLine, AHostPartNamesItsShareAndTheProfileThatSizesTheNextStart) {
  CommitLineFacts f;
  f.kv_bytes = 100ULL << 30;
  f.host_bytes = 2ULL << 30;
  f.margin_bytes = -(2LL << 30);
  f.tensors = 4;
  f.host_bytes_per_tensor = 512ULL << 20;
  f.profile_path = "/p/vllm-1-rank0.json";
  f.profile_sizes_next = true;
  f.flag_hint = "next start under kvremap: --gpu-memory-utilization 0.93";
  const std::string line = commit_line(f);
  EXPECT_NE(line.find("100.00 GiB: 98.00 GiB (98.0%) on the device, 2.00 GiB (2.0%) on host memory (the last "
                      "512.00 MiB of each of 4 KV tensors)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("sized from profile /p/vllm-1-rank0.json"), std::string::npos) << line;
  EXPECT_EQ(line.find("--gpu-memory-utilization"), std::string::npos) << "no flag advice when a profile sizes it";
}

TEST(CommitLine, WithoutAProfileTheFlagAdviceStands) {
  CommitLineFacts f;
  f.kv_bytes = 10ULL << 30;
  f.host_bytes = 1ULL << 30;
  f.tensors = 1;
  f.flag_hint = "next start, with or without kvremap: --gpu-memory-utilization 0.85";
  const std::string line = commit_line(f);
  EXPECT_NE(line.find("To keep it all on the device: next start, with or without kvremap: --gpu-memory-utilization "
                      "0.85."),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("each of"), std::string::npos) << "one allocation has no per-tensor part";
  EXPECT_NE(line.find("(the end of the one KV allocation: "), std::string::npos) << line;
}
