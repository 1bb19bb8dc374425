#include "ops/quant_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nn::quant {

Multiplier quantize_multiplier(double real) {
  Multiplier m;
  if (real == 0.0 || !std::isfinite(real)) return m;
  int exponent = 0;
  const double mantissa = std::frexp(real, &exponent);  // in [0.5, 1)
  int64_t fixed = static_cast<int64_t>(std::round(mantissa * double(int64_t{1} << 31)));
  if (fixed == (int64_t{1} << 31)) {
    fixed /= 2;
    ++exponent;
  }
  if (exponent < -31) return m;  // every bit would shift out: flush to zero as NNAPI does
  m.multiplier = static_cast<int32_t>(fixed);
  m.shift = exponent;
  return m;
}

int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  const bool overflow = a == b && a == std::numeric_limits<int32_t>::min();
  const int64_t ab = int64_t{a} * int64_t{b};
  const int32_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
  const int32_t high = static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // truncating division
  return overflow ? std::numeric_limits<int32_t>::max() : high;
}

int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  if (exponent <= 0) return x;
  // In 64 bits, so a file's extreme scales (an exponent past 31) stay defined: x / 2^e
  // rounded half away from zero, 0 or -1 there.
  const int e = std::min(exponent, 62);
  const int64_t mask = (int64_t{1} << e) - 1;
  const int64_t remainder = int64_t{x} & mask;
  const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return static_cast<int32_t>((int64_t{x} >> e) + (remainder > threshold ? 1 : 0));
}

int32_t multiply_by_quantized_multiplier(int32_t x, Multiplier m) {
  // Past a left shift of 32 every x but 0 saturates, as it does at 32.
  const int left = m.shift > 0 ? std::min(m.shift, 32) : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  const int64_t shifted = std::clamp<int64_t>(int64_t{x} * (int64_t{1} << left),
                                              std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max());
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(static_cast<int32_t>(shifted), m.multiplier),
                                right);
}

float fp32_scale(float input_scale, float filter_scale, float output_scale) {
  const float inverse_output_scale = 1.f / output_scale;
  return (filter_scale * input_scale) * inverse_output_scale;
}

int32_t requantize_fp32(int32_t acc, float scale) {
  // Past +-2^20 every 8-bit output is clamped: bounding keeps the conversion defined.
  constexpr float kBound = 1 << 20;
  return static_cast<int32_t>(round_half_even(std::clamp(static_cast<float>(acc) * scale, -kBound, kBound)));
}

Requantizer make_requantizer(Requantization mode, float input_scale, float filter_scale, float output_scale) {
  Requantizer r;
  r.mode = mode;
  if (mode == Requantization::kFp32)
    r.scale = fp32_scale(input_scale, filter_scale, output_scale);
  else
    r.fixed = quantize_multiplier(double(input_scale) * filter_scale / double(output_scale));
  return r;
}

Fp32Add::Fp32Add(float a_scale, float b_scale, float out_scale, bool subtract) {
  a_ratio_ = a_scale / out_scale;
  b_ratio_ = b_scale / out_scale;
  if (subtract) b_ratio_ = -b_ratio_;
  const float max_ratio = std::max(std::abs(a_ratio_), std::abs(b_ratio_));
  int exponent = 0;
  std::frexp(max_ratio, &exponent);  // max_ratio in [2^(exponent-1), 2^exponent)
  --exponent;                        // floor(log2(max_ratio)), the float's biased exponent - 127
  in_range_ = std::isfinite(max_ratio) && exponent >= -10 && exponent < 8;
  if (!in_range_) return;
  shift_ = 21 - exponent;  // the larger multiplier lands in [2^21, 2^22)
  const float scale_multiplier = std::ldexp(1.f, shift_);
  a_multiplier_ = std::lrint(a_ratio_ * scale_multiplier);
  b_multiplier_ = std::lrint(b_ratio_ * scale_multiplier);
}

