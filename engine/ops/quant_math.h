// The integer reference kernels' arithmetic (engine/ops/OPS.md, "Quantized arithmetic"),
// in the two modes of nn::Requantization:
// - kNnapi (default): a real multiplier becomes an int32 fixed-point multiplier and a
//   power-of-two shift, applied with gemmlowp's rounding doubling high multiply and rounding
//   divide by a power of two, exactly as NNAPI's CPU reference (and TFLite's reference
//   kernels) do;
// - kFp32: qnnpack's (PyTorch's quantized CPU engine): the multiplier as a float, the
//   accumulator converted to float, multiplied and rounded once to nearest, ties to even.
// The integer reference kernels of conv, depthwise, transpose conv, fully connected, add,
// mul, pools, mean and the activations all requantize through these functions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/requantization.h"

namespace nn::quant {

// real ~= multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) (or 0 for real == 0).
// shift > 0 is a left shift (real >= 1).
struct Multiplier {
  int32_t multiplier = 0;
  int shift = 0;
};

// NNAPI's QuantizeMultiplier: frexp, round the mantissa to Q31 (half away from zero), a
// mantissa that rounds up to 2^31 is halved with shift + 1, and shifts below -31 flush to 0.
Multiplier quantize_multiplier(double real);

// gemmlowp SaturatingRoundingDoublingHighMul: (a * b * 2 + 2^31 rounding nudge) >> 32 with
// the nudge toward zero for negatives, saturating INT32_MIN * INT32_MIN to INT32_MAX.
int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b);

// gemmlowp RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero.
int32_t rounding_divide_by_pot(int32_t x, int exponent);

// TFLite MultiplyByQuantizedMultiplier: x * real, as
// rounding_divide_by_pot(srdhm(x << left_shift, multiplier), right_shift). The left shift
// saturates to int32 (TFLite leaves that overflow undefined).
int32_t multiply_by_quantized_multiplier(int32_t x, Multiplier m);

// qnnpack's requantization scale, each step in float as PyTorch's
// generate_requantization_scales: (input_scale * filter_scale) * (1 / output_scale).
float fp32_scale(float input_scale, float filter_scale, float output_scale);

// qnnpack's fp32 requantization (the SSE2 kernels' cvtepi32_ps, mul_ps, cvtps_epi32; the
// scalar ones' lrintf): float(acc) * scale rounded to nearest, ties to even. The product is
// bounded first (the caller adds the zero point and clamps to at most 8 bits anyway).
int32_t requantize_fp32(int32_t acc, float scale);

// Rounds to nearest, ties to even (std::nearbyint in the default rounding mode), the rule
// PyTorch's quantize_per_tensor and qnnpack's float paths follow; NNAPI's kernels use
// std::round (ties away from zero).
inline float round_half_even(float x) { return std::nearbyint(x); }

// One output channel's rescale of an int32 accumulator, in either mode.
struct Requantizer {
  Requantization mode = Requantization::kNnapi;
  Multiplier fixed;   // kNnapi
  float scale = 0.f;  // kFp32
  int32_t apply(int32_t acc) const {
    return mode == Requantization::kFp32 ? requantize_fp32(acc, scale) : multiply_by_quantized_multiplier(acc, fixed);
  }
};
// The rescale by input_scale * filter_scale / output_scale: quantize_multiplier of the
// product in double (NNAPI), or fp32_scale (qnnpack).
Requantizer make_requantizer(Requantization mode, float input_scale, float filter_scale, float output_scale);

// Storage range of a quant8 type: [0, 255] or [-128, 127].
struct Range {
  int32_t lo = 0, hi = 0;
};
Range type_range(OperandType type);

// NNAPI's CalculateActivationRange for quant8: the fused activation's bounds quantized with
// the output's scale and zero point (zp + round(bound / scale)), intersected with the type range.
Range activation_range(int32_t fuse_code, const Operand& output);

// Reads element i of a quant8 tensor (uint8 or int8 storage) as int32.
inline int32_t load(const void* data, OperandType type, size_t i) {
  return type == OperandType::TENSOR_QUANT8_ASYMM ? int32_t(static_cast<const uint8_t*>(data)[i])
                                                  : int32_t(static_cast<const int8_t*>(data)[i]);
}
// Stores an int32 already clamped to the type's range.
inline void store(void* data, OperandType type, size_t i, int32_t v) {
  if (type == OperandType::TENSOR_QUANT8_ASYMM)
    static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
  else
    static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
}

// The values of a quant8 tensor minus its zero point (0 for symmetric per-channel).
std::vector<int32_t> centered(const Operand& operand, const void* data);

// One requantizer per output channel of a conv / FC:
// input_scale * filter_scale[c] / output_scale (filter per-tensor or per-channel).
std::vector<Requantizer> conv_requantizers(Requantization mode, const Operand& input, const Operand& filter,
                                           const Operand& output, size_t channels);

// Writes int32 accumulators (NHWC: channel = index % channels) to a quant8 output:
// requantize, + output zero point, clamp to the activation range.
void requantize_store(const int32_t* acc, size_t count, const std::vector<Requantizer>& requantizers,
                      int32_t fuse_code, const Operand& output, void* out);

// qnnpack's quantized ADD (q8vadd): each input's scale ratio to the output as an integer
// multiplier of 2^-shift (shift = 21 - the larger ratio's exponent), the centred inputs
// multiplied and summed in integers, one rounding divide by 2^shift (ties away from zero).
// SUB negates the second multiplier (qnnpack has no SUB). Ratios outside qnnpack's range
// ([2^-10, 2^8)) fall back to the float sum rounded to even.
struct Fp32Add {
  Fp32Add(float a_scale, float b_scale, float out_scale, bool subtract);
  int32_t apply(int32_t a_centred, int32_t b_centred) const;  // before + output zero point

 private:
  int64_t a_multiplier_ = 0, b_multiplier_ = 0;
  int shift_ = 0;
  bool in_range_ = true;
  float a_ratio_ = 0.f, b_ratio_ = 0.f;
};

// A 256-entry table mapping each input byte to its output byte through a real function f
// (dequantize with the input's parameters, f in double, quantize with the output's: round half
// away from zero, clamp). Used where NNAPI's kernels are tables or fixed-point curves
// (LOGISTIC, TANH, HARD_SWISH): the table is the exactly rounded result.
template <typename F>
std::vector<int32_t> lookup_table(const Operand& input, const Operand& output, F f);

}  // namespace nn::quant

#include "ops/quant_math_inl.h"
