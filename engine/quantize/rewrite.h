// The graph side of post-training quantization: which ops may be quantized, their int8
// operands by NNAPI's rules, and the QUANTIZE / DEQUANTIZE at the float/int8 boundaries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"
#include "quantize/range_observer.h"

namespace nn::quantize {

using Ranges = std::vector<std::optional<FloatRange>>;  // per operand; set for float activations
// Per op: what to subtract from its float bias (per output channel) before quantizing it,
// bias correction's estimate of the mean shift its int8 filter brings. Empty: nothing.
using BiasShifts = std::vector<std::vector<float>>;
// Per op: its filter's int8 values when chosen other than by rounding to nearest (adaptive
// rounding, weight_rounding.h), in the filter's layout with int8_filter's scales. Empty: nearest.
using FilterValues = std::vector<std::vector<int8_t>>;

// A filter's symmetric int8 form: one scale per channel along channel_dim (or one in all
// when channel_dim < 0), each value rounded to nearest within [-127, 127].
struct Int8Filter {
  std::vector<int8_t> values;
  std::vector<float> scales;  // per channel along channel_dim, or one
  size_t inner = 1;           // elements after channel_dim (the stride of a channel step)
};
Int8Filter int8_filter(const Operand& w, int channel_dim);
// The channel dim op `type`'s filter is quantized along (-1: one scale: FC, or !per_channel,
// or an op without a filter).
int filter_channel_dim(OperationType type, bool per_channel);

// TENSOR_QUANT8_ASYMM_SIGNED parameters covering `range` widened to hold 0 (so zero, ReLU's
// floor and zero padding are exact).
struct QuantParams {
  float scale = 1.f;
  int32_t zero_point = 0;
};
QuantParams asymmetric_int8(FloatRange range);

// Whether op k is one quantization may try (float activations in and out, static weights);
// the reason when not. Whether its quantized form is valid is for validation to say.
bool is_candidate(const Model& model, uint32_t k, std::string* reason);

// Ops whose int8 output must take their input's scale and zero point (they move or select
// values: reshape, pools, pads, resizes, ...).
bool output_takes_input_params(OperationType type);

// The quantized model: ops with quantize_op[k] get int8 activations (params from `ranges`),
// int8 weights (per channel when per_channel and NNAPI allows it) and int32 biases; QUANTIZE
// and DEQUANTIZE where int8 meets float. Operands no longer used are dropped. Validated.
// `shifts`, when given, holds one entry per op of `model`.
// `filters`, when given, holds one entry per op of `model` (FilterValues).
Result<Model> rewrite_quantized(const Model& model, const std::vector<bool>& quantize_op, const Ranges& ranges,
                                bool per_channel, const BiasShifts* shifts = nullptr,
                                const FilterValues* filters = nullptr);

// Whether op k has a constant float filter and bias that quantization would turn int8 and
// int32 (what bias correction applies to).
bool has_quantizable_bias(const Model& model, uint32_t k);

// A one-op model (extract_op's) in float with its fused activation off, and the same with
// its filter replaced by what its int8 form dequantizes to: their outputs differ by what
// the filter's rounding alone brings.
Model without_activation(const Model& one_op);
// `values`, when not empty, are the filter's int8 values (FilterValues) instead of nearest.
Model with_int8_filter_values(const Model& one_op, bool per_channel, const std::vector<int8_t>& values = {});

// The float model with each RELU / RELU1 / RELU6 folded into the fuse code of the conv,
// depthwise, transpose conv, FULLY_CONNECTED, ADD, SUB or MUL that is its input's only
// writer and reader, as NNAPI's quantized ops take it: the producer's int8 output then
// covers the clamped range only. Validated.
Result<Model> fold_activations(const Model& model);

// Op k alone as a model: its non-constant inputs become model inputs (in first-use order,
// `input_operands` says which operand of `model` each is), its outputs model outputs.
Model extract_op(const Model& model, uint32_t k, const Ranges& ranges, Ranges* sub_ranges,
                 std::vector<uint32_t>* input_operands);

}  // namespace nn::quantize
