// NativeExpandDepthwise with a projection (native conv+depthwise+conv): an inverted
// residual block (1x1 expansion, 3x3 depthwise at stride 1 or 2, 1x1 projection, maybe the
// block's residual ADD) against the same block in double. Odd sizes (row groups and
// micro-tiles with tails, channel counts off the vector width), on the caller and on a
// 2-thread pool (each thread a range of rows), on the AVX2 kernels and, where the CPU has
// them, the AVX-512 ones. The output is written in a NaN-guarded buffer: nothing past it.
// Stride-1 blocks run their depthwise rows in pairs (NativeIsa::expand_depthwise_pairs) and
// give the same bits as a row at a time.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeIsa;

struct Block {
  uint32_t batch, h, w, in_c, mid, out_c, stride;
  bool residual;
};

std::string name(const Block& b) {
  return std::to_string(b.batch) + "x" + std::to_string(b.h) + "x" + std::to_string(b.w) + "x" +
         std::to_string(b.in_c) + " -> " + std::to_string(b.mid) + " -> " + std::to_string(b.out_c) +
         " stride " + std::to_string(b.stride) + (b.residual ? " + residual" : "");
}

NativeConvShape pointwise(uint32_t batch, uint32_t h, uint32_t w, uint32_t in_c, uint32_t out_c) {
  NativeConvShape s;
  s.batch = batch, s.in_h = s.out_h = h, s.in_w = s.out_w = w, s.in_c = in_c, s.out_c = out_c;
  return s;
}

Epilogue relu6() {
  Epilogue e;
  e.lo = 0.f, e.hi = 6.f;
  return e;
}

// The block in double: expansion + RELU6, 3x3 depthwise (pad 1) + RELU6, projection (+ residual).
std::vector<float> reference(const Block& b, const std::vector<float>& x, const std::vector<float>& we,
                             const std::vector<float>& be, const std::vector<float>& wd,
                             const std::vector<float>& bd, const std::vector<float>& wp,
                             const std::vector<float>& bp, const std::vector<float>& res) {
  const uint32_t oh = (b.h - 1) / b.stride + 1, ow = (b.w - 1) / b.stride + 1;
  auto clamp6 = [](double v) { return std::min(6.0, std::max(0.0, v)); };
  std::vector<double> e(size_t(b.batch) * b.h * b.w * b.mid);
  for (size_t p = 0; p < size_t(b.batch) * b.h * b.w; ++p)
    for (uint32_t o = 0; o < b.mid; ++o) {
      double acc = be[o];
      for (uint32_t c = 0; c < b.in_c; ++c) acc += double(x[p * b.in_c + c]) * we[size_t(o) * b.in_c + c];
      e[p * b.mid + o] = clamp6(acc);
    }
  std::vector<double> d(size_t(b.batch) * oh * ow * b.mid);
  for (uint32_t n = 0; n < b.batch; ++n)
    for (uint32_t y = 0; y < oh; ++y)
      for (uint32_t xx = 0; xx < ow; ++xx)
        for (uint32_t c = 0; c < b.mid; ++c) {
          double acc = bd[c];
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = int(y * b.stride) + ky - 1, ix = int(xx * b.stride) + kx - 1;
              if (iy < 0 || ix < 0 || iy >= int(b.h) || ix >= int(b.w)) continue;
              acc += e[((size_t(n) * b.h + iy) * b.w + ix) * b.mid + c] * wd[(ky * 3 + kx) * b.mid + c];
            }
          d[((size_t(n) * oh + y) * ow + xx) * b.mid + c] = clamp6(acc);
        }
  std::vector<float> out(size_t(b.batch) * oh * ow * b.out_c);
  for (size_t p = 0; p < size_t(b.batch) * oh * ow; ++p)
    for (uint32_t o = 0; o < b.out_c; ++o) {
      double acc = bp[o];
      for (uint32_t c = 0; c < b.mid; ++c) acc += d[p * b.mid + c] * wp[size_t(o) * b.mid + c];
      if (b.residual) acc += res[p * b.out_c + o];
      out[p * b.out_c + o] = float(acc);
    }
  return out;
}

