// Names of allocation categories, shared by the trace writer and the trace reader.
#include "policy/events.h"

#include <array>

namespace kvremap::policy {
namespace {

constexpr std::array<std::string_view, 7> kCategoryNames{"kv",         "graph_pool", "graph_exec", "module",
                                                         "async_pool", "vmm",        "other"};

}  // namespace

std::string_view to_string(Category category) {
  const auto i = static_cast<std::size_t>(category);
  return i < kCategoryNames.size() ? kCategoryNames[i] : std::string_view("?");
}

std::optional<Category> category_from_string(std::string_view name) {
  for (std::size_t i = 0; i < kCategoryNames.size(); ++i)
    if (kCategoryNames[i] == name) return static_cast<Category>(i);
  return std::nullopt;
}

}  // namespace kvremap::policy
