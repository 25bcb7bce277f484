// An engine's share of device memory, lowered and written (see memory_share.h).
#include "policy/memory_share.h"

#include <cmath>
#include <cstdio>

namespace kvremap::policy {

double lowered_share(double share, double shrink_bytes, std::uint64_t total, int decimals) {
  double scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const double fit = share - shrink_bytes / static_cast<double>(total);
  return fit > 0 ? std::floor(fit * scale + 1e-9) / scale : 0.0;
}

std::string share_text(double share, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, share);
  return buf;
}

}  // namespace kvremap::policy
