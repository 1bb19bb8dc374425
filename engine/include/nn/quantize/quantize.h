// Post-training quantization: a float model plus calibration inputs -> the same model with
// NNAPI's quantized types (what `nnconvert --quantize int8` writes).
//
//   float model --calibrate (every activation's range)--> ranges
//     --per op: quantize it alone, run it on the calibration samples' float inputs--> op error
//     --ops that validate quantized and stay under the per-op limits--> candidates
//     --whole model over the output budget: the candidate costing the model's output most
//       returns to float, until under it--> rewrite --> int8 model
//
// The int8 model follows NNAPI's rules: activations TENSOR_QUANT8_ASYMM_SIGNED (per tensor,
// asymmetric), conv/depthwise/transpose-conv filters TENSOR_QUANT8_SYMM_PER_CHANNEL
// (channelDim 0 for OHWI filters, 3 for depthwise [1,H,W,Cout]) or per-tensor symmetric,
// FULLY_CONNECTED weights per tensor (NNAPI has no per-channel FC), biases TENSOR_INT32 with
// scale = input scale x filter scale and zero point 0, LOGISTIC output scale 1/256 (zero
// point -128), TANH 1/128. Model inputs and outputs stay float: QUANTIZE where a float
// tensor enters quantized ops, DEQUANTIZE where a quantized tensor leaves them, and nothing
// between two quantized ops.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "nn/runtime/tensor.h"
#include "nn/status.h"

namespace nn::quantize {

// How an activation's range is chosen from what calibration saw.
//  kMinMax:     the extremes seen.
//  kPercentile: the `percentile`-th and (100 - percentile)-th percentiles of all values seen
//               (outliers clipped).
//  kEntropy:    the clipping range whose 256-level quantization keeps the histogram closest
//               in KL divergence (TensorRT's calibration), searched per side of zero.
//  kMse:        the clipping range [lo, hi] whose int8 form gives the tensor's values the
//               least mean squared error (rounding inside, clipping outside), searched over
//               a grid of both ends on the histogram.
enum class CalibrationMethod { kMinMax, kPercentile, kEntropy, kMse };
std::optional<CalibrationMethod> calibration_method_from_name(std::string_view name);
std::string_view calibration_method_name(CalibrationMethod method);

enum class WeightRounding { kNearest, kAdaptive };
std::optional<WeightRounding> weight_rounding_from_name(std::string_view name);

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::kPercentile;
  double percentile = 99.99;
  // Headroom: each calibrated activation range widened by a fraction on each side away
  // from zero. A few correlated calibration samples (a video's frames) see less than the
  // tails new inputs reach, and an int8 tensor clips whatever lies outside its range.
  // Unset: per tensor, the samples in 4 contiguous chunks, each held out in turn: the most
  // a held-out chunk's range reaches past the range of the other three (a fraction of it,
  // per side, at most max_auto_margin). A tensor whose range the rest of the data predicts
  // keeps its resolution; one that new data overshoots gets the headroom it needed.
  std::optional<double> range_margin;
  double max_auto_margin = 1.0;
  // Filters per output channel (NNAPI's TENSOR_QUANT8_SYMM_PER_CHANNEL), else one scale.
  bool per_channel = true;
  // An op whose output error, quantized alone, exceeds this (relative RMS: ||q - f|| / ||f||
  // over the error samples) stays float.
  double max_op_error = 0.25;
  // An op whose quantization alone moves the model's output by more than this (relative
  // RMS of output 0 against the float model) stays float: the error that reaches the
  // result, which a local error does not tell (an op early in the model, or before a
  // sensitive one, weighs more).
  double max_op_output_error = 0.01;
  // The whole-model budget: per-op limits do not bound how the errors add up, so while the
  // int8 model's output 0 is further than this from the float model's (relative RMS over
  // the error samples), an int8 op returns to float (budget_lookahead says which). 0: none.
  double max_output_error = 0;
  // Each budget step tries this many candidates (those with the largest own output error)
  // and returns the one that leaves the model's error lowest; 1: the largest, untried.
  size_t budget_lookahead = 4;
  // Bias correction: each quantized conv/FC's bias absorbs the mean shift (per output
  // channel, over the error samples) that quantizing its filter brings to its output.
  bool bias_correction = true;
  // How conv / depthwise / FC filters round to int8: to nearest, or adaptively (each value
  // down or up, whichever leaves the op's output error smallest on as many calibration
  // samples as error_samples, each the one after an error sample: weight_rounding.h).
  WeightRounding weight_rounding = WeightRounding::kNearest;
  // Calibration samples (spread evenly over the set) whose every intermediate is kept to
  // measure each op's error and the model's.
  size_t error_samples = 8;
  // Where calibration runs the float model (every intermediate readable).
  std::vector<std::string> delegates = {"cpu"};
  int threads = 1;
  // Ops (indices in the float model) kept float whatever their error.
  std::vector<uint32_t> keep_float;
};

