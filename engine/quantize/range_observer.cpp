#include "quantize/range_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nn::quantize {

void RangeObserver::grow_to(double magnitude) {
  if (width_ == 0) {
    // First nonzero value: bins sized so it falls in the upper half (room before the
    // first doubling, resolution for the values around it).
    width_ = magnitude / (0.75 * kBins);
    return;
  }
  while (magnitude >= width_ * kBins) {
    for (std::vector<uint64_t>* h : {&pos_, &neg_}) {
      std::vector<uint64_t>& v = *h;
      for (size_t i = 0; i < kBins / 2; ++i) v[i] = v[2 * i] + v[2 * i + 1];
      std::fill(v.begin() + kBins / 2, v.end(), 0);
    }
    width_ *= 2;
  }
}

void RangeObserver::observe(const float* data, size_t n) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  size_t finite = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data[i])) continue;
    lo = std::min(lo, data[i]);
    hi = std::max(hi, data[i]);
    ++finite;
  }
  if (finite == 0) return;
  min_ = count_ == 0 ? lo : std::min(min_, lo);
  max_ = count_ == 0 ? hi : std::max(max_, hi);
  count_ += finite;
  const double magnitude = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
  if (magnitude > 0) grow_to(magnitude);
  const double inv = width_ > 0 ? 1.0 / width_ : 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float x = data[i];
    if (!std::isfinite(x)) continue;
    const size_t bin = std::min(static_cast<size_t>(std::fabs(static_cast<double>(x)) * inv), kBins - 1);
    (x < 0 ? neg_ : pos_)[bin]++;
  }
}

FloatRange RangeObserver::percentile_range(double percentile) const {
  // Values in ascending order are neg_ from the last bin down, then pos_ upwards.
  const double tail = std::clamp((100.0 - percentile) / 100.0, 0.0, 0.5) * static_cast<double>(count_);
  FloatRange r{min_, max_};
  double seen = 0;
  for (size_t i = kBins; i-- > 0;) {  // lower tail: the most negative values first
    seen += static_cast<double>(neg_[i]);
    if (seen > tail) {
      r.lo = static_cast<float>(-(static_cast<double>(i) + 1) * width_);
      break;
    }
  }
  seen = 0;
  for (size_t i = kBins; i-- > 0;) {  // upper tail
    seen += static_cast<double>(pos_[i]);
    if (seen > tail) {
      r.hi = static_cast<float>((static_cast<double>(i) + 1) * width_);
      break;
    }
  }
  r.lo = std::max(r.lo, min_);
  r.hi = std::min(r.hi, max_);
  return r;
}

