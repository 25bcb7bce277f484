// PyTorch's caching-allocator settings (PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF) as far as kvremap needs them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvremap::policy {

// What one setting string says about the allocator kvremap shares the process with.
struct AllocatorConfig {
  std::string variable;              // the variable the settings came from ("" when neither is set)
  bool expandable_segments = false;  // expandable_segments:True, with the native (caching) backend
  // One line naming the variable, the setting and what it accepts, when the string holds a setting
  // PyTorch itself would refuse (PyTorch then stops at its first CUDA allocation); "" otherwise.
  std::string problem;
};

// Parses PyTorch's "key:value,key:value" settings (spaces around tokens ignored; `expandable_segments`
// takes True or False, any letter case PyTorch's tokenizer accepts: True, true, False, false;
// `backend:cudaMallocAsync` replaces the caching allocator, so no expandable segments exist then).
// Keys kvremap has no use for are skipped without a check. `variable` names the source in `problem`.
AllocatorConfig parse_allocator_config(std::string_view variable, std::string_view settings);

// The settings PyTorch reads: PYTORCH_ALLOC_CONF when set, else PYTORCH_CUDA_ALLOC_CONF (its older name),
// as c10's getAllocatorConfigEnv does. A variable that is not set is std::nullopt.
AllocatorConfig allocator_config(const std::optional<std::string>& pytorch_alloc_conf,
                                 const std::optional<std::string>& pytorch_cuda_alloc_conf);

}  // namespace kvremap::policy
