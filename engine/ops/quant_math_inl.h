// Template bodies of ops/quant_math.h.
#pragma once

#include <algorithm>
#include <cmath>

namespace nn::quant {

template <typename F>
std::vector<int32_t> lookup_table(const Operand& input, const Operand& output, F f) {
  const Range in_range = type_range(input.type), out_range = type_range(output.type);
  std::vector<int32_t> table(256);
  for (int32_t q = in_range.lo; q <= in_range.hi; ++q) {
    const double x = double(input.scale) * (q - input.zero_point);
    const double y = std::round(f(x) / double(output.scale)) + output.zero_point;
    table[size_t(q - in_range.lo)] =
        static_cast<int32_t>(std::clamp(y, double(out_range.lo), double(out_range.hi)));
  }
  return table;
}

}  // namespace nn::quant