// Fills the model's float inputs (model.inputs order, IR layout) for calibration sample `i`.
using InputProvider = std::function<Status(size_t sample, std::vector<Tensor>& inputs)>;

struct OpQuantReport {
  uint32_t op_index = 0;  // in the float model after RELU* folding (fold_activations)
  OperationType type{};
  std::string output_name;
  bool quantized = false;
  double error = -1;      // relative RMS error of its output quantized alone; -1 = not measured
  double output_error = -1;  // relative RMS error of the model's output 0 with only this op quantized
  float range_lo = 0, range_hi = 0;  // the calibrated range of output 0 (float outputs)
  std::string reason;     // why it stays float ("" when quantized)
  bool returned_by_budget = false;  // passed the per-op limits, returned to float by the budget
  // Adaptive weight rounding: the squared output error its filter's rounding brings, to
  // nearest and adapted (0 and 0: not applied), and how many values round the other way.
  double rounding_error_nearest = 0, rounding_error_adapted = 0;
  size_t rounding_flipped = 0;
};

// One step of the whole-model budget: after op `op_index` returned to float (none for the
// first step), `quantized_ops` stay int8 and the model's output 0 is `output_error` off.
struct BudgetStep {
  std::optional<uint32_t> op_index;
  size_t quantized_ops = 0;
  double output_error = 0;
};

struct QuantizeReport {
  CalibrationMethod method{};
  size_t samples = 0;
  std::vector<OpQuantReport> ops;
  // Per model output: relative RMS error of the whole quantized model (reference kernels)
  // against the float model over the error samples.
  std::vector<double> output_errors;
  double output_budget = 0;  // QuantizeOptions::max_output_error
  std::vector<BudgetStep> budget_steps;  // the trade-off the budget walked (empty: no budget)
  size_t quantized_ops() const;
  // One line per op, then the summary: what nnconvert prints.
  std::string to_string() const;
};

// Quantizes `model` (validated, float) after running it on `num_samples` calibration inputs.
Result<Model> quantize_model(const Model& model, size_t num_samples, const InputProvider& inputs,
                             const QuantizeOptions& options, QuantizeReport* report = nullptr);

// What the int8 model costs against the float one where it will run: both on the CPU
// delegate (`cpu`: its switches), `threads` threads, calibration sample 0 as the input,
// `runs` timed runs of each alternating after a warm-up (so both see the same machine
// load), medians. The error limits keep ops float, and each border between float and int8
// ops is a QUANTIZE or DEQUANTIZE: an int8 model is not always the faster one, and nnconvert
// says which it is.
struct LatencyComparison {
  double float_ms = 0, int8_ms = 0;
  size_t runs = 0;
  size_t int8_ops = 0, float_ops = 0;  // of the int8 model's ops other than the converts
  size_t converts = 0;                 // its QUANTIZE and DEQUANTIZE ops
  double ratio() const { return float_ms > 0 ? int8_ms / float_ms : 0; }
  std::string to_string() const;  // nnconvert's lines
};
Result<LatencyComparison> compare_latency(std::shared_ptr<const Model> float_model,
                                          std::shared_ptr<const Model> int8_model,
                                          const InputProvider& inputs, size_t runs = 21, int threads = 1,
                                          const CpuOptions& cpu = {});

}  // namespace nn::quantize
