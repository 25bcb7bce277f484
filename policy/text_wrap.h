// Prose for a terminal: words filled into lines of at most a given width, each line indented.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvremap::policy {

// `text`'s words (split at spaces and newlines) filled into lines of at most `width` columns, each starting
// with `indent`, each ending in '\n'. A word longer than the room stays whole on a line of its own. Nothing
// for a text without words.
std::string wrap_text(std::string_view text, std::size_t width, std::string_view indent);

// `text` without Markdown's code backticks: `KVREMAP_MODE=defer` reads as KVREMAP_MODE=defer.
std::string without_backticks(std::string_view text);

}  // namespace kvremap::policy
