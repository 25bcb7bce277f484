// Kernel parameters read for addresses and for PyTorch's zero fill (policy/kernel_arguments.h).
#include "policy/kernel_arguments.h"

#include <algorithm>

namespace kvremap::policy {

bool carries_address_in(std::span<const KernelParameter> parameters, std::uint64_t begin, std::uint64_t end) {
  bool found = false;
  for_each_address_in(parameters, begin, end, [&](std::uint64_t) { found = true; });
  return found;
}

bool is_zero_fill_kernel(std::string_view name, std::span<const KernelParameter> parameters) {
  if (name.find("FillFunctor") == std::string_view::npos || name.find("elementwise_kernel") == std::string_view::npos)
    return false;
  if (parameters.size() < 2 || parameters[1].bytes.empty()) return false;
  return std::all_of(parameters[1].bytes.begin(), parameters[1].bytes.end(),
                     [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace kvremap::policy
