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
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t multiply_by_quantized_multiplier(int32_t x, Multiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  const int64_t shifted = std::clamp<int64_t>(int64_t{x} * (int64_t{1} << left),
                                              std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max());
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(static_cast<int32_t>(shifted), m.multiplier),
                                right);
}

Range type_range(OperandType type) {
  return type == OperandType::TENSOR_QUANT8_ASYMM ? Range{0, 255} : Range{-128, 127};
}

Range activation_range(int32_t fuse_code, const Operand& output) {
  Range r = type_range(output.type);
  auto quantize = [&](float f) { return output.zero_point + static_cast<int32_t>(std::round(f / output.scale)); };
  switch (static_cast<FuseCode>(fuse_code)) {
    case FuseCode::RELU:
      r.lo = std::max(r.lo, quantize(0.f));
      break;
    case FuseCode::RELU1:
      r.lo = std::max(r.lo, quantize(-1.f));
      r.hi = std::min(r.hi, quantize(1.f));
      break;
    case FuseCode::RELU6:
      r.lo = std::max(r.lo, quantize(0.f));
      r.hi = std::min(r.hi, quantize(6.f));
      break;
    case FuseCode::NONE:
      break;
  }
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

std::vector<Multiplier> conv_multipliers(const Operand& input, const Operand& filter, const Operand& output,
                                         size_t channels) {
  std::vector<Multiplier> m(channels);
  const bool per_channel = filter.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;
  for (size_t c = 0; c < channels; ++c) {
    const double filter_scale = per_channel ? filter.channel_quant.scales[c] : filter.scale;
    m[c] = quantize_multiplier(double(input.scale) * filter_scale / double(output.scale));
  }
  return m;
}

void requantize_store(const int32_t* acc, size_t count, const std::vector<Multiplier>& multipliers,
                      int32_t fuse_code, const Operand& output, void* out) {
  const Range r = activation_range(fuse_code, output);
  const size_t channels = multipliers.size();
  for (size_t i = 0; i < count; ++i) {
    const int32_t v = multiply_by_quantized_multiplier(acc[i], multipliers[i % channels]) + output.zero_point;
    store(out, output.type, i, std::clamp(v, r.lo, r.hi));
  }
}

}  // namespace nn::quant
