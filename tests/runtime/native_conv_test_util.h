// Shared by the native conv kernel tests (dense, grouped, 8-column panel, Winograd): the
// conv's data, the conv in double as the reference, and a run of the kernel that checks it
// writes nothing past its output.
#pragma once

#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "delegates/cpu/native_epilogue.h"
#include "delegates/cpu/native_kernels.h"

namespace nn_test {

// The epilogues the conv kernels' tests run each shape with.
enum class Stage { kNone, kRelu6, kHardSwish, kResidual };

inline nn::cpu::Epilogue epilogue_of(Stage s) {
  nn::cpu::Epilogue e;
  if (s == Stage::kRelu6) e.lo = 0.f, e.hi = 6.f;
  if (s == Stage::kHardSwish) e.hard_swish = true;
  if (s == Stage::kResidual) e.residual = true, e.res_lo = -1.f, e.res_hi = 1.5f;
  return e;
}

struct NativeConvData {
  std::vector<float> input, filter, bias, residual;
};

// The conv in double (NHWC input, filter OHWI with I = in_c / groups, no dilation), then
// the epilogue's stages on the float sum.
inline std::vector<float> direct_conv(const nn::cpu::NativeConvShape& s, const NativeConvData& d,
                                      const nn::cpu::Epilogue& e) {
  const uint32_t gi = s.in_c / s.groups, go = s.out_c / s.groups;
  std::vector<float> out(size_t(s.batch) * s.out_h * s.out_w * s.out_c);
  for (uint32_t b = 0; b < s.batch; ++b)
    for (uint32_t oy = 0; oy < s.out_h; ++oy)
      for (uint32_t ox = 0; ox < s.out_w; ++ox)
        for (uint32_t o = 0; o < s.out_c; ++o) {
          const uint32_t g = o / go;
          double acc = d.bias[o];
          for (uint32_t ky = 0; ky < s.kernel_h; ++ky)
            for (uint32_t kx = 0; kx < s.kernel_w; ++kx) {
              const int64_t iy = int64_t(oy) * s.stride_h + ky - s.pad_top;
              const int64_t ix = int64_t(ox) * s.stride_w + kx - s.pad_left;
              if (iy < 0 || ix < 0 || iy >= s.in_h || ix >= s.in_w) continue;
              const float* x = &d.input[((size_t(b) * s.in_h + iy) * s.in_w + ix) * s.in_c + size_t(g) * gi];
              const float* w = &d.filter[((size_t(o) * s.kernel_h + ky) * s.kernel_w + kx) * gi];
              for (uint32_t c = 0; c < gi; ++c) acc += double(x[c]) * w[c];
            }
          const size_t at = ((size_t(b) * s.out_h + oy) * s.out_w + ox) * s.out_c + o;
          float v = nn::cpu::apply_epilogue(e, float(acc), d.residual[at]);
          if (e.swish) v = v / (1.f + std::exp(-v));
          out[at] = v;
        }
  return out;
}

// Runs `op` (n output floats) on a NaN-filled scratch of its scratch_bytes() (its contents
// are undefined on entry) and fails the test if it wrote past the output.
inline std::vector<float> run_native(const nn::cpu::NativeOp& op, const NativeConvData& d,
                                     const nn::cpu::Epilogue& e, size_t n, pthreadpool_t pool) {
  std::vector<float> out(n + 16, -7.f);
  const size_t scratch_floats = op.scratch_bytes() / sizeof(float) + 16;
  auto scratch = nn::cpu::allocate_floats(scratch_floats);
  std::fill_n(scratch.get(), scratch_floats, std::numeric_limits<float>::quiet_NaN());
  nn::cpu::NativeArgs a;
  a.input = d.input.data();
  a.residual = e.residual ? d.residual.data() : nullptr;
  a.output = out.data();
  a.scratch = scratch.get();
  a.pool = pool;
  op.run(a);
  for (size_t i = n; i < n + 16; ++i) EXPECT_EQ(out[i], -7.f) << "wrote past the output";
  out.resize(n);
  return out;
}

}  // namespace nn_test
