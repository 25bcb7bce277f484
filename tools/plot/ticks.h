// Round axis ticks for the plot: bytes at power-of-two steps in binary units, seconds at 1-2-5 steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvremap::plot {

struct Tick {
  double value = 0;  // bytes or microseconds
  std::string label;
};

// From 0 up to the first tick at or above `top`, at most `most` ticks, each a whole multiple of a
// power-of-two step ("0 B", "16 GiB", "32 GiB", ...; "512 MiB", "1 GiB", "1.5 GiB"). The last tick is
// the axis's top.
std::vector<Tick> byte_ticks(std::uint64_t top, std::size_t most = 7);

// Round seconds inside [t0_us, t1_us] at a 1, 2 or 5 times a power of ten step, at most `most`.
std::vector<Tick> second_ticks(double t0_us, double t1_us, std::size_t most = 8);

// A byte count in the largest binary unit it reaches, with no trailing zeros ("16 GiB", "1.5 GiB").
std::string round_bytes_label(std::uint64_t bytes);

}  // namespace kvremap::plot
