// Tells the CUDA runtime's and driver's own files from other libraries by file name.
#include "policy/stacked.h"

namespace kvremap::policy {

namespace {

// `name` is `stem` itself or `stem` followed by a version suffix (".1", ".13.0.48").
bool is_versioned(std::string_view name, std::string_view stem) {
  if (!name.starts_with(stem)) return false;
  const std::string_view rest = name.substr(stem.size());
  return rest.empty() || (rest.size() > 1 && rest.front() == '.');
}

}  // namespace

bool is_cuda_library(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return is_versioned(name, "libcudart.so") || is_versioned(name, "libcuda.so");
}

}  // namespace kvremap::policy