void check_block(const Block& b, const NativeIsa& isa, bool project = true) {
  SCOPED_TRACE(name(b) + (isa.avx512 ? ", AVX-512" : ", AVX2") +
               (isa.expand_depthwise_pairs ? "" : ", no pairs") + (project ? "" : ", no projection"));
  const uint32_t oh = (b.h - 1) / b.stride + 1, ow = (b.w - 1) / b.stride + 1;
  const auto x = nn_test::random_floats(size_t(b.batch) * b.h * b.w * b.in_c, 21);
  const auto we = nn_test::random_floats(size_t(b.mid) * b.in_c, 22), be = nn_test::random_floats(b.mid, 23);
  const auto wd = nn_test::random_floats(size_t(9) * b.mid, 24), bd = nn_test::random_floats(b.mid, 25);
  const auto wp = nn_test::random_floats(size_t(b.out_c) * b.mid, 26),
             bp = nn_test::random_floats(b.out_c, 27);
  const size_t n = size_t(b.batch) * oh * ow * b.out_c;
  const auto res = nn_test::random_floats(n, 28);
  const auto expected = reference(b, x, we, be, wd, bd, wp, bp, res);

  NativeConvShape first = pointwise(b.batch, b.h, b.w, b.in_c, b.mid);
  NativeConvShape dw = pointwise(b.batch, b.h, b.w, b.mid, b.mid);
  dw.kernel_h = dw.kernel_w = 3, dw.pad_top = dw.pad_left = 1;
  dw.stride_h = dw.stride_w = b.stride, dw.out_h = oh, dw.out_w = ow;
  Epilogue pe;
  if (b.residual) pe.residual = true;
  ASSERT_TRUE(nn::cpu::NativeExpandDepthwise::supports(first));
  NativeIsa no_pairs = isa;
  no_pairs.expand_depthwise_pairs = false;
  // The op as asked, and a row at a time (the bits to match).
  std::unique_ptr<nn::cpu::NativeExpandDepthwise> ops[2];
  for (int i = 0; i < 2; ++i) {
    const NativeIsa& with = i == 0 ? isa : no_pairs;
    auto depthwise = std::make_unique<nn::cpu::NativeDepthwise>(dw, wd.data(), bd.data(), relu6(), with);
    ops[i] = std::make_unique<nn::cpu::NativeExpandDepthwise>(first, we.data(), be.data(), relu6(),
                                                              std::move(depthwise), 2, with);
    ASSERT_TRUE(ops[i]->ok());
    if (!project) continue;
    auto conv = std::make_unique<nn::cpu::NativeConv>(pointwise(b.batch, oh, ow, b.mid, b.out_c), wp.data(),
                                                      bp.data(), pe, with);
    ASSERT_TRUE(ops[i]->add_projection(std::move(conv)));
    ASSERT_TRUE(ops[i]->projects());
  }
  EXPECT_EQ(ops[0]->row_pairs(), b.stride == 1 && isa.two_rows && isa.expand_depthwise_pairs);
  EXPECT_FALSE(ops[1]->row_pairs());
  // Without the projection the op's output is the depthwise's: projected here (in double).
  auto finish = [&](const std::vector<float>& d) {
    if (project) return d;
    std::vector<float> out(n);
    for (size_t p = 0; p < size_t(b.batch) * oh * ow; ++p)
      for (uint32_t o = 0; o < b.out_c; ++o) {
        double acc = bp[o];
        for (uint32_t c = 0; c < b.mid; ++c) acc += double(d[p * b.mid + c]) * wp[size_t(o) * b.mid + c];
        if (b.residual) acc += res[p * b.out_c + o];
        out[p * b.out_c + o] = float(acc);
      }
    return out;
  };
  const size_t written = project ? n : size_t(b.batch) * oh * ow * b.mid;

  pthreadpool_t pool = pthreadpool_create(2);
  std::vector<float> first_run;
  for (int i = 0; i < 2; ++i)
    for (pthreadpool_t p : {static_cast<pthreadpool_t>(nullptr), pool}) {
      SCOPED_TRACE(std::string(p ? "2 threads" : "caller") + (i ? ", a row at a time" : ""));
      const nn::cpu::NativeExpandDepthwise& op = *ops[i];
      const float nan = std::numeric_limits<float>::quiet_NaN();
      auto scratch = nn::cpu::allocate_floats(op.scratch_bytes() / sizeof(float) + 16);
      ASSERT_TRUE(scratch != nullptr);
      std::fill_n(scratch.get(), op.scratch_bytes() / sizeof(float) + 16, nan);
      std::vector<float> out(written + 64, nan);
      op.run({.input = x.data(),
              .residual = b.residual && project ? res.data() : nullptr,
              .output = out.data(),
              .scratch = scratch.get(),
              .pool = p});
      for (size_t j = written; j < out.size(); ++j)
        ASSERT_TRUE(std::isnan(out[j])) << "written past the output at " << j;
      out.resize(written);
      for (float v : out) ASSERT_TRUE(std::isfinite(v));
      const auto projected = finish(out);
      EXPECT_LE(nn_test::max_relative_error(projected.data(), expected.data(), n, 1e-2), 1e-4);
      // Neither the split into per-thread row ranges nor the row pairs change a single bit.
      if (first_run.empty())
        first_run = out;
      else
        EXPECT_EQ(out, first_run);
    }
  pthreadpool_destroy(pool);
}

