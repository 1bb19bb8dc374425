// What calibration saw of one float tensor: its extremes and a histogram of its values,
// from which each calibration method picks the range its int8 form covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "nn/quantize/quantize.h"

namespace nn::quantize {

// A float range [lo, hi].
struct FloatRange {
  float lo = 0.f, hi = 0.f;
};

// Two histograms of |x|, one per sign, with kBins bins of one width over [0, kBins * width).
// The width doubles (adjacent bins merge) whenever a value falls past the end, so one pass
// over the samples suffices and every bin edge stays a multiple of the width.
class RangeObserver {
 public:
  static constexpr size_t kBins = 2048;

  void observe(const float* data, size_t count);
  bool empty() const { return count_ == 0; }
  float min() const { return min_; }
  float max() const { return max_; }
  uint64_t count() const { return count_; }
  const std::vector<uint64_t>& positive() const { return pos_; }
  const std::vector<uint64_t>& negative() const { return neg_; }

  // The range to quantize over (within [min, max]; quantization later widens it to hold 0).
  FloatRange range(CalibrationMethod method, double percentile) const;

 private:
  void grow_to(double magnitude);
  FloatRange percentile_range(double percentile) const;
  FloatRange entropy_range() const;
  FloatRange mse_range() const;

  std::vector<uint64_t> pos_ = std::vector<uint64_t>(kBins, 0);  // x >= 0, by |x|
  std::vector<uint64_t> neg_ = std::vector<uint64_t>(kBins, 0);  // x < 0, by |x|
  double width_ = 0;  // 0 until a nonzero value is seen
  float min_ = 0.f, max_ = 0.f;
  uint64_t count_ = 0;
};

// The clipping threshold (in bins) for one side's histogram that minimizes the KL
// divergence between the clipped distribution and its quantization to `levels` levels.
size_t entropy_threshold_bins(const std::vector<uint64_t>& hist, size_t levels);

}  // namespace nn::quantize
