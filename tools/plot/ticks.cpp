// Chooses round tick values and their labels (tools/plot/ticks.h).
#include "tools/plot/ticks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvremap::plot {

std::string round_bytes_label(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  // Up to three decimals, trailing zeros dropped: tick values are multiples of a power of two.
  std::string text = fmt::format("{:.3f}", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text + " " + kUnits[unit];
}

std::vector<Tick> byte_ticks(std::uint64_t top, std::size_t most) {
  most = std::max<std::size_t>(most, 2);
  top = std::max<std::uint64_t>(top, 1);
  // The smallest power-of-two step that reaches `top` within most - 1 steps.
  std::uint64_t step = 1;
  while ((top + step - 1) / step > most - 1) step *= 2;
  const std::uint64_t steps = (top + step - 1) / step;
  std::vector<Tick> ticks;
  for (std::uint64_t i = 0; i <= steps; ++i)
    ticks.push_back({static_cast<double>(i * step), i == 0 ? "0" : round_bytes_label(i * step)});
  return ticks;
}

std::vector<Tick> second_ticks(double t0_us, double t1_us, std::size_t most) {
  most = std::max<std::size_t>(most, 2);
  const double span_s = std::max(t1_us - t0_us, 1.0) / 1e6;
  // Steps 1, 2, 5 x 10^k seconds; the smallest with at most `most` ticks in the span.
  int exponent = static_cast<int>(std::floor(std::log10(span_s))) - 2;
  double step = 0;
  int decimals = 0;
  for (;; ++exponent) {
    bool found = false;
    for (const int mantissa : {1, 2, 5}) {
      step = mantissa * std::pow(10.0, exponent);
      if (std::floor(span_s / step + 1e-9) + 1 <= static_cast<double>(most)) {
        found = true;
        break;
      }
    }
    if (found) break;
  }
  decimals = std::max(0, -exponent);
  std::vector<Tick> ticks;
  const auto first = static_cast<long long>(std::ceil(t0_us / 1e6 / step - 1e-9));
  for (long long i = first;; ++i) {
    const double s = static_cast<double>(i) * step;
    if (s * 1e6 > t1_us + 1e-6) break;
    ticks.push_back({s * 1e6, fmt::format("{:.{}f} s", s, decimals)});
  }
  return ticks;
}

}  // namespace kvremap::plot
