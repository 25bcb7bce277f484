// A guard for JSON readers: how deep a text nests, found without parsing it.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvremap::policy {

// Whether arrays and objects in `text` nest deeper than `limit`; brackets inside strings do not count.
// A linear scan, so that hostile input never reaches the recursive parts of a JSON library.
bool json_nested_deeper_than(std::string_view text, std::size_t limit);

}  // namespace kvremap::policy
