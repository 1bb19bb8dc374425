// The native kernels' scratch contract (native_kernels.h, NativeArgs::scratch): a run may
// find anything in its scratch, since the CPU delegate places it in its arena where other
// tensors live at other times. Each kernel with scratch runs once on a NaN-filled scratch and
// once on a zeroed one, on the caller and on a 2-thread pool: same bits, all finite, and the
// numbers of a plain computation.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeArgs;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeOp;

bool has_native() {
  return nn::cpu::native_conv_supported();
}

// Runs `op` with its scratch filled by `fill`, into a fresh output of `n` floats.
std::vector<float> run_with_scratch(const NativeOp& op, NativeArgs args, size_t n, float fill,
                                    pthreadpool_t pool) {
  auto scratch = nn::cpu::allocate_floats(op.scratch_bytes() / sizeof(float) + 16);
  EXPECT_TRUE(scratch != nullptr);
  std::fill_n(scratch.get(), op.scratch_bytes() / sizeof(float) + 16, fill);
  std::vector<float> out(n + 16, -7.f);
  args.output = out.data();
  args.scratch = scratch.get();
  args.pool = pool;
  op.run(args);
  out.resize(n);
  return out;
}

// NaN-filled vs zeroed scratch, caller vs pool: identical and finite; returns the result.
std::vector<float> run_all_ways(const NativeOp& op, const NativeArgs& args, size_t n) {
  EXPECT_GT(op.scratch_bytes(), 0u);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  pthreadpool_t pool = pthreadpool_create(2);
  const auto zeroed = run_with_scratch(op, args, n, 0.f, nullptr);
  for (pthreadpool_t p : {static_cast<pthreadpool_t>(nullptr), pool}) {
    const auto poisoned = run_with_scratch(op, args, n, nan, p);
    EXPECT_EQ(std::memcmp(poisoned.data(), zeroed.data(), n * sizeof(float)), 0)
        << (p ? "2 threads" : "caller") << ": the result depends on what the scratch held";
  }
  pthreadpool_destroy(pool);
  for (float v : zeroed) EXPECT_TRUE(std::isfinite(v));
  return zeroed;
}

NativeConvShape pointwise(uint32_t h, uint32_t w, uint32_t in_c, uint32_t out_c) {
  NativeConvShape s;
  s.in_h = s.out_h = h, s.in_w = s.out_w = w, s.in_c = in_c, s.out_c = out_c;
  return s;
}

// out[p][o] = bias[o] + sum_c in[p][c] * w[o][c] (1x1 conv, OHWI filter).
std::vector<float> plain_pointwise(const std::vector<float>& in, const std::vector<float>& w,
                                   const std::vector<float>& bias, size_t pixels, size_t in_c, size_t out_c) {
  std::vector<float> out(pixels * out_c);
  for (size_t p = 0; p < pixels; ++p)
    for (size_t o = 0; o < out_c; ++o) {
      double acc = bias[o];
      for (size_t c = 0; c < in_c; ++c) acc += double(in[p * in_c + c]) * w[o * in_c + c];
      out[p * out_c + o] = float(acc);
    }
  return out;
}

TEST(NativeScratch, AddMeanRowSums) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  const uint32_t batch = 2, rows = 7, cols = 9, c = 13;
  nn::cpu::NativeAddMean op({batch, rows, cols, c});
  ASSERT_TRUE(op.ok());
  const size_t n = size_t(batch) * rows * cols * c;
  const auto a = nn_test::random_floats(n, 1), b = nn_test::random_floats(n, 2);
  const auto means = run_all_ways(op, {.input = a.data(), .residual = b.data()}, size_t(batch) * c);
  for (uint32_t i = 0; i < batch; ++i)
    for (uint32_t ch = 0; ch < c; ++ch) {
      double sum = 0;
      for (size_t p = 0; p < size_t(rows) * cols; ++p) {
        const size_t at = (size_t(i) * rows * cols + p) * c + ch;
        sum += double(a[at]) + b[at];
      }
      EXPECT_NEAR(means[i * c + ch], sum / (rows * cols), 1e-5);
    }
}

TEST(NativeScratch, GatedPointwiseConvWeights) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  const uint32_t h = 5, w = 7, in_c = 19, out_c = 37;
  const auto weights = nn_test::random_floats(size_t(out_c) * in_c, 3), bias = nn_test::random_floats(out_c, 4);
  nn::cpu::NativeConv op(pointwise(h, w, in_c, out_c), weights.data(), bias.data(), Epilogue{});
  ASSERT_TRUE(op.ok() && op.enable_scaled_input(false));
  const auto x = nn_test::random_floats(size_t(h) * w * in_c, 5), gate = nn_test::random_floats(in_c, 6, 0.f, 1.f);
  const auto out = run_all_ways(op, {.input = x.data(), .gate = gate.data()}, size_t(h) * w * out_c);
  std::vector<float> gated(x.size());
  for (size_t i = 0; i < x.size(); ++i) gated[i] = x[i] * gate[i % in_c];
  const auto expected = plain_pointwise(gated, weights, bias, size_t(h) * w, in_c, out_c);
  EXPECT_LE(nn_test::max_relative_error(out.data(), expected.data(), expected.size(), 1e-2), 1e-4);
}

