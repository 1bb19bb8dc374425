// Adaptive rounding of a filter's int8 values (AdaRound's idea, Nagel et al. 2020, solved
// greedily on its quadratic form): each value may round down or up instead of to nearest,
// whichever makes the op's output error on calibration inputs smallest. Scales (symmetric,
// per channel) stay those of rounding to nearest.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::quantize {

// What adaptive rounding did to one op: the squared output error the filter's rounding
// brings on the calibration inputs (summed over channels), rounded to nearest and adapted,
// and how many values round the other way (on the samples it was fitted to).
struct RoundingResult {
  std::vector<int8_t> values;  // the filter's int8 values (empty: op not handled)
  double nearest_error = 0, adapted_error = 0;
  size_t flipped = 0;
};

// Op k's filter (CONV_2D with NHWC layout and one group, DEPTHWISE_CONV_2D with depth
// multiplier 1, FULLY_CONNECTED) rounded to minimise sum over output channels of
// E[(dw_c . x)^2], dw_c the rounding error of channel c's filter and x the input patches it
// sees on `inputs` (per calibration sample, op k's activation input 0). `centered`: minimise
// the patches' covariance form instead (the mean error is what bias correction removes).
// Values stay within one step of the float value / scale, in [-127, 127]. Ops it does not
// handle return no values.
Result<RoundingResult> adaptive_filter_rounding(const Model& model, uint32_t k,
                                                const std::vector<const std::vector<float>*>& inputs,
                                                bool per_channel, bool centered);

}  // namespace nn::quantize
