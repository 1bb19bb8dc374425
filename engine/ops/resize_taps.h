// Bilinear sampling positions along one axis, by TFLite's coordinate rules (ops/resize.cpp
// states them). Shared by the reference kernel, the CPU delegate's native resize and the
// Vulkan delegate (which uploads them to its shader), so all sample the same neighbours
// with the same weights.
#pragma once

#include <cstdint>
#include <vector>

namespace nn {

// The two clamped neighbours of one output coordinate and the weight of the upper one.
struct BilinearTap {
  uint32_t lo = 0, hi = 0;
  float frac = 0.f;
};

std::vector<BilinearTap> bilinear_taps(uint32_t in, uint32_t out, bool align_corners, bool half_pixel);

}  // namespace nn