std::vector<NativeIsa> isas() {
  std::vector<NativeIsa> v{NativeIsa::with(false, 0, true)};
  if (nn::cpu::native_avx512_enabled()) v.push_back(NativeIsa::with(true, -1, true));
  return v;
}

TEST(NativeExpandDepthwiseProject, StrideOneWithAndWithoutResidual) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no native kernels on this CPU";
  for (const NativeIsa& isa : isas()) {
    check_block({1, 13, 11, 7, 36, 11, 1, true}, isa);
    check_block({1, 13, 11, 7, 36, 11, 1, false}, isa);
    // Wide rows (one row per projection call, 59 pixels), 40 output channels (a panel tail).
    check_block({1, 9, 59, 16, 24, 40, 1, true}, isa);
  }
}

// Row pairs: heights that leave a last single row or none, ranges split at odd rows, two and
// three images (no pair across them), channels off the vector widths; with and without the
// projection (check_block also runs each a row at a time: the same bits).
TEST(NativeExpandDepthwiseProject, RowPairsOddHeightsAndBatch) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no native kernels on this CPU";
  for (const NativeIsa& isa : isas()) {
    for (bool project : {true, false}) {
      check_block({1, 2, 9, 5, 20, 7, 1, false}, isa, project);
      check_block({1, 3, 13, 6, 17, 9, 1, true}, isa, project);
      check_block({1, 12, 15, 8, 40, 16, 1, true}, isa, project);
      check_block({2, 5, 11, 3, 27, 13, 1, false}, isa, project);
      check_block({3, 4, 8, 4, 33, 5, 1, true}, isa, project);
    }
    NativeIsa off = isa;
    off.expand_depthwise_pairs = false;
    check_block({1, 7, 10, 4, 24, 8, 1, true}, off);
  }
}

TEST(NativeExpandDepthwiseProject, StrideTwoOddSizesAndBatch) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no native kernels on this CPU";
  for (const NativeIsa& isa : isas()) {
    check_block({1, 15, 17, 5, 19, 9, 2, false}, isa);
    check_block({2, 14, 9, 8, 48, 17, 2, false}, isa);  // two images: groups span them
    check_block({2, 7, 5, 3, 20, 33, 1, true}, isa);
  }
}

// A projection that does not fit the depthwise's output is refused, and the op stays as it was.
TEST(NativeExpandDepthwiseProject, RefusesAProjectionOfAnotherShape) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no native kernels on this CPU";
  const auto w = nn_test::random_floats(64 * 64, 31), bias = nn_test::random_floats(64, 32);
  NativeConvShape dw = pointwise(1, 8, 8, 16, 16);
  dw.kernel_h = dw.kernel_w = 3, dw.pad_top = dw.pad_left = 1;
  nn::cpu::NativeExpandDepthwise op(
      pointwise(1, 8, 8, 4, 16), w.data(), bias.data(), Epilogue{},
      std::make_unique<nn::cpu::NativeDepthwise>(dw, w.data(), bias.data(), Epilogue{}), 1);
  ASSERT_TRUE(op.ok());
  const size_t scratch = op.scratch_bytes();
  // 17 input channels where the depthwise makes 16; then a 3x3 conv, not pointwise.
  EXPECT_FALSE(op.add_projection(
      std::make_unique<nn::cpu::NativeConv>(pointwise(1, 8, 8, 17, 8), w.data(), bias.data(), Epilogue{})));
  NativeConvShape three = pointwise(1, 8, 8, 16, 8);
  three.kernel_h = three.kernel_w = 3, three.pad_top = three.pad_left = 1;
  EXPECT_FALSE(
      op.add_projection(std::make_unique<nn::cpu::NativeConv>(three, w.data(), bias.data(), Epilogue{})));
  EXPECT_FALSE(op.projects());
  EXPECT_EQ(op.scratch_bytes(), scratch);
}

}  // namespace
