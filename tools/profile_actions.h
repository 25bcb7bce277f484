// What each `kvremap profile` subcommand does, apart from its command line (tools/profile_cmd.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/profile_files.h"

namespace kvremap::cli {

// Each prints what it did on stdout, each problem as one line on stderr, and returns the exit status.
int profile_list(const std::vector<ProfileLayer>& layers, bool explicit_dir);
int profile_show(const std::string& file_or_name, const std::vector<ProfileLayer>& layers);
int profile_export(const ProfileLayer& layer, const std::string& output);
int profile_import(const std::string& bundle, const ProfileLayer& layer);
int profile_verify(const std::vector<ProfileLayer>& layers, bool explicit_dir);

struct PruneRule {
  std::optional<std::int64_t> older_than_seconds;
  std::optional<std::string> key_contains;
  bool dry_run = false;
};
int profile_prune(const ProfileLayer& layer, const PruneRule& rule);

// "vllm  Qwen/Qwen3-8B  NVIDIA H100 80GB HBM3 (79.19 GiB)  rank 0": what a row names of a profile's key.
std::string key_summary(const policy::KeyParts& parts);

}  // namespace kvremap::cli
