// The last N samples of a time (inference, compositing, overrun), for percentiles. Header
// only, with no engine or GStreamer dependency, so every element can keep one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace nn::plugins {

// Times of the last `capacity` runs (default: a few hundred), for p50/p99.
class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 512) : capacity_(std::max<size_t>(1, capacity)) {}

  void add(double ms) {
    if (samples_.size() < capacity_) {
      samples_.push_back(ms);
    } else {
      samples_[next_] = ms;
      next_ = (next_ + 1) % capacity_;
    }
  }

  // The nearest-rank percentile p (0..100) of the samples held; 0 when empty.
  double percentile(double p) const {
    if (samples_.empty()) return 0.0;
    std::vector<double> s = samples_;
    const size_t k =
        std::min(s.size() - 1, static_cast<size_t>(std::ceil(p / 100.0 * s.size())) - (p > 0 ? 1 : 0));
    std::nth_element(s.begin(), s.begin() + k, s.end());
    return s[k];
  }

  void clear() { samples_.clear(), next_ = 0; }

 private:
  size_t capacity_;
  std::vector<double> samples_;
  size_t next_ = 0;
};

}  // namespace nn::plugins