int32_t Fp32Add::apply(int32_t a_centred, int32_t b_centred) const {
  if (!in_range_)
    return static_cast<int32_t>(round_half_even(std::clamp(
        static_cast<float>(a_centred) * a_ratio_ + static_cast<float>(b_centred) * b_ratio_, -1e6f, 1e6f)));
  const int64_t acc = int64_t{a_centred} * a_multiplier_ + int64_t{b_centred} * b_multiplier_;
  // Rounding divide by 2^shift, ties away from zero (q8vadd's remainder test).
  const int64_t mask = (int64_t{1} << shift_) - 1;
  const int64_t remainder = acc & mask;
  const int64_t threshold = (mask >> 1) + (acc < 0 ? 1 : 0);
  const int64_t q = (acc >> shift_) + (remainder > threshold ? 1 : 0);
  return static_cast<int32_t>(std::clamp<int64_t>(q, -(int64_t{1} << 20), int64_t{1} << 20));
}

Range type_range(OperandType type) {
  return type == OperandType::TENSOR_QUANT8_ASYMM ? Range{0, 255} : Range{-128, 127};
}

Range activation_range(int32_t fuse_code, const Operand& output) {
  // fuse_code_range() quantized: the float clamp's bounds, rounded onto the output's grid.
  Range r = type_range(output.type);
  const ActivationRange f = fuse_code_range(fuse_code);
  // In double and saturated before the cast: a tiny (denormal) scale puts 6 / scale past
  // int32, and the result is clamped to the type's range anyway.
  auto quantize = [&](float v) {
    const double q = std::round(static_cast<double>(v) / output.scale) + output.zero_point;
    return static_cast<int32_t>(q > 1e9 ? 1e9 : (q >= -1e9 ? q : -1e9));  // NaN goes low
  };
  if (std::isfinite(f.lo)) r.lo = std::max(r.lo, quantize(f.lo));
  if (std::isfinite(f.hi)) r.hi = std::min(r.hi, quantize(f.hi));
  return r;
}

std::vector<int32_t> centered(const Operand& operand, const void* data) {
  const size_t n = num_elements(operand.dims);
  std::vector<int32_t> v(n);
  if (operand.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL ||
      operand.type == OperandType::TENSOR_QUANT8_SYMM) {
    const int8_t* q = static_cast<const int8_t*>(data);
    for (size_t i = 0; i < n; ++i) v[i] = q[i];
    return v;
  }
  for (size_t i = 0; i < n; ++i) v[i] = load(data, operand.type, i) - operand.zero_point;
  return v;
}

std::vector<Requantizer> conv_requantizers(Requantization mode, const Operand& input, const Operand& filter,
                                           const Operand& output, size_t channels) {
  std::vector<Requantizer> m(channels);
  const bool per_channel = filter.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;
  for (size_t c = 0; c < channels; ++c) {
    const float filter_scale = per_channel ? filter.channel_quant.scales[c] : filter.scale;
    m[c] = make_requantizer(mode, input.scale, filter_scale, output.scale);
  }
  return m;
}

void requantize_store(const int32_t* acc, size_t count, const std::vector<Requantizer>& requantizers,
                      int32_t fuse_code, const Operand& output, void* out) {
  const Range r = activation_range(fuse_code, output);
  const size_t channels = requantizers.size();
  for (size_t i = 0; i < count; ++i) {
    const int32_t v = requantizers[i % channels].apply(acc[i]) + output.zero_point;
    store(out, output.type, i, std::clamp(v, r.lo, r.hi));
  }
}

}  // namespace nn::quant

namespace nn {

const char* requantization_name(Requantization mode) {
  return mode == Requantization::kFp32 ? "fp32" : "nnapi";
}

std::optional<Requantization> parse_requantization(std::string_view name) {
  if (name == "nnapi") return Requantization::kNnapi;
  if (name == "fp32") return Requantization::kFp32;
  return std::nullopt;
}

}  // namespace nn