// A gated k-blocked 1x1 conv on one row tile with fewer pixels than output channels
// (NativeIsa::gated_rows): the gate goes onto each tile's input rows, so no scratch; gated
// inputs below FLT_MIN are flushed to zero (denormal FMA operands stall), so inputs and gates
// of 1e-20 give exactly the zero bias, on the caller and on a 2-thread pool.
TEST(NativeScratch, GatedRowsNeedNoScratchAndFlushDenormals) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  const uint32_t h = 7, w = 7, in_c = 400, out_c = 75;
  const auto weights = nn_test::random_floats(size_t(out_c) * in_c, 3);
  const std::vector<float> bias(out_c, 0.f);
  nn::cpu::NativeConv op(pointwise(h, w, in_c, out_c), weights.data(), bias.data(), Epilogue{});
  ASSERT_TRUE(op.ok() && op.enable_scaled_input(false));
  EXPECT_TRUE(op.gated_rows());
  EXPECT_EQ(op.scratch_bytes(), 0u);
  const size_t n = size_t(h) * w * out_c;
  const auto x = nn_test::random_floats(size_t(h) * w * in_c, 5), gate = nn_test::random_floats(in_c, 6, 0.f, 1.f);
  std::vector<float> gated(x.size());
  for (size_t i = 0; i < x.size(); ++i) gated[i] = x[i] * gate[i % in_c];
  const auto expected = plain_pointwise(gated, weights, bias, size_t(h) * w, in_c, out_c);
  std::vector<float> tiny_x(x.size(), 1e-20f), tiny_gate(in_c, 1e-20f);
  pthreadpool_t pool = pthreadpool_create(2);
  for (pthreadpool_t p : {static_cast<pthreadpool_t>(nullptr), pool}) {
    const auto out = run_with_scratch(op, {.input = x.data(), .gate = gate.data()}, n, 0.f, p);
    // 400-term float sums against double ones: relative to at least 1 (outputs of a few units).
    EXPECT_LE(nn_test::max_relative_error(out.data(), expected.data(), n, 1.0), 1e-4);
    const auto flushed = run_with_scratch(op, {.input = tiny_x.data(), .gate = tiny_gate.data()}, n, 0.f, p);
    size_t nonzero = 0;
    for (float v : flushed) nonzero += v != 0.f;
    EXPECT_EQ(nonzero, 0u) << (p ? "2 threads" : "caller");
  }
  pthreadpool_destroy(pool);
}

TEST(NativeScratch, ConvThenResizeSmallImage) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  const uint32_t h = 6, w = 5, in_c = 8, out_c = 11;
  const auto weights = nn_test::random_floats(size_t(out_c) * in_c, 7), bias = nn_test::random_floats(out_c, 8);
  auto conv = std::make_unique<nn::cpu::NativeConv>(pointwise(h, w, in_c, out_c), weights.data(), bias.data(),
                                                    Epilogue{});
  nn::cpu::NativeResizeShape rs{1, h, w, out_c, 2 * h, 2 * w, false, true};
  auto resize = std::make_unique<nn::cpu::NativeResize>(rs);
  nn::cpu::NativeConvThenResize op(std::move(conv), std::move(resize), size_t(h) * w * out_c);
  ASSERT_TRUE(op.ok());
  const auto x = nn_test::random_floats(size_t(h) * w * in_c, 9);
  run_all_ways(op, {.input = x.data()}, size_t(4) * h * w * out_c);
}

TEST(NativeScratch, ExpandDepthwiseRings) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  const uint32_t h = 12, w = 11, in_c = 8, mid = 24;
  const NativeConvShape first = pointwise(h, w, in_c, mid);
  ASSERT_TRUE(nn::cpu::NativeExpandDepthwise::supports(first));
  NativeConvShape dw = pointwise(h, w, mid, mid);
  dw.kernel_h = dw.kernel_w = 3, dw.pad_top = dw.pad_left = 1;
  const auto weights = nn_test::random_floats(size_t(mid) * in_c, 10), bias = nn_test::random_floats(mid, 11);
  const auto dw_weights = nn_test::random_floats(size_t(9) * mid, 12), dw_bias = nn_test::random_floats(mid, 13);
  auto depthwise = std::make_unique<nn::cpu::NativeDepthwise>(dw, dw_weights.data(), dw_bias.data(), Epilogue{});
  nn::cpu::NativeExpandDepthwise op(first, weights.data(), bias.data(), Epilogue{}, std::move(depthwise), 2);
  ASSERT_TRUE(op.ok());
  const auto x = nn_test::random_floats(size_t(h) * w * in_c, 14);
  const auto out = run_all_ways(op, {.input = x.data()}, size_t(h) * w * mid);
  // The plain form: the 1x1 conv, then the 3x3 depthwise with zero padding.
  const auto e = plain_pointwise(x, weights, bias, size_t(h) * w, in_c, mid);
  std::vector<float> expected(out.size());
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t xx = 0; xx < w; ++xx)
      for (uint32_t c = 0; c < mid; ++c) {
        double acc = dw_bias[c];
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int iy = int(y) + ky - 1, ix = int(xx) + kx - 1;
            if (iy < 0 || ix < 0 || iy >= int(h) || ix >= int(w)) continue;
            acc += double(e[(size_t(iy) * w + ix) * mid + c]) * dw_weights[(ky * 3 + kx) * mid + c];
          }
        expected[(size_t(y) * w + xx) * mid + c] = float(acc);
      }
  EXPECT_LE(nn_test::max_relative_error(out.data(), expected.data(), expected.size(), 1e-2), 1e-4);
}

}  // namespace
