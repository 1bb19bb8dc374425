// Shared by the native conv kernel tests (dense, grouped, 8-column panel, k-blocked,
// Winograd): shapes, the conv's data, the conv in double as the reference, and a run of the
// kernel that checks it writes nothing past its output.
#pragma once

#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "delegates/cpu/native_epilogue.h"
#include "delegates/cpu/native_kernels.h"
#include "test_support.h"

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

// A k x k conv with SAME padding (kernel / 2 on top and left), stride `stride`, over h x w
// pixels, in_c -> out_c in `groups` groups.
inline nn::cpu::NativeConvShape same_conv_shape(uint32_t h, uint32_t w, uint32_t in_c, uint32_t out_c,
                                                uint32_t kernel, uint32_t stride, uint32_t groups = 1) {
  nn::cpu::NativeConvShape s;
  s.in_h = h, s.in_w = w, s.in_c = in_c, s.out_c = out_c, s.groups = groups;
  s.kernel_h = s.kernel_w = kernel;
  s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = kernel / 2;
  s.out_h = (h - 1) / stride + 1, s.out_w = (w - 1) / stride + 1;
  return s;
}

// The conv's input, filter (OHWI, in_c / groups per output channel), bias in [-1, 1] and a
// residual in [-2, 2], from seeds seed .. seed + 3.
inline NativeConvData random_conv_data(const nn::cpu::NativeConvShape& s, uint32_t seed) {
  NativeConvData d;
  d.input = random_floats(size_t(s.batch) * s.in_h * s.in_w * s.in_c, seed, -1.f, 1.f);
  d.filter = random_floats(size_t(s.out_c) * s.kernel_h * s.kernel_w * (s.in_c / s.groups), seed + 1, -1.f, 1.f);
  d.bias = random_floats(s.out_c, seed + 2, -1.f, 1.f);
  d.residual = random_floats(size_t(s.batch) * s.out_h * s.out_w * s.out_c, seed + 3, -2.f, 2.f);
  return d;
}

// A {h, w, in_c, out_c, kernel, stride, groups} case of the k-blocked conv tests, and its
// epilogue stage, for SCOPED_TRACE.
inline std::string describe(const uint32_t (&c)[7], Stage stage) {
  return std::to_string(c[0]) + "x" + std::to_string(c[1]) + " " + std::to_string(c[2]) + "->" +
         std::to_string(c[3]) + " kernel " + std::to_string(c[4]) + " stride " + std::to_string(c[5]) + " groups " +
         std::to_string(c[6]) + " stage " + std::to_string(int(stage));
}

// The grouped conv tests' cases: `groups` groups of group_in -> group_out channels over two
// h x w images, `pad` on every side, and an epilogue stage: 0 none, 1 RELU6, 2 HARD_SWISH
// (clamped to [-1, 1]), 3 a residual then RELU, 4 swish.
struct GroupedConvCase {
  uint32_t groups, group_in, group_out;
  uint32_t h, w;
  uint32_t kh, kw, stride, pad;
  int stage;
};

inline std::string describe(const GroupedConvCase& c) {
  return std::to_string(c.groups) + " groups of " + std::to_string(c.group_in) + "->" +
         std::to_string(c.group_out) + " on " + std::to_string(c.h) + "x" + std::to_string(c.w) + ", " +
         std::to_string(c.kh) + "x" + std::to_string(c.kw) + " stride " + std::to_string(c.stride) + " pad " +
         std::to_string(c.pad) + " stage " + std::to_string(c.stage);
}

inline nn::cpu::Epilogue grouped_epilogue_of(int stage) {
  nn::cpu::Epilogue e;
  if (stage == 1) e.lo = 0.f, e.hi = 6.f;
  if (stage == 2) e.lo = -1.f, e.hi = 1.f, e.hard_swish = true;
  if (stage == 3) e.residual = true, e.lo = -0.5f, e.res_lo = 0.f;
  if (stage == 4) e.swish = true;
  return e;
}

inline nn::cpu::NativeConvShape grouped_shape_of(const GroupedConvCase& c) {
  nn::cpu::NativeConvShape s;
  s.batch = 2;  // tiles of one image never read the other's
  s.groups = c.groups;
  s.in_h = c.h, s.in_w = c.w, s.in_c = c.groups * c.group_in, s.out_c = c.groups * c.group_out;
  s.kernel_h = c.kh, s.kernel_w = c.kw;
  s.stride_h = s.stride_w = c.stride;
  s.pad_top = s.pad_left = c.pad;
  // As much padding on the bottom / right as on the top / left.
  s.out_h = (c.h + 2 * c.pad - c.kh) / c.stride + 1;
  s.out_w = (c.w + 2 * c.pad - c.kw) / c.stride + 1;
  return s;
}

// The conv in double (NHWC input, filter OHWI with I = in_c / groups, taps dilation apart), then
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
              const int64_t iy = int64_t(oy) * s.stride_h + int64_t(ky) * s.dilation_h - s.pad_top;
              const int64_t ix = int64_t(ox) * s.stride_w + int64_t(kx) * s.dilation_w - s.pad_left;
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
// A depthwise conv's filter as NativeDepthwise takes it, [1, kh, kw, C], from d.filter in
// direct_conv's OHWI with one input per group.
inline std::vector<float> depthwise_filter(const nn::cpu::NativeConvShape& s, const NativeConvData& d) {
  std::vector<float> filter(d.filter.size());
  const size_t taps = size_t(s.kernel_h) * s.kernel_w;
  for (size_t o = 0; o < s.out_c; ++o)
    for (size_t t = 0; t < taps; ++t) filter[t * s.out_c + o] = d.filter[o * taps + t];
  return filter;
}

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

// A fast path's kernel `on` against the same conv without it (`off`, at 1 thread): `on` at
// 1 thread and on `pool` within 2e-5 sqrt(k) of `want` (the conv in double, k products per
// output) and the same bits as `off`.
inline void expect_same_bits_as_without(const nn::cpu::NativeOp& on, const nn::cpu::NativeOp& off,
                                        const NativeConvData& d, const nn::cpu::Epilogue& e,
                                        const std::vector<float>& want, size_t k, pthreadpool_t pool) {
  const size_t n = want.size();
  const std::vector<float> base = run_native(off, d, e, n, nullptr);
  for (pthreadpool_t p : {pthreadpool_t(nullptr), pool}) {
    const std::vector<float> got = run_native(on, d, e, n, p);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
    EXPECT_LE(worst, 2e-5 * std::sqrt(double(k))) << (p ? "2 threads" : "1 thread");
    EXPECT_EQ(got, base) << (p ? "2 threads" : "1 thread") << ": not the same bits as without the fast path";
  }
}

// Runs `op` at 1 thread and on `pool`, expects the two to be the same bits and the first
// within 1e-5 of `want` relative to want's largest magnitude (at least 1); returns that error.
inline double expect_matches_at_1_and_2_threads(const nn::cpu::NativeOp& op, const NativeConvData& d,
                                                const nn::cpu::Epilogue& e, const std::vector<float>& want,
                                                pthreadpool_t pool, const std::string& what) {
  const std::vector<float> one = run_native(op, d, e, want.size(), nullptr);
  const std::vector<float> two = run_native(op, d, e, want.size(), pool);
  double scale = 1.0, err = 0;
  for (float v : want) scale = std::max(scale, std::fabs(double(v)));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(one[i]) - want[i]) / scale);
  EXPECT_LE(err, 1e-5) << what;
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << what << ": 2 threads differ from 1";
  return err;
}

}  // namespace nn_test
