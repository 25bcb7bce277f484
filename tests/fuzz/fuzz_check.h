// The contract check every fuzz target uses: a broken contract prints what and where, then aborts (a crash to libFuzzer).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(condition, what)                                                                \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      std::fprintf(stderr, "fuzz contract broken at %s:%d: %s\n", __FILE__, __LINE__, (what));    \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace kvremap::fuzz {

// One line of text: no newline, carriage return, tab or other C0 control character.
inline bool is_one_line(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

}  // namespace kvremap::fuzz
