// Allocation categories by name (policy/trace_schema.h holds the names).
#include "policy/events.h"

#include <array>

#include "policy/trace_schema.h"

namespace kvremap::policy {

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