size_t entropy_threshold_bins(const std::vector<uint64_t>& hist, size_t levels) {
  size_t last = hist.size();
  while (last > 0 && hist[last - 1] == 0) --last;
  if (last <= levels) return last;  // every bin gets its own level: nothing to clip
  double best = std::numeric_limits<double>::infinity();
  size_t best_i = last;
  std::vector<double> p, q;
  const size_t step = std::max<size_t>(1, (last - levels) / 256);
  for (size_t i = levels; i <= last; i += step) {
    // P: the histogram clipped at i bins, the clipped mass in its last bin.
    p.assign(hist.begin(), hist.begin() + static_cast<std::ptrdiff_t>(i));
    double outliers = 0;
    for (size_t j = i; j < last; ++j) outliers += static_cast<double>(hist[j]);
    p[i - 1] += outliers;
    // Q: the first i bins (without the clipped mass) merged into `levels` levels, each
    // level's mass spread over its nonzero bins, as TensorRT's calibration does: P holds the
    // clipped mass in its last bin and Q does not, which is what makes clipping cost.
    q.assign(i, 0.0);
    for (size_t l = 0; l < levels; ++l) {
      const size_t b0 = l * i / levels, b1 = (l + 1) * i / levels;
      double mass = 0;
      size_t nonzero = 0;
      for (size_t j = b0; j < b1; ++j) {
        mass += static_cast<double>(hist[j]);
        nonzero += hist[j] != 0;
      }
      if (nonzero == 0) continue;
      for (size_t j = b0; j < b1; ++j)
        if (hist[j] != 0) q[j] = mass / static_cast<double>(nonzero);
    }
    double psum = 0, qsum = 0;
    for (size_t j = 0; j < i; ++j) {
      psum += p[j];
      qsum += q[j];
    }
    if (psum <= 0 || qsum <= 0) continue;
    double kl = 0;
    for (size_t j = 0; j < i; ++j) {
      if (p[j] <= 0) continue;
      const double pj = p[j] / psum;
      const double qj = std::max(q[j] / qsum, 1e-12);
      kl += pj * std::log(pj / qj);
    }
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return best_i;
}

FloatRange RangeObserver::entropy_range() const {
  uint64_t npos = 0, nneg = 0;
  for (size_t i = 0; i < kBins; ++i) {
    npos += pos_[i];
    nneg += neg_[i];
  }
  // int8's 256 levels shared by the two sides in proportion of their values (a ReLU
  // output keeps them all).
  const double share = count_ ? static_cast<double>(npos) / static_cast<double>(count_) : 1.0;
  const size_t pos_levels = std::clamp<size_t>(static_cast<size_t>(std::lround(255 * share)), 16, 255);
  const size_t neg_levels = std::clamp<size_t>(255 - pos_levels, 16, 255);
  FloatRange r{min_, max_};
  if (npos) r.hi = std::min(max_, static_cast<float>(entropy_threshold_bins(pos_, pos_levels) * width_));
  if (nneg) r.lo = std::max(min_, static_cast<float>(-(entropy_threshold_bins(neg_, neg_levels) * width_)));
  return r;
}

namespace {
// One side of zero's histogram as suffix sums, for the squared error of clipping it at t
// in O(1): sum over bins whose centre x lies past t of count * (x - t)^2.
struct ClipError {
  std::vector<double> n, s1, s2;  // from bin b to the end: counts, sum x, sum x^2
  double width;
  ClipError(const std::vector<uint64_t>& hist, double w) : n(hist.size() + 1), s1(hist.size() + 1), s2(hist.size() + 1), width(w) {
    for (size_t b = hist.size(); b-- > 0;) {
      const double c = static_cast<double>(hist[b]), x = (static_cast<double>(b) + 0.5) * w;
      n[b] = n[b + 1] + c;
      s1[b] = s1[b + 1] + c * x;
      s2[b] = s2[b + 1] + c * x * x;
    }
  }
  // The clipped values' squared error and how many there are.
  std::pair<double, double> clipped(double t) const {
    const double first = std::floor(t / width - 0.5) + 1;  // first bin whose centre is past t
    const size_t b = static_cast<size_t>(std::clamp(first, 0.0, static_cast<double>(n.size() - 1)));
    return {s2[b] - 2 * t * s1[b] + t * t * n[b], n[b]};
  }
};
}  // namespace

FloatRange RangeObserver::mse_range() const {
  // Both ends on a grid of kSteps fractions of each side's extreme; the error of a pair:
  // the clipped values' (x - clip)^2, and step^2 / 12 for every value inside (rounding to an
  // int8 step much wider than a bin spreads uniformly).
  constexpr int kSteps = 200;
  const ClipError pos(pos_, width_), neg(neg_, width_);
  const double total = static_cast<double>(count_);
  const double hi_max = std::max(0.f, max_), lo_max = std::max(0.f, -min_);
  double best = std::numeric_limits<double>::infinity();
  FloatRange r{min_, max_};
  for (int i = hi_max > 0 ? 1 : kSteps; i <= kSteps; ++i) {
    const double hi = hi_max * i / kSteps;
    const auto [hi_err, hi_out] = pos.clipped(hi);
    for (int j = lo_max > 0 ? 1 : kSteps; j <= kSteps; ++j) {
      const double lo = lo_max * j / kSteps;
      const auto [lo_err, lo_out] = neg.clipped(lo);
      const double step = (hi + lo) / 255.0;
      const double err = hi_err + lo_err + (total - hi_out - lo_out) * step * step / 12.0;
      if (err < best) {
        best = err;
        r = {static_cast<float>(-lo), static_cast<float>(hi)};
      }
    }
  }
  return r;
}

FloatRange RangeObserver::range(CalibrationMethod method, double percentile) const {
  if (count_ == 0 || width_ == 0) return {min_, max_};
  switch (method) {
    case CalibrationMethod::kMinMax: return {min_, max_};
    case CalibrationMethod::kPercentile: return percentile_range(percentile);
    case CalibrationMethod::kEntropy: return entropy_range();
    case CalibrationMethod::kMse: return mse_range();
  }
  return {min_, max_};
}

}  // namespace nn::quantize
