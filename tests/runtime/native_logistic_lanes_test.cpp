// The AVX2 logistic (logistic8, native_epilogue.h) is the AVX-512 one (logistic16) to the
// bit, though its steps differ (the negation folded into the FMAs' signs, the exponent bias
// into the rounding constant): compared through the swish stage, x * logistic(x), on both
// ISAs over a sweep of float bit patterns that spans every exponent, both clamps and the
// special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "delegates/cpu/native_kernels.h"

namespace {

TEST(NativeLogistic, Avx2LanesMatchAvx512Bits) {
#if defined(__x86_64__) || defined(__i386__)
  if (!nn::cpu::native_conv_supported() || !__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "needs AVX2 and AVX-512F";
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, sizeof f);
    x.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.f, -0.f, 1.f, -1.f, 87.f, -87.f, 87.5f, -87.5f, 88.f, -88.f, 1e30f, -1e30f, inf, -inf})
    x.push_back(f);
  x.resize((x.size() + 7) / 8 * 8, 0.5f);  // whole 8-lane vectors: no scalar tail
  std::vector<float> avx2 = x, avx512 = x;
  nn::cpu::swish_inplace(avx2.data(), 1, avx2.size(), avx2.size(), false);
  nn::cpu::swish_inplace(avx512.data(), 1, avx512.size(), avx512.size(), true);
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(avx2[i]) && std::isnan(avx512[i])) continue;
    if (std::memcmp(&avx2[i], &avx512[i], sizeof(float)) != 0 && differ++ < 5)
      ADD_FAILURE() << "x " << x[i] << ": AVX2 " << avx2[i] << ", AVX-512 " << avx512[i];
  }
  EXPECT_EQ(differ, 0u) << "of " << x.size();
#else
  GTEST_SKIP() << "x86 only";
#endif
}

}  // namespace
