// nnbackground adaptive=true's choice between full quality and the fast path for one frame.
// Header only (no GStreamer), so it is tested on its own.
#pragma once

#include <algorithm>

#include "latency_window.h"

namespace nn::plugins {

// Each kind of frame (full; fast that blurs; fast that reuses a blur) has its uncontended
// cost, the lowest seen at the same caps and settings; the slowdown is the p90 of recent
// frames' cost over their own kind's lowest. CPU contention slows every kind alike, so the
// full-quality cost is still predicted while only fast frames run -- and that prediction,
// not what a fast frame cost, is what goes upstream into nnsegment's budget, so a stretch
// of fast frames does not shrink the time the next frames get.
//
// The warm-up at caps times both kinds back to back (record_warm_up): their ratio holds
// whatever the contention was then. The full cost is also predicted as that ratio times
// the lowest fast cost since, so a warm-up slowed by a busy machine (a 4K stream on a
// loaded host: 96 ms measured for a 10 ms composite) does not keep every later frame on
// the fast path: the fast frames show the machine is quicker now, full quality comes back,
// and its own frames then measure it.
class QualityGovernor {
 public:
  enum Kind { kFull, kFastBlurred, kFastReused };

  bool choose_fast(double left_ms) const {
    return lowest_full() > 0 && full_ms() > left_ms;  // not measured yet: measure it
  }
  // Full quality's predicted cost now (0 until measured).
  double full_ms() const { return lowest_full() * std::max(1.0, slowdown_.percentile(90)); }
  // Records a frame; returns its cost as a full-quality frame would have had it.
  double record(Kind kind, double ms) {
    if (kind == kFull) full_measured_ = true;
    double& low = lowest_[kind];
    if (low <= 0 || ms < low) low = std::max(ms, 1e-3);
    slowdown_.add(ms / low);
    const double full = lowest_full();
    return full > 0 ? std::max(ms, full * ms / low) : ms;
  }
  // The warm-up's two composites, one of each kind, timed under the same conditions.
  void record_warm_up(double full_ms, Kind fast_kind, double fast_ms) {
    record(kFull, full_ms);
    full_measured_ = false;  // only the warm-up's, taken under whatever load there was then
    if (fast_kind == kFull || fast_ms <= 0) return;
    record(fast_kind, fast_ms);
    full_over_fast_[fast_kind] = full_ms / std::max(fast_ms, 1e-3);
  }
  void reset() {
    for (int k = 0; k < 3; ++k) lowest_[k] = full_over_fast_[k] = 0;
    full_measured_ = false;
    slowdown_.clear();
  }
  // The uncontended full-quality cost: the lowest full frame; until a frame has measured
  // it, less when a fast kind's lowest since the warm-up says so (the warm-up's ratio is
  // one noisy pair of samples: it corrects a slowed warm-up, it does not outrank frames).
  double lowest_full() const {
    double full = lowest_[kFull];
    if (full_measured_) return full;
    for (int k : {kFastBlurred, kFastReused})
      if (full_over_fast_[k] > 0 && lowest_[k] > 0) full = std::min(full, full_over_fast_[k] * lowest_[k]);
    return full;
  }

 private:
  double lowest_[3] = {0, 0, 0};
  double full_over_fast_[3] = {0, 0, 0};  // the warm-up's full cost over each fast kind's
  bool full_measured_ = false;            // a full frame recorded since the warm-up
  LatencyWindow slowdown_{16};
};

}  // namespace nn::plugins
