#include "nn/percentile.h"

#include <algorithm>
#include <cmath>

namespace nn {

double percentile(std::span<const double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::vector<double> v(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  // Two order statistics (the lo-th and the next) without sorting everything.
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double below = v[lo];
  if (lo + 1 >= v.size()) return below;
  const double above = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end());
  return below + (above - below) * (rank - static_cast<double>(lo));
}

}  // namespace nn
