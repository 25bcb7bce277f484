// Prose for a terminal: words filled into lines of at most a given width, each line indented.
#include "policy/text_wrap.h"

namespace kvremap::policy {

std::string wrap_text(std::string_view text, std::size_t width, std::string_view indent) {
  std::string out, line;
  const auto end_line = [&] {
    if (line.empty()) return;
    out.append(indent).append(line).push_back('\n');
    line.clear();
  };
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t start = text.find_first_not_of(" \n\t", at);
    if (start == std::string_view::npos) break;
    const std::size_t stop = std::min(text.find_first_of(" \n\t", start), text.size());
    const std::string_view word = text.substr(start, stop - start);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) end_line();
    if (!line.empty()) line.push_back(' ');
    line.append(word);
    at = stop;
  }
  end_line();
  return out;
}

std::string without_backticks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text)
    if (c != '`') out.push_back(c);
  return out;
}

}  // namespace kvremap::policy
