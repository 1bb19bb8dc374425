// CPU delegate (XNNPACK lowering) vs the reference kernels, one op at a time, at odd sizes
// (1, 13, 127 channels / widths) that hit vector tails. Each case also checks, from the
// profiled steps, that the op really ran on XNNPACK (else this would compare the
// reference kernel with itself).
#include <gtest/gtest.h>

#include "test_model.h"

#include <cstdlib>
#include <functional>

#include "runtime_test_util.h"

namespace {

using nn::Dims;
using nn::Model;
using nn::OperandType;
using nn::OperationType;
using T = OperationType;

constexpr double kTolerance = 1e-4;

using Built = nn_test::TestModel;

// Validates, compares cpu (profiled, 1 thread) and cpu (2 threads) against the reference,
// and expects the op under test (e.g. "op 0 CONV_2D") as its own step: "[native]" when
// the delegate runs it with nnpipe's own kernel (native_kernels.h), else "[xnnpack]". Native
// ops are checked again on the AVX2 kernels (CpuOptions::avx512 off; the same as the first pass on
// CPUs without AVX-512) and with the native kernels off (XNNPACK's).
// kNativeAvx512: native on the AVX-512 kernels only (XNNPACK's where AVX2 would run);
// kNativeAvx2 the other way round.
enum class Runs { kXnnpack, kNative, kNativeAvx512, kNativeAvx2 };
// The native kernels are x86 only (AVX2+FMA, AVX-512F); elsewhere every conv is XNNPACK's.
bool has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
bool has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

void check(Built& b, const std::string& op, Runs runs = Runs::kXnnpack, float lo = -1.f, float hi = 1.f,
           const nn::CpuOptions& base = {}) {
  nn::Status v = b.model->validate_and_infer_shapes();
  ASSERT_TRUE(v.is_ok()) << v.to_string();
  const bool native = runs != Runs::kXnnpack;
  for (int pass = 0; pass < (native ? 3 : 1); ++pass) {
    nn::CpuOptions cpu = base;
    if (pass >= 1) cpu.avx512 = false;
    if (pass == 2) cpu.native_kernels = false;
    const bool avx2_pass = pass == 1 || (pass == 0 && !has_avx512());
    const bool native_pass = runs == Runs::kNative       ? pass < 2 && has_avx2()
                             : runs == Runs::kNativeAvx2 ? avx2_pass && has_avx2()
                                                         : runs == Runs::kNativeAvx512 && pass == 0 && has_avx512();
    const std::string expected = op + (native_pass ? " [native]" : " [xnnpack]");
    nn::SessionOptions profiled;
    profiled.delegates = {"cpu"};
    profiled.profile = true;
    profiled.cpu = cpu;
    auto c = nn_test::compare_with_reference(b.model, profiled, lo, hi);
    EXPECT_LE(c.max_rel_error, kTolerance) << expected << ", max |expected| " << c.max_abs_expected;
    EXPECT_EQ(nn_test::count_steps(c, expected), 1) << nn_test::step_labels(c);
    nn::SessionOptions threaded;
    threaded.delegates = {"cpu"};
    threaded.threads = 2;
    threaded.cpu = cpu;
    auto c2 = nn_test::compare_with_reference(b.model, threaded, lo, hi);
    EXPECT_LE(c2.max_rel_error, kTolerance) << expected << " (2 threads)";
  }
}

// The model on a profiled one-thread CPU session beside the reference kernels: the error
// and the steps the delegate made (each test asserts on both).
nn_test::Comparison profiled_cpu(Built& b, float lo = -1.f, float hi = 1.f) {
  nn::Status v = b.model->validate_and_infer_shapes();
  EXPECT_TRUE(v.is_ok()) << v.to_string();
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.profile = true;
  return nn_test::compare_with_reference(b.model, o, lo, hi);
}

class Channels : public ::testing::TestWithParam<uint32_t> {};

TEST_P(Channels, Conv2dExplicitStride2Relu6) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 11, c});
  uint32_t w = b.constant({13, 3, 3, c}, 1), bias = b.constant({13}, 2);
  b.output(
      b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(0), b.i32(1), b.i32(1), b.i32(2), b.i32(2), b.i32(3)}));
  check(b, "op 0 CONV_2D", Runs::kNative);
}

// Explicit padding wider than the kernel on the left and right: the first micro-tiles of
// each row lie wholly in the padding (zero-padded strips with no input column in them),
// the last ones partly (3x3, 10 zero columns left, 9 right: 26 outputs from 9 columns).
TEST_P(Channels, Conv2dPaddingWiderThanKernel) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 4, 9, c});
  uint32_t w = b.constant({17, 3, 3, c}, 55), bias = b.constant({17}, 56);
  b.output(
      b.op(T::CONV_2D, {x, w, bias, b.i32(10), b.i32(9), b.i32(1), b.i32(0), b.i32(1), b.i32(1), b.i32(0)}));
  check(b, "op 0 CONV_2D", Runs::kNative);
}

// Micro-tiles that start mid-row, span several rows (width 3 < 8 pixels a tile) and cross
// from one image of the batch into the next: each tile's image, row and column. VALID on
// 12 columns: 4x10 outputs per image, so the AVX-512 kernel's sixth 8-pixel tile starts
// the second image and reads it in place.
TEST_P(Channels, Conv2d3x3TilesAcrossRowsAndImages) {
  const uint32_t c = GetParam();
  struct Case {
    uint32_t n, h, w;
    int32_t padding;  // 1 SAME, 2 VALID
  };
  for (Case k : {Case{2, 6, 12, 2}, Case{3, 5, 7, 1}, Case{2, 9, 3, 1}}) {
    Built b;
    uint32_t x = b.input({k.n, k.h, k.w, c});
    uint32_t f = b.constant({11, 3, 3, c}, 61), bias = b.constant({11}, 62);
    b.output(b.op(T::CONV_2D, {x, f, bias, b.i32(k.padding), b.i32(1), b.i32(1), b.i32(0)}));
    SCOPED_TRACE(std::to_string(k.n) + "x" + std::to_string(k.h) + "x" + std::to_string(k.w));
    check(b, "op 0 CONV_2D", Runs::kNative);
  }
}

// Output channels around the AVX-512 panels (32 wide above 16 channels, a last panel of at
// most 16 computing its lower half only, one of 17-24 or 1-8 on the ymm kernels where
// AVX-512 runs on 256-bit halves) on 45 pixels (five 8-row tiles, then the 4- and 1-row kernels), with a
// residual ADD on some, a HARD_SWISH on others, two padded above and below; the half-width
// kernels forced on and off, so both run on any host.
TEST_P(Channels, PointwiseConvPanelAndRowTails) {
  const uint32_t c = GetParam();
  for (auto half_width : {nn::CpuOptions::HalfWidth::kOn, nn::CpuOptions::HalfWidth::kOff})
    for (uint32_t n : {8u, 17u, 20u, 24u, 33u, 40u, 48u, 56u, 72u, 88u}) {
      nn::CpuOptions cpu;
      cpu.avx512_half_width = half_width;
      SCOPED_TRACE("out channels " + std::to_string(n) + ", half width " +
                   (half_width == nn::CpuOptions::HalfWidth::kOn ? "on" : "off"));
      Built b;
      uint32_t x = b.input({1, 5, 9, c});
      uint32_t w = b.constant({n, 1, 1, c}, 81), bias = b.constant({n}, 82);
      // 33 and 56: padded by a row above and below (implicit GEMM; those rows read only
      // padding, a null segment the kernels must skip).
      const bool padded = n == 33 || n == 56;
      uint32_t conv = padded ? b.op(T::CONV_2D, {x, w, bias, b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(1),
                                                 b.i32(1), b.i32(0)})
                             : b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
      if (n == 20 || n == 72) conv = b.op(T::HARD_SWISH, {conv});
      b.output(n == 24 || n == 88 || n == 40 ? b.op(T::ADD, {conv, b.input({1, 5, 9, n}), b.i32(1)}) : conv);
      check(b, "op 0 CONV_2D", Runs::kNative, -1.f, 1.f, cpu);
    }
}

TEST_P(Channels, Conv2dImplicitSameDilated) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 13, 5});
  uint32_t w = b.constant({c, 3, 3, 5}, 3), bias = b.constant({c}, 4);
  b.output(b.op(T::CONV_2D,
                {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0), b.boolean(false), b.i32(2), b.i32(2)}));
  check(b, "op 0 CONV_2D", Runs::kNative);
}

TEST_P(Channels, Conv2d1x1ImplicitValidRelu) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 7, 13, c});
  uint32_t w = b.constant({127, 1, 1, c}, 5), bias = b.constant({127}, 6);
  b.output(b.op(T::CONV_2D, {x, w, bias, b.i32(2), b.i32(1), b.i32(1), b.i32(1)}));
  check(b, "op 0 CONV_2D", Runs::kNative);
}

TEST_P(Channels, Depthwise5x5ExplicitMultiplier2Relu) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 11, 13, c});
  uint32_t w = b.constant({1, 5, 5, 2 * c}, 9), bias = b.constant({2 * c}, 10);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(2), b.i32(2), b.i32(1), b.i32(3), b.i32(1), b.i32(1),
                                       b.i32(2), b.i32(1)}));
  check(b, "op 0 DEPTHWISE_CONV_2D");  // multiplier 2: XNNPACK
}

TEST_P(Channels, TransposeConvExplicitStride2) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 7, 5, c});
  uint32_t w = b.constant({13, 2, 2, c}, 11), bias = b.constant({13}, 12);
  b.output(b.op(T::TRANSPOSE_CONV_2D, {x, w, bias, b.i32(0), b.i32(0), b.i32(0), b.i32(0), b.i32(2), b.i32(2),
                                       b.i32(0), b.boolean(false)}));
  check(b, "op 0 TRANSPOSE_CONV_2D", Runs::kNative);  // 2x2 stride 2: taps do not overlap
}

// The selfie head's form (one output channel: 4 dot products per pixel) and 3 output
// channels (12 per pixel, not a multiple of the AVX-512 kernel's 4 pixels x 4 dots' 16),
// widths 9, 6 and 37 (pixel tails of 1 and 2 of 4; 37 = two 16-pixel blocks and 5 for the
// one-channel kernel, which transposes 16 pixels at a time), with a RELU and with or
// without a residual ADD in the epilogue (one output channel without it has its own
// kernel).
TEST_P(Channels, TransposeConvStride2ReluResidual) {
  const uint32_t c = GetParam();
  for (bool residual : {false, true})
    for (uint32_t out_c : {1u, 3u})
      for (uint32_t width : {9u, 6u, 37u}) {
        Built b;
        uint32_t x = b.input({1, 5, width, c});
        uint32_t skip = residual ? b.input({1, 10, 2 * width, out_c}) : 0;
        uint32_t w = b.constant({out_c, 2, 2, c}, 21), bias = b.constant({out_c}, 22);
        uint32_t y = b.op(T::TRANSPOSE_CONV_2D, {x, w, bias, b.i32(0), b.i32(0), b.i32(0), b.i32(0), b.i32(2),
                                                 b.i32(2), b.i32(1), b.boolean(false)});
        b.output(residual ? b.op(T::ADD, {y, skip, b.i32(0)}) : y);
        SCOPED_TRACE("out_c " + std::to_string(out_c) + ", width " + std::to_string(width) +
                     (residual ? ", residual" : ""));
        check(b, "op 0 TRANSPOSE_CONV_2D", Runs::kNative);
      }
}

// A LOGISTIC after the transpose conv (the selfie models' last two ops) runs in its
// epilogue: no step of its own. Inputs up to +-40 push the sums far into both tails of the
// sigmoid. Batch 2 and 21 columns: the one-channel kernel's output rows per image.
TEST_P(Channels, TransposeConvLogisticInEpilogue) {
  const uint32_t c = GetParam();
  for (uint32_t out_c : {1u, 3u}) {
    SCOPED_TRACE("out_c " + std::to_string(out_c));
    Built b;
    uint32_t x = b.input({2, 3, 21, c});
    uint32_t w = b.constant({out_c, 2, 2, c}, 25), bias = b.constant({out_c}, 26);
    uint32_t y = b.op(T::TRANSPOSE_CONV_2D, {x, w, bias, b.i32(0), b.i32(0), b.i32(0), b.i32(0), b.i32(2),
                                             b.i32(2), b.i32(0), b.boolean(false)});
    b.output(b.op(T::LOGISTIC, {y}));
    check(b, "op 0 TRANSPOSE_CONV_2D", Runs::kNative, -40.f, 40.f);
    auto r = profiled_cpu(b, -40.f, 40.f);
    EXPECT_EQ(nn_test::count_steps(r, "LOGISTIC"), 0) << nn_test::step_labels(r);
  }
}

// The one-channel 2x2 kernel on whole 8-channel blocks (16, 24: the AVX2 kernel's weights
// spread to 8 lanes, every block unmasked) and a partial one (13), widths that fill whole
// 8-pixel tiles (8, 16) or leave 3 or 5 pixels over (11, 37), with and without the
// LOGISTIC, which the AVX2 kernel applies over each finished output row pair (46 floats a
// row at width 23: its 32-float steps, an 8-float one and a tail).
TEST(CpuDelegateTransposeConv, OneChannelHeadTilesAndLogistic) {
  for (uint32_t c : {13u, 16u, 24u})
    for (uint32_t width : {8u, 11u, 16u, 23u, 37u})
      for (bool logistic : {false, true}) {
        Built b;
        uint32_t x = b.input({2, 3, width, c});
        uint32_t w = b.constant({1, 2, 2, c}, 27, -2.f, 2.f), bias = b.constant({1}, 28);
        uint32_t y = b.op(T::TRANSPOSE_CONV_2D, {x, w, bias, b.i32(0), b.i32(0), b.i32(0), b.i32(0), b.i32(2),
                                                 b.i32(2), b.i32(0), b.boolean(false)});
        b.output(logistic ? b.op(T::LOGISTIC, {y}) : y);
        SCOPED_TRACE("in_c " + std::to_string(c) + ", width " + std::to_string(width) +
                     (logistic ? ", logistic" : ""));
        check(b, "op 0 TRANSPOSE_CONV_2D", Runs::kNative, -4.f, 4.f);
      }
}

TEST_P(Channels, TransposeConvImplicitSame3x3) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 6, 7, c});
  uint32_t w = b.constant({c, 3, 3, c}, 13), bias = b.constant({c}, 14);
  uint32_t shape = b.ints({1, 12, 14, static_cast<int32_t>(c)});
  b.output(b.op(T::TRANSPOSE_CONV_2D,
                {x, w, bias, shape, b.i32(1), b.i32(2), b.i32(2), b.i32(1), b.boolean(false)}));
  check(b, "op 0 TRANSPOSE_CONV_2D");
}

TEST_P(Channels, GroupedConv) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 9, 9, 2 * c});
  uint32_t w = b.constant({6, 3, 3, c}, 15), bias = b.constant({6}, 16);
  b.output(b.op(T::GROUPED_CONV_2D,
                {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(2), b.i32(0), b.boolean(false)}));
  check(b, "op 0 GROUPED_CONV_2D", Runs::kNativeAvx2);
}

TEST_P(Channels, AveragePoolSamePaddingExcluded) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 12, c});
  b.output(b.op(T::AVERAGE_POOL_2D, {x, b.i32(1), b.i32(2), b.i32(2), b.i32(3), b.i32(3), b.i32(0)}));
  check(b, "op 0 AVERAGE_POOL_2D");
}

TEST_P(Channels, GlobalAveragePool) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 7, c});
  b.output(b.op(T::AVERAGE_POOL_2D, {x, b.i32(2), b.i32(1), b.i32(1), b.i32(7), b.i32(13), b.i32(1)}));
  check(b, "op 0 AVERAGE_POOL_2D");
}

// A 1x1 window at stride 1 (torchvision's adaptive pool to its own size, VGG) is a copy
// with the fused clamp: XNNPACK runs it (its pooling refuses 1x1 windows; this fell back to
// the reference kernels).
TEST_P(Channels, OneByOnePoolIsACopy) {
  const uint32_t c = GetParam();
  for (T type : {T::AVERAGE_POOL_2D, T::MAX_POOL_2D}) {
    Built b;
    uint32_t x = b.input({1, 7, 5, c});
    b.output(b.op(type, {x, b.i32(2), b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
    check(b, std::string("op 0 ") + (type == T::MAX_POOL_2D ? "MAX_POOL_2D" : "AVERAGE_POOL_2D"), Runs::kXnnpack,
          -8.f, 8.f);
  }
}

TEST_P(Channels, MaxPoolExplicitPads) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 13, c});
  b.output(b.op(T::MAX_POOL_2D, {x, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(2), b.i32(2), b.i32(3),
                                 b.i32(3), b.i32(0)}));
  check(b, "op 0 MAX_POOL_2D");
}

TEST_P(Channels, MeanOverHW) {
  const uint32_t c = GetParam();
  for (int keep : {0, 1}) {
    Built b;
    uint32_t x = b.input({2, 13, 5, c});
    b.output(b.op(T::MEAN, {x, b.ints({2, 1}), b.i32(keep)}));
    check(b, "op 0 MEAN");
  }
}

TEST_P(Channels, FullyConnected) {
  const uint32_t c = GetParam();
  for (bool with_bias : {true, false}) {
    Built b;
    uint32_t x = b.input({3, c});
    uint32_t w = b.constant({13, c}, 17);
    uint32_t bias = with_bias ? b.constant({13}, 18) : b.model->add_no_value();
    b.output(b.op(T::FULLY_CONNECTED, {x, w, bias, b.i32(with_bias ? 1 : 0)}));
    check(b, "op 0 FULLY_CONNECTED");
  }
}

TEST_P(Channels, BinaryOpsWithBroadcast) {
  const uint32_t c = GetParam();
  for (T t : {T::ADD, T::SUB, T::MUL, T::DIV}) {
    Built b;
    uint32_t x = b.input({1, 5, 13, c});
    uint32_t y = t == T::DIV ? b.constant({1, 1, 1, c}, 19, 0.5f, 2.f) : b.input({1, 1, 1, c});
    b.output(b.op(t, {x, y, b.i32(t == T::ADD ? 1 : 0)}));
    check(b, "op 0 " + std::string(nn::operation_type_name(t)) + "");
  }
  for (T t : {T::MAXIMUM, T::MINIMUM}) {
    Built b;
    uint32_t x = b.input({1, 5, 13, c});
    uint32_t y = b.input({1, 5, 13, c});
    b.output(b.op(t, {x, y}));
    check(b, "op 0 " + std::string(nn::operation_type_name(t)) + "");
  }
}

TEST_P(Channels, Prelu) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 7, 13, c});
  b.output(b.op(T::PRELU, {x, b.constant({1, 1, c}, 20, 0.f, 0.5f)}));
  check(b, "op 0 PRELU");
}

TEST_P(Channels, UnaryOps) {
  const uint32_t c = GetParam();
  for (T t :
       {T::RELU, T::RELU1, T::RELU6, T::LOGISTIC, T::HARD_SWISH, T::ABS, T::NEG, T::FLOOR, T::NNPIPE_CEIL}) {
    Built b;
    uint32_t x = b.input({1, 3, 13, c});
    b.output(b.op(t, {x}));
    check(b, "op 0 " + std::string(nn::operation_type_name(t)), Runs::kXnnpack, -8.f, 8.f);
  }
  {
    Built b;
    uint32_t x = b.input({1, 3, 13, c});
    b.output(b.op(T::SQRT, {x}));
    check(b, "op 0 SQRT", Runs::kXnnpack, 0.01f, 4.f);
  }
  {
    Built b;
    uint32_t x = b.input({1, 3, 13, c});
    b.output(b.op(T::ELU, {x, b.f32(0.7f)}));
    check(b, "op 0 ELU", Runs::kXnnpack, -4.f, 4.f);
  }
}

TEST_P(Channels, Softmax) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({3, c});
  b.output(b.op(T::SOFTMAX, {x, b.f32(1.f)}));
  check(b, "op 0 SOFTMAX", Runs::kXnnpack, -5.f, 5.f);
}

TEST_P(Channels, ReshapeSqueezeExpandDims) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 1, 13, c});
  uint32_t r = b.op(T::RESHAPE, {x, b.ints({13, -1})});
  uint32_t e = b.op(T::EXPAND_DIMS, {r, b.i32(0)});
  uint32_t s = b.op(T::SQUEEZE, {e, b.ints({0})});
  b.output(b.op(T::ADD, {s, s, b.i32(0)}));
  check(b, "op 0 RESHAPE");
}

TEST_P(Channels, PadAndPadV2) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 5, 13, c});
  uint32_t pads = b.model->add_constant_i32({4, 2}, std::vector<int32_t>{0, 0, 1, 2, 0, 3, 0, 1});
  uint32_t p1 = b.op(T::PAD, {x, pads});
  b.output(p1);
  b.output(b.op(T::PAD_V2, {x, pads, b.f32(-0.5f)}));
  check(b, "op 0 PAD");
}

TEST_P(Channels, ResizeBilinearModes) {
  const uint32_t c = GetParam();
  struct Mode {
    bool align, half;
  };
  for (Mode mode : {Mode{false, false}, Mode{true, false}, Mode{false, true}}) {
    // 11 -> 22 columns: the width-doubling row kernel where the taps are half-pixel ones,
    // with and without a vertical blend per row.
    for (auto [oh, ow] : {std::pair{26, 27}, std::pair{5, 4}, std::pair{26, 22}, std::pair{13, 22}}) {
      Built b;
      uint32_t x = b.input({1, 13, 11, c});
      b.output(b.op(T::RESIZE_BILINEAR, {x, b.i32(ow), b.i32(oh), b.boolean(false), b.boolean(mode.align),
                                         b.boolean(mode.half)}));
      SCOPED_TRACE("align_corners=" + std::to_string(mode.align) + " half_pixel=" +
                   std::to_string(mode.half) + " out " + std::to_string(oh) + "x" + std::to_string(ow));
      check(b, "op 0 RESIZE_BILINEAR", Runs::kNative);
    }
  }
}

// A doubled width with half-pixel taps at channel counts around the AVX2 row kernel's
// 16- and 8-channel steps (8, 16, 21: the last 8 channels again over 5 done, 24, 40), batch
// 2, an odd input width: doubled heights (its output rows in pairs that share two input
// rows, between the single edge rows), a height that is not doubled (some rows share
// their input rows, some not) and an unchanged one (no vertical blend).
TEST(CpuDelegateResize, DoubledWidthRowPairsAndChannelSteps) {
  for (uint32_t c : {8u, 16u, 21u, 24u, 40u})
    for (int oh : {10, 14, 5}) {
      Built b;
      uint32_t x = b.input({2, 5, 7, c});
      b.output(b.op(T::RESIZE_BILINEAR,
                    {x, b.i32(14), b.i32(oh), b.boolean(false), b.boolean(false), b.boolean(true)}));
      SCOPED_TRACE("channels " + std::to_string(c) + ", out " + std::to_string(oh) + "x14");
      check(b, "op 0 RESIZE_BILINEAR", Runs::kNative);
    }
}

TEST_P(Channels, DepthToSpace) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 3, 5, 4 * c});
  b.output(b.op(T::DEPTH_TO_SPACE, {x, b.i32(2)}));
  check(b, "op 0 DEPTH_TO_SPACE");
}

// A conv followed by a standalone RELU6: the activation folds into the conv's clamp
// (one XNNPACK step holds both), and the result still matches.
TEST(CpuDelegateFusion, ReluFoldsIntoConv) {
  Built b;
  uint32_t x = b.input({1, 9, 9, 13});
  uint32_t w = b.constant({13, 3, 3, 13}, 21, -2.f, 2.f), bias = b.constant({13}, 22);
  uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(b.op(T::RELU6, {conv}));
  auto c = profiled_cpu(b);
  EXPECT_LE(c.max_rel_error, kTolerance);
  ASSERT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
  EXPECT_NE(c.steps[0].label.find("CONV_2D"), std::string::npos);
}

// Native kernels take the ops that follow them into their epilogue: a MobileNetV3 block
// tail (conv -> HARD_SWISH -> ADD of the block input) is one native step with no
// XNNPACK ADD or HARD_SWISH left, and matches the reference at odd channel counts.
TEST_P(Channels, ConvHardSwishResidualAddFuse) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 11, c});
  uint32_t w = b.constant({c, 1, 1, c}, 31), bias = b.constant({c}, 32);
  uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t hs = b.op(T::HARD_SWISH, {conv});
  b.output(b.op(T::ADD, {hs, x, b.i32(3)}));  // ADD's own RELU6 applies after the sum
  auto r = profiled_cpu(b, -2.f, 2.f);
  EXPECT_LE(r.max_rel_error, kTolerance);
  ASSERT_EQ(r.steps.size(), 1u) << nn_test::step_labels(r);
  EXPECT_NE(r.steps[0].label.find("op 0 CONV_2D [native]"), std::string::npos) << nn_test::step_labels(r);
  nn::SessionOptions two;
  two.delegates = {"cpu"};
  two.threads = 2;
  EXPECT_LE(nn_test::compare_with_reference(b.model, two, -2.f, 2.f).max_rel_error, kTolerance);
}

// The data ops XNNPACK has no node for run on the delegate's own kernels (native_data.h):
// "[native]" on 1 and 2 threads against the reference kernels, and with
// CpuOptions::native_data_ops off on the reference kernels ("[reference]").
void check_data(Built& b, const std::string& op, float lo = -1.f, float hi = 1.f) {
  for (bool native : {true, false}) {
    const std::string expected = op + (native ? " [native]" : " [reference]");
    nn::Status v = b.model->validate_and_infer_shapes();
    ASSERT_TRUE(v.is_ok()) << v.to_string();
    nn::SessionOptions profiled;
    profiled.delegates = {"cpu"};
    profiled.profile = true;
    profiled.cpu.native_data_ops = native;
    auto c = nn_test::compare_with_reference(b.model, profiled, lo, hi);
    EXPECT_LE(c.max_rel_error, kTolerance) << expected;
    EXPECT_EQ(nn_test::count_steps(c, expected), 1) << nn_test::step_labels(c);
    nn::SessionOptions threaded;
    threaded.delegates = {"cpu"};
    threaded.threads = 2;
    threaded.cpu.native_data_ops = native;
    EXPECT_LE(nn_test::compare_with_reference(b.model, threaded, lo, hi).max_rel_error, kTolerance)
        << expected << " (2 threads)";
  }
}

TEST_P(Channels, ConcatenationAxes) {
  const uint32_t c = GetParam();
  {  // channels, one input a constant, large enough to be split over the pool
    Built b;
    uint32_t x = b.input({1, 40, 33, c}), y = b.input({1, 40, 33, 5});
    b.output(b.op(T::CONCATENATION, {x, b.constant({1, 40, 33, 3}, 71), y, b.i32(-1)}));
    check_data(b, "op 0 CONCATENATION");
  }
  {  // rows
    Built b;
    uint32_t x = b.input({2, 3, 7, c}), y = b.input({2, 5, 7, c});
    b.output(b.op(T::CONCATENATION, {x, y, b.i32(1)}));
    check_data(b, "op 0 CONCATENATION");
  }
}

TEST_P(Channels, TransposeChannelShuffleAndLayouts) {
  const uint32_t c = GetParam();
  {  // ShuffleNet's channel shuffle: [.., 2, C] -> [.., C, 2]
    Built b;
    uint32_t x = b.input({1, 9, 11, 2, c});
    b.output(b.op(T::TRANSPOSE, {x, b.ints({0, 1, 2, 4, 3})}));
    check_data(b, "op 0 TRANSPOSE");
  }
  {  // NHWC -> NCHW, large enough for the pool
    Built b;
    uint32_t x = b.input({2, 37, 29, c});
    b.output(b.op(T::TRANSPOSE, {x, b.ints({0, 3, 1, 2})}));
    check_data(b, "op 0 TRANSPOSE");
  }
  {  // perm omitted: reversed dims
    Built b;
    uint32_t x = b.input({3, 5, c});
    b.model->add_operation(T::TRANSPOSE, {x, b.model->add_tensor(nn::OperandType::TENSOR_INT32, {0})},
                           {b.model->add_tensor(nn::OperandType::TENSOR_FLOAT32, {})});
    b.model->operands[b.model->operations[0].inputs[1]].lifetime = nn::Lifetime::NO_VALUE;
    b.output(b.model->operations[0].outputs[0]);
    check_data(b, "op 0 TRANSPOSE");
  }
}

TEST_P(Channels, SliceWithToTheEnd) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 9, 13, c});
  b.output(b.op(T::SLICE, {x, b.ints({1, 2, 3, 0}), b.ints({1, -1, 7, int32_t((c + 1) / 2)})}));
  check_data(b, "op 0 SLICE");
}

TEST_P(Channels, MeanOverOneOrAdjacentAxes) {
  const uint32_t c = GetParam();
  for (int keep : {0, 1}) {
    Built b;  // layer norm's mean over channels
    uint32_t x = b.input({1, 7, 9, c});
    b.output(b.op(T::MEAN, {x, b.ints({-1}), b.i32(keep)}));
    check_data(b, "op 0 MEAN", -1.f, 3.f);
  }
  Built b;  // over H alone (a row of W*C values per step), then over the rest
  uint32_t x = b.input({2, 5, 9, c});
  uint32_t m = b.op(T::MEAN, {x, b.ints({1}), b.i32(0)});
  b.output(b.op(T::MEAN, {m, b.ints({2, 1}), b.i32(1)}));
  auto cmp = profiled_cpu(b);
  EXPECT_LE(cmp.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(cmp, "op 0 MEAN [native]"), 1) << nn_test::step_labels(cmp);
  EXPECT_EQ(nn_test::count_steps(cmp, "op 1 MEAN [native]"), 1) << nn_test::step_labels(cmp);
}

TEST_P(Channels, ErfAndPowForGeluAndLayerNorm) {
  const uint32_t c = GetParam();
  {
    Built b;
    uint32_t x = b.input({1, 19, 13, c});
    b.output(b.op(T::NNPIPE_ERF, {x}));
    check_data(b, "op 0 NNPIPE_ERF", -5.f, 5.f);
  }
  for (float e : {2.f, 0.5f}) {  // square and square root on XNNPACK
    Built b;
    uint32_t x = b.input({1, 3, 13, c});
    b.output(b.op(T::POW, {x, b.model->add_constant_f32({1}, std::vector<float>{e})}));
    check(b, "op 0 POW", Runs::kXnnpack, e == 2.f ? -3.f : 0.01f, 3.f);
  }
}

// SiLU after a native conv or depthwise conv (torch exports it as Sigmoid and Mul): the
// LOGISTIC and the MUL run as the kernel's swish stage, with either MUL operand order; not
// where the conv's output is also read elsewhere.
TEST_P(Channels, SwishFusesIntoNativeConvAndDepthwise) {
  const uint32_t c = GetParam();
  for (bool depthwise : {false, true})
    for (bool x_first : {true, false}) {
      SCOPED_TRACE(std::string(depthwise ? "depthwise" : "conv") + (x_first ? ", x * s" : ", s * x"));
      Built b;
      uint32_t x = b.input({1, 7, 9, c});
      uint32_t y = depthwise ? b.op(T::DEPTHWISE_CONV_2D, {x, b.constant({1, 5, 5, c}, 91), b.constant({c}, 92),
                                                           b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)})
                             : b.op(T::CONV_2D, {x, b.constant({19, 3, 3, c}, 93), b.constant({19}, 94), b.i32(1),
                                                 b.i32(1), b.i32(1), b.i32(0)});
      uint32_t s = b.op(T::LOGISTIC, {y});
      b.output(b.op(T::MUL, {x_first ? y : s, x_first ? s : y, b.i32(0)}));
      const std::string op = depthwise ? "op 0 DEPTHWISE_CONV_2D" : "op 0 CONV_2D";
      check(b, op, Runs::kNative, -3.f, 3.f);
      auto cmp = profiled_cpu(b, -3.f, 3.f);
      EXPECT_EQ(nn_test::count_steps(cmp, "LOGISTIC") + nn_test::count_steps(cmp, "MUL"), 0)
          << nn_test::step_labels(cmp);
    }
  Built b;  // the conv's output is a model output too: the sigmoid and product stay apart
  uint32_t x = b.input({1, 7, 9, c});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({19, 3, 3, c}, 95), b.constant({19}, 96), b.i32(1), b.i32(1),
                                 b.i32(1), b.i32(0)});
  b.output(b.op(T::MUL, {y, b.op(T::LOGISTIC, {y}), b.i32(0)}));
  b.output(y);
  auto cmp = profiled_cpu(b, -3.f, 3.f);
  EXPECT_LE(cmp.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(cmp, "op 1 LOGISTIC [xnnpack]"), 1) << nn_test::step_labels(cmp);
}

// A dilation wider than the image: kernel rows / columns that read only padding for every
// output pixel are dropped (ASPP's dilated convs on a small map): 3x3 at dilation 4 with
// padding 4 on a 4x7 image keeps its middle row (1x3), at dilation 9 on 5x5 only its
// centre (1x1, a pointwise GEMM). Same numbers as the full kernel.
TEST_P(Channels, ConvDeadTapsDropped) {
  const uint32_t c = GetParam();
  struct Case {
    uint32_t h, w, dilation;
    const char* taps;
  };
  for (Case k : {Case{4, 7, 4, "1x3 live taps"}, Case{5, 5, 9, "1x1 live taps"}}) {
    SCOPED_TRACE(k.taps);
    Built b;
    uint32_t x = b.input({1, k.h, k.w, c});
    const int32_t d = int32_t(k.dilation);
    b.output(b.op(T::CONV_2D, {x, b.constant({21, 3, 3, c}, 97), b.constant({21}, 98), b.i32(d), b.i32(d),
                               b.i32(d), b.i32(d), b.i32(1), b.i32(1), b.i32(0), b.boolean(false), b.i32(d),
                               b.i32(d)}));
    check(b, "op 0 CONV_2D", Runs::kNative);
    nn::SessionOptions o;
    o.delegates = {"cpu"};
    auto session = nn::Session::open(b.model, o);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    ASSERT_EQ((*session)->kernels().size(), 1u);
    EXPECT_NE((*session)->kernels()[0].kernel.find(k.taps), std::string::npos) << (*session)->kernels()[0].kernel;
  }
}

// Dilated convs read their taps in place (one run of A per tap), with zero-padded strips
// at the left and right edges where the windows' span fits a micro-tile's space, else
// im2col rows: widths that put tiles across both edges, dilation 2..7, strides 1 and 2.
TEST_P(Channels, Conv2dDilatedTapsInPlace) {
  const uint32_t c = GetParam();
  struct Case {
    uint32_t w, stride, dil_w, dil_h;
  };
  for (Case k : {Case{23, 1, 2, 2}, Case{19, 1, 3, 1}, Case{21, 2, 2, 3}, Case{30, 1, 7, 2}}) {
    SCOPED_TRACE("width " + std::to_string(k.w) + " stride " + std::to_string(k.stride) + " dilation " +
                 std::to_string(k.dil_w) + "x" + std::to_string(k.dil_h));
    Built b;
    uint32_t x = b.input({2, 9, k.w, c});
    const int32_t st = int32_t(k.stride);
    b.output(b.op(T::CONV_2D, {x, b.constant({17, 3, 3, c}, 99), b.constant({17}, 100), b.i32(1), b.i32(st),
                               b.i32(st), b.i32(1), b.boolean(false), b.i32(int32_t(k.dil_w)),
                               b.i32(int32_t(k.dil_h))}));
    check(b, "op 0 CONV_2D", Runs::kNative);
  }
}

INSTANTIATE_TEST_SUITE_P(OddSizes, Channels, ::testing::Values(1u, 13u, 127u));

// A 3x3 conv on 3 channels (every image model's stem): 3 kernel rows of 9 k steps, which
// both micro-kernels run with the segments and k as constants, AVX2's over a whole output
// row's tiles in one call. Widths whose rows end in a partial tile, strides 1 and 2, output
// channels that fill, cross and miss a panel, with and without a fused hard-swish.
TEST(CpuDelegateOps, StemConvOnThreeChannels) {
  struct Case {
    uint32_t h, w, out_c, stride;
    bool hard_swish;
  };
  for (Case k : {Case{9, 37, 16, 2, true}, Case{7, 20, 13, 1, false}, Case{6, 31, 24, 2, false},
                 Case{5, 13, 16, 1, true}}) {
    SCOPED_TRACE(std::to_string(k.h) + "x" + std::to_string(k.w) + " -> " + std::to_string(k.out_c) + " stride " +
                 std::to_string(k.stride) + (k.hard_swish ? " hard-swish" : ""));
    Built b;
    uint32_t x = b.input({2, k.h, k.w, 3});
    const int32_t st = int32_t(k.stride);
    uint32_t conv = b.op(T::CONV_2D, {x, b.constant({k.out_c, 3, 3, 3}, 71), b.constant({k.out_c}, 72), b.i32(1),
                                      b.i32(st), b.i32(st), b.i32(0)});
    b.output(k.hard_swish ? b.op(T::HARD_SWISH, {conv}) : conv);
    check(b, "op 0 CONV_2D", Runs::kNative, -2.f, 2.f);
    if (k.hard_swish && has_avx2()) {  // the hard-swish runs in the conv's epilogue
      auto r = profiled_cpu(b, -2.f, 2.f);
      EXPECT_EQ(r.steps.size(), 1u) << nn_test::step_labels(r);
    }
  }
}

// Native depthwise at channel counts around its vector widths (8 AVX2 / 16 AVX-512 lanes,
// tails of 1, 13, 15 and 1 lanes) and its switch from the column to the wide kernel (32),
// on rows wide enough for every interior pixel group (8, 4, 1) and both edges.
class DwChannels : public ::testing::TestWithParam<uint32_t> {};

// Which kernel runs a 3x3 depthwise with nothing to fuse, out_w output columns wide
// (native_candidate says why).
Runs plain_3x3_depthwise(uint32_t c, uint32_t out_w) {
  return c <= 32 || out_w >= 14 ? Runs::kNative : Runs::kNativeAvx512;
}

TEST_P(DwChannels, DepthwiseSameStride2) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 13, 13, c});
  uint32_t w = b.constant({1, 3, 3, c}, 7), bias = b.constant({c}, 8);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(2), b.i32(2), b.i32(1), b.i32(0)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", plain_3x3_depthwise(c, 7));
}

TEST_P(DwChannels, DepthwiseSameStride1Relu6) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 5, 15, c});  // 13 interior columns: groups of 8, 4 and 1
  uint32_t w = b.constant({1, 3, 3, c}, 41), bias = b.constant({c}, 42);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", plain_3x3_depthwise(c, 15));
}

TEST_P(DwChannels, Depthwise5x5SameDilatedRelu6) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 13, 17, c});
  uint32_t w = b.constant({1, 5, 5, c}, 26), bias = b.constant({c}, 27);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3),
                                       b.boolean(false), b.i32(2), b.i32(1)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative);
}

TEST_P(DwChannels, Depthwise5x5ValidStride2Relu) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 9, 28, c});
  uint32_t w = b.constant({1, 5, 5, c}, 43), bias = b.constant({c}, 44);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(2), b.i32(2), b.i32(2), b.i32(1), b.i32(1)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative);
}

// Stride 1, 5x5, 11 rows: rows 2-3, 4-5 and 6-7 run as pairs (each input row read once for
// both), the pairs touching the padding and the odd last row a row at a time; HARD_SWISH in
// the epilogue.
TEST_P(DwChannels, Depthwise5x5SameStride1HardSwishRowPairs) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({2, 11, 21, c});
  uint32_t w = b.constant({1, 5, 5, c}, 53), bias = b.constant({c}, 54);
  uint32_t dw = b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(b.op(T::HARD_SWISH, {dw}));
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative, -4.f, 4.f);
}

// An image narrower and shorter than the kernel: every column is an edge column.
TEST_P(DwChannels, Depthwise5x5SameTinyImage) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 3, 2, c});
  uint32_t w = b.constant({1, 5, 5, c}, 51), bias = b.constant({c}, 52);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative);
}

// 3x5 taps: neither kernel's specialised tap count (9, 25) nor width (3, 5) holds.
TEST_P(DwChannels, Depthwise3x5ExplicitDilatedRelu1) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 11, 23, c});
  uint32_t w = b.constant({1, 3, 5, c}, 45), bias = b.constant({c}, 46);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(3), b.i32(1), b.i32(2), b.i32(0), b.i32(1), b.i32(1),
                                       b.i32(1), b.i32(2), b.boolean(false), b.i32(2), b.i32(2)}));
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative);
}

// The selfie decoder's tail: depthwise 3x3 -> RELU -> ADD of the depthwise's own input,
// one native pass.
TEST_P(DwChannels, DepthwiseReluResidualOfOwnInputFuse) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 9, 14, c});
  uint32_t w = b.constant({1, 3, 3, c}, 33), bias = b.constant({c}, 34);
  uint32_t dw = b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t relu = b.op(T::RELU, {dw});
  b.output(b.op(T::ADD, {x, relu, b.i32(0)}));
  auto r = profiled_cpu(b);
  ASSERT_EQ(r.steps.size(), 1u) << nn_test::step_labels(r);
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative);
}

// MobileNetV3's depthwise -> HARD_SWISH, in the epilogue.
TEST_P(DwChannels, DepthwiseHardSwishFuse) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 7, 19, c});
  uint32_t w = b.constant({1, 5, 5, c}, 47, -2.f, 2.f), bias = b.constant({c}, 48);
  uint32_t dw = b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(b.op(T::HARD_SWISH, {dw}));
  auto r = profiled_cpu(b, -2.f, 2.f);
  ASSERT_EQ(r.steps.size(), 1u) << nn_test::step_labels(r);
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative, -2.f, 2.f);
}

// A residual ADD (of a second input) with its own RELU6 after a stride-2 depthwise.
TEST_P(DwChannels, DepthwiseStride2ResidualRelu6Fuse) {
  const uint32_t c = GetParam();
  Built b;
  uint32_t x = b.input({1, 11, 27, c});
  uint32_t y = b.input({1, 6, 14, c});
  uint32_t w = b.constant({1, 3, 3, c}, 49), bias = b.constant({c}, 50);
  uint32_t dw = b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(2), b.i32(2), b.i32(1), b.i32(0)});
  b.output(b.op(T::ADD, {dw, y, b.i32(3)}));
  auto r = profiled_cpu(b, -2.f, 2.f);
  ASSERT_EQ(r.steps.size(), 1u) << nn_test::step_labels(r);
  check(b, "op 0 DEPTHWISE_CONV_2D", Runs::kNative, -2.f, 2.f);
}

INSTANTIATE_TEST_SUITE_P(OddSizes, DwChannels, ::testing::Values(1u, 13u, 16u, 17u, 31u, 32u, 33u, 127u));

// An inverted residual's expansion (1x1 conv) and the depthwise conv reading it run as one
// native op (NativeExpandDepthwise) when the expanded tensor is large (>= 512 KB: the sizes
// below), rows fill the conv's micro-tiles (width 48) and a second thread's range
// re-expands few rows: MobileNetV2's stride-2 block, a stride-1 one with a residual ADD,
// MobileNetV3's HARD_SWISH 5x5 dilated one, a batch of 2 with VALID padding. The depthwise
// leaves no step of its own; the result is the reference's at 1 and 2 threads, on AVX-512,
// AVX2 and XNNPACK.
class ExpandChannels : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ExpandChannels, ExpansionRunsWithTheDepthwiseItFeeds) {
  const uint32_t c = GetParam();
  const uint32_t h = std::max<uint32_t>(52, 131072 / (c * 48) + 1), w = 48;
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant) + ", " + std::to_string(h) + "x48x" +
                 std::to_string(c));
    Built b;
    const uint32_t batch = variant == 3 ? 2 : 1;
    uint32_t x = b.input({batch, h, w, 7});
    uint32_t ew = b.constant({c, 1, 1, 7}, 61), eb = b.constant({c}, 62);
    uint32_t dw5 = b.constant({1, 5, 5, c}, 63, -0.3f, 0.3f), dw3 = b.constant({1, 3, 3, c}, 64),
             db = b.constant({c}, 65);
    const int expand_act = variant == 0 ? 3 : variant == 1 ? 1 : 0;
    uint32_t e = b.op(T::CONV_2D, {x, ew, eb, b.i32(1), b.i32(1), b.i32(1), b.i32(expand_act)});
    if (variant == 2) e = b.op(T::HARD_SWISH, {e});
    switch (variant) {
      case 0:  // 3x3 stride 2 SAME, RELU6 on both
        b.output(b.op(T::DEPTHWISE_CONV_2D, {e, dw3, db, b.i32(1), b.i32(2), b.i32(2), b.i32(1), b.i32(3)}));
        break;
      case 1: {  // 3x3 stride 1, then ADD of a second input with RELU6
        uint32_t y = b.input({1, h, w, c});
        uint32_t d =
            b.op(T::DEPTHWISE_CONV_2D, {e, dw3, db, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
        b.output(b.op(T::ADD, {d, y, b.i32(3)}));
        break;
      }
      case 2: {  // 5x5 dilated by 2, HARD_SWISH after both
        uint32_t d = b.op(T::DEPTHWISE_CONV_2D, {e, dw5, db, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0),
                                                 b.boolean(false), b.i32(2), b.i32(2)});
        b.output(b.op(T::HARD_SWISH, {d}));
        break;
      }
      default:  // 3x3 stride 2 VALID, RELU
        b.output(b.op(T::DEPTHWISE_CONV_2D, {e, dw3, db, b.i32(2), b.i32(2), b.i32(2), b.i32(1), b.i32(1)}));
    }
    check(b, "op 0 CONV_2D", Runs::kNative, -2.f, 2.f);
    auto r = profiled_cpu(b, -2.f, 2.f);
    if (has_avx512()) {
      EXPECT_EQ(nn_test::count_steps(r, "DEPTHWISE_CONV_2D"), 0) << nn_test::step_labels(r);
    }
    // On the AVX2 kernels too (6-pixel tiles fill a 48-wide row), though a wide 3x3
    // depthwise with nothing to fuse would run on XNNPACK there.
    nn::SessionOptions avx2;
    avx2.delegates = {"cpu"};
    avx2.profile = true;
    avx2.cpu.avx512 = false;
    auto r2 = nn_test::compare_with_reference(b.model, avx2, -2.f, 2.f);
    EXPECT_LE(r2.max_rel_error, kTolerance);
    if (has_avx2()) {
      EXPECT_EQ(nn_test::count_steps(r2, "DEPTHWISE_CONV_2D"), 0) << nn_test::step_labels(r2);
    }
  }
}

// The same with a stem conv in front of the depthwise (MobileNets' first 3x3 conv): each
// row of the conv reads its input rows in place, with the top row's and, on an odd height,
// the bottom row's taps partly in the padding; stride 2 with explicit padding, and stride
// 1 SAME on a batch of 2.
TEST_P(ExpandChannels, StemConvRunsWithTheDepthwiseItFeeds) {
  const uint32_t c = GetParam();
  for (int variant = 0; variant < 2; ++variant) {
    const uint32_t h = variant == 0 ? 2 * (5462 / c + 1) + 1 : 2731 / c + 2;
    SCOPED_TRACE("variant " + std::to_string(variant) + ", " + std::to_string(h) + "x48x3 -> " +
                 std::to_string(c));
    Built b;
    uint32_t x = b.input({variant == 0 ? 1u : 2u, h, 48, 3});
    uint32_t cw = b.constant({c, 3, 3, 3}, 71), cb = b.constant({c}, 72);
    uint32_t dw = b.constant({1, 3, 3, c}, 73), db = b.constant({c}, 74);
    uint32_t stem = variant == 0 ? b.op(T::CONV_2D, {x, cw, cb, b.i32(1), b.i32(1), b.i32(1), b.i32(1),
                                                     b.i32(2), b.i32(2), b.i32(3)})
                                 : b.op(T::CONV_2D, {x, cw, cb, b.i32(1), b.i32(1), b.i32(1), b.i32(1)});
    b.output(b.op(T::DEPTHWISE_CONV_2D, {stem, dw, db, b.i32(1), b.i32(variant == 0 ? 1 : 2),
                                         b.i32(variant == 0 ? 1 : 2), b.i32(1), b.i32(3)}));
    check(b, "op 0 CONV_2D", Runs::kNative, -2.f, 2.f);
    auto r = profiled_cpu(b, -2.f, 2.f);
    if (has_avx512()) {
      EXPECT_EQ(nn_test::count_steps(r, "DEPTHWISE_CONV_2D"), 0) << nn_test::step_labels(r);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OddSizes, ExpandChannels, ::testing::Values(13u, 40u, 127u));

// The expansion stays its own op when its output is needed elsewhere (a model output),
// when a row would leave a micro-tile mostly empty (width 28 on 8-pixel tiles), when the
// expanded tensor is small enough to stay in cache anyway (16x16x40), and when a row of
// the conv reads padding only.
TEST(CpuDelegateFusion, ExpansionStaysApartWhenSharedNarrowOrSmall) {
  Built b;
  uint32_t ew = b.constant({40, 1, 1, 7}, 66), eb = b.constant({40}, 67);
  uint32_t dw = b.constant({1, 5, 5, 40}, 68, -0.3f, 0.3f), db = b.constant({40}, 69);
  auto block = [&](uint32_t x, bool share) {
    uint32_t e = b.op(T::CONV_2D, {x, ew, eb, b.i32(1), b.i32(1), b.i32(1), b.i32(3)});
    if (share) b.output(e);
    b.output(b.op(T::DEPTHWISE_CONV_2D, {e, dw, db, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
  };
  block(b.input({1, 104, 48, 7}), true);
  block(b.input({1, 160, 28, 7}), false);
  block(b.input({1, 16, 16, 7}), false);
  // A 1x1 conv padded by a row above and below: its first and last output rows read only
  // padding (bias and activation), which a conv run a row at a time cannot express.
  uint32_t padded = b.op(T::CONV_2D, {b.input({1, 70, 48, 7}), ew, eb, b.i32(0), b.i32(0), b.i32(1), b.i32(1),
                                      b.i32(1), b.i32(1), b.i32(3)});
  b.output(b.op(T::DEPTHWISE_CONV_2D, {padded, dw, db, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "DEPTHWISE_CONV_2D [native]"), 4) << nn_test::step_labels(r);
}

// A profiled one-thread session on the AVX2 kernels beside the reference kernels.
nn_test::Comparison profiled_avx2(Built& b, float lo = -1.f, float hi = 1.f) {
  nn::Status v = b.model->validate_and_infer_shapes();
  EXPECT_TRUE(v.is_ok()) << v.to_string();
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.profile = true;
  o.cpu.avx512 = false;
  return nn_test::compare_with_reference(b.model, o, lo, hi);
}

// On the AVX2 kernels (6-pixel tiles, a row's last 1-4 pixels on the smaller kernels) an
// expansion runs with its depthwise where a row holds at least 6 tiles: 56 (9 tiles and 2
// pixels), 38 (6 and 2) and 64 wide fuse, 33 (5 and 3) and 28 do not. The expansion's RELU
// is an op of its own; 40 channels, so a depthwise left apart is a wide 3x3 one, native
// from 14-pixel maps on. The expanded tensors are all >= 512 KB.
TEST(CpuDelegateFusion, Avx2ExpansionRunsWithItsDepthwiseOnRowsOfSixTiles) {
  if (!has_avx2()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  uint32_t ew = b.constant({40, 1, 1, 7}, 91), eb = b.constant({40}, 92);
  uint32_t dw = b.constant({1, 3, 3, 40}, 93), db = b.constant({40}, 94);
  for (auto [h, w] : {std::pair{60u, 56u}, std::pair{90u, 38u}, std::pair{52u, 64u}, std::pair{104u, 33u},
                      std::pair{120u, 28u}}) {
    uint32_t e = b.op(T::CONV_2D, {b.input({1, h, w, 7}), ew, eb, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
    b.output(b.op(T::DEPTHWISE_CONV_2D, {b.op(T::RELU, {e}), dw, db, b.i32(1), b.i32(1), b.i32(1), b.i32(1),
                                         b.i32(0)}));
  }
  auto r = profiled_avx2(b, -2.f, 2.f);
  EXPECT_LE(r.max_rel_error, kTolerance);
  // Ops 3i (conv), 3i+1 (RELU), 3i+2 (depthwise) per block: the 33- and 28-wide ones apart.
  EXPECT_EQ(nn_test::count_steps(r, "op 11 DEPTHWISE_CONV_2D [native]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "op 14 DEPTHWISE_CONV_2D [native]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(r.steps.size(), 7u) << nn_test::step_labels(r);
}

// On the AVX2 kernels a wide 3x3 depthwise with nothing to fuse runs on XNNPACK only on
// maps narrower than 14 pixels (7x7x64 below; 14x14x64 and 16x9x48 native), unless it runs
// with the expansion feeding it: a 48-wide expansion whose RELU feeds a stride-4 depthwise
// (a 12-pixel output) is fused through that activation op. Outputs are the reference's.
TEST(CpuDelegateFusion, Avx2WideDepthwiseOnXnnpackOnlyOnSmallMapsWithNothingToFuse) {
  if (!has_avx2()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  uint32_t dw = b.constant({1, 3, 3, 64}, 95), db = b.constant({64}, 96);
  uint32_t dw48 = b.constant({1, 3, 3, 48}, 97), db48 = b.constant({48}, 98);
  auto depthwise = [&](uint32_t x, uint32_t wt, uint32_t bias, int stride) {
    return b.op(T::DEPTHWISE_CONV_2D,
                {x, wt, bias, b.i32(1), b.i32(stride), b.i32(stride), b.i32(1), b.i32(0)});
  };
  b.output(depthwise(b.input({1, 7, 7, 64}), dw, db, 1));     // op 0: XNNPACK
  b.output(depthwise(b.input({1, 14, 14, 64}), dw, db, 1));   // op 1: native
  b.output(depthwise(b.input({1, 9, 16, 48}), dw48, db48, 1));  // op 2: native
  uint32_t ew = b.constant({48, 1, 1, 5}, 99), eb = b.constant({48}, 100);
  uint32_t e = b.op(T::CONV_2D, {b.input({1, 96, 48, 5}), ew, eb, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(depthwise(b.op(T::RELU, {e}), dw48, db48, 4));  // ops 3-5: one native step
  auto r = profiled_avx2(b, -2.f, 2.f);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "op 0 DEPTHWISE_CONV_2D [xnnpack]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "op 1 DEPTHWISE_CONV_2D [native]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "op 2 DEPTHWISE_CONV_2D [native]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "op 3 CONV_2D [native]"), 1) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "op 5 DEPTHWISE_CONV_2D"), 0) << nn_test::step_labels(r);
}

// A squeeze-and-excitation tail into the 1x1 conv that reads it: conv(x * gate) and
// conv(x * gate + skip), gate one value per channel (a runtime tensor here, as the SE
// block's LOGISTIC makes it). The MUL and ADD leave no step of their own; the conv runs
// x on gate-scaled weights (and skip as a second GEMM segment). 9x11 pixels: a row tail
// for both micro-kernels; checked on AVX-512, AVX2 and XNNPACK, 1 and 2 threads.
TEST_P(Channels, GatedInputFusesIntoPointwiseConv) {
  const uint32_t c = GetParam();
  for (bool with_skip : {false, true}) {
    Built b;
    uint32_t x = b.input({1, 9, 11, c});
    uint32_t gate = b.input({1, 1, 1, c});
    uint32_t skip = with_skip ? b.input({1, 9, 11, c}) : 0;
    uint32_t w = b.constant({37, 1, 1, c}, 41), bias = b.constant({37}, 42);
    uint32_t gated = b.op(T::MUL, {gate, x, b.i32(0)});  // the gate first: either order fuses
    uint32_t in = with_skip ? b.op(T::ADD, {skip, gated, b.i32(0)}) : gated;
    b.output(b.op(T::CONV_2D, {in, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)}));
    SCOPED_TRACE(with_skip ? "with skip" : "gate only");
    const std::string conv = "op " + std::string(with_skip ? "2" : "1") + " CONV_2D";
    check(b, conv, Runs::kNative);
    auto r = profiled_cpu(b);
    EXPECT_EQ(nn_test::count_steps(r, "MUL [xnnpack]"), 0) << nn_test::step_labels(r);
    EXPECT_EQ(nn_test::count_steps(r, "ADD [xnnpack]"), 0) << nn_test::step_labels(r);
  }
}

// A pointwise conv with no activation behind a bilinear resize runs first, on the small
// image (NativeConvThenResize): the resize is no step of its own, and the result is the
// reference's, upsampling and downsampling, in every sampling mode, AVX-512 and AVX2.
TEST_P(Channels, PointwiseConvRunsBeforeTheResizeItReads) {
  const uint32_t c = GetParam();
  struct Mode {
    bool align, half;
  };
  for (Mode mode : {Mode{false, false}, Mode{true, false}, Mode{false, true}}) {
    // 26x22: the doubled-width row kernel on the conv's 37 channels.
    for (auto [oh, ow] : {std::pair{26, 23}, std::pair{5, 4}, std::pair{26, 22}}) {
      Built b;
      uint32_t x = b.input({1, 13, 11, c});
      uint32_t w = b.constant({37, 1, 1, c}, 51), bias = b.constant({37}, 52);
      uint32_t up = b.op(T::RESIZE_BILINEAR, {x, b.i32(ow), b.i32(oh), b.boolean(false),
                                              b.boolean(mode.align), b.boolean(mode.half)});
      b.output(b.op(T::CONV_2D, {up, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
      SCOPED_TRACE("align_corners=" + std::to_string(mode.align) + " half_pixel=" +
                   std::to_string(mode.half) + " out " + std::to_string(oh) + "x" + std::to_string(ow));
      check(b, "op 1 CONV_2D", Runs::kNative);
      auto r = profiled_cpu(b);
      EXPECT_EQ(nn_test::count_steps(r, "RESIZE_BILINEAR"), 0) << nn_test::step_labels(r);
    }
  }
}

// The conv stays behind the resize when the swap would change the result or lose a tensor:
// an activation on the conv, a resize output someone else reads, a 3x3 conv; and when the
// image before the resize has fewer pixels than one micro-tile (1x2 -> 7x5).
TEST(CpuDelegateFusion, ConvStaysAfterResizeWhenNotPointwiseAndLinear) {
  Built b;
  uint32_t x = b.input({1, 7, 9, 13});
  uint32_t w = b.constant({5, 1, 1, 13}, 53), w3 = b.constant({5, 3, 3, 13}, 54), bias = b.constant({5}, 55);
  auto resize = [&] {
    return b.op(T::RESIZE_BILINEAR,
                {x, b.i32(18), b.i32(14), b.boolean(false), b.boolean(false), b.boolean(true)});
  };
  b.output(b.op(T::CONV_2D, {resize(), w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)}));  // RELU
  uint32_t shared = resize();
  b.output(b.op(T::CONV_2D, {shared, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
  b.output(shared);
  b.output(b.op(T::CONV_2D, {resize(), w3, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));  // 3x3 SAME
  uint32_t tiny = b.input({1, 1, 2, 13});
  uint32_t tiny_up = b.op(T::RESIZE_BILINEAR,
                          {tiny, b.i32(5), b.i32(7), b.boolean(false), b.boolean(true), b.boolean(false)});
  b.output(b.op(T::CONV_2D, {tiny_up, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "RESIZE_BILINEAR"), 4) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "CONV_2D [native]"), 4) << nn_test::step_labels(r);
}

// An ADD read only by a global average is one native op (NativeAddMean) that never writes
// the sum: with the ADD's own RELU, into AVERAGE_POOL_2D or MEAN (both keep_dims), batch 1
// and 2, AVX-512 and AVX2.
TEST_P(Channels, AddThenGlobalMeanIsOneNativeOp) {
  const uint32_t c = GetParam();
  for (int variant = 0; variant < 4; ++variant) {
    Built b;
    const uint32_t batch = variant == 3 ? 2 : 1;
    uint32_t x = b.input({batch, 13, 7, c}), y = b.input({batch, 13, 7, c});
    uint32_t sum = b.op(T::ADD, {x, y, b.i32(variant == 1 ? 1 : 0)});
    if (variant < 2)
      b.output(b.op(T::AVERAGE_POOL_2D, {sum, b.i32(2), b.i32(1), b.i32(1), b.i32(7), b.i32(13), b.i32(0)}));
    else
      b.output(b.op(T::MEAN, {sum, b.ints({1, 2}), b.i32(variant == 2 ? 1 : 0)}));
    SCOPED_TRACE("variant " + std::to_string(variant));
    check(b, "op 0 ADD", Runs::kNative);
    auto r = profiled_cpu(b);
    EXPECT_EQ(nn_test::count_steps(r, variant < 2 ? "AVERAGE_POOL_2D" : "MEAN"), 0)
        << nn_test::step_labels(r);
  }
}

// An ADD stays an ADD when its sum is needed (another reader, a model output), the mean
// clamps (RELU on the pool), the ADD broadcasts, or the pool is not global.
TEST(CpuDelegateFusion, AddStaysUnfusedUnlessOnlyAGlobalMeanReadsIt) {
  Built b;
  uint32_t x = b.input({1, 9, 6, 13}), y = b.input({1, 9, 6, 13}), row = b.input({1, 1, 6, 13});
  auto global_pool = [&](uint32_t t, int fuse) {
    return b.op(T::AVERAGE_POOL_2D, {t, b.i32(2), b.i32(1), b.i32(1), b.i32(6), b.i32(9), b.i32(fuse)});
  };
  uint32_t shared = b.op(T::ADD, {x, y, b.i32(0)});
  b.output(global_pool(shared, 0));
  b.output(b.op(T::RELU, {shared}));
  uint32_t visible = b.op(T::ADD, {x, y, b.i32(0)});
  b.output(global_pool(visible, 0));
  b.output(visible);
  b.output(global_pool(b.op(T::ADD, {x, y, b.i32(0)}), 1));
  b.output(global_pool(b.op(T::ADD, {x, row, b.i32(0)}), 0));
  b.output(b.op(T::AVERAGE_POOL_2D, {b.op(T::ADD, {x, y, b.i32(0)}), b.i32(2), b.i32(1), b.i32(1), b.i32(3),
                                     b.i32(3), b.i32(0)}));
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "ADD [native]"), 0) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "AVERAGE_POOL_2D [xnnpack]"), 5) << nn_test::step_labels(r);
}

// A ResNet tail: conv, ADD of the block's input with its RELU, global mean, FC. Two passes
// could claim the ADD: the ADD-mean op (NativeAddMean) and the conv's residual epilogue.
// When both did, the mean's output was never written ("no buffer for operand" at open,
// torchvision resnet18 and regnet_x_400mf); the ADD now stays the ADD-mean's head.
TEST(CpuDelegateFusion, AddClaimedByGlobalMeanIsNotAlsoAConvResidual) {
  for (bool fc : {true, false}) {
    SCOPED_TRACE(fc ? "mean then FC" : "mean is the output");
    Built b;
    uint32_t x = b.input({1, 7, 7, 16});
    uint32_t w = b.constant({16, 3, 3, 16}, 51), bias = b.constant({16}, 52);
    uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(1),
                                      b.i32(0)});
    uint32_t sum = b.op(T::ADD, {conv, x, b.i32(1)});
    uint32_t mean = b.op(T::MEAN, {sum, b.ints({1, 2}), b.i32(0)});
    if (fc)
      b.output(b.op(T::FULLY_CONNECTED, {mean, b.constant({10, 16}, 53), b.constant({10}, 54), b.i32(0)}));
    else
      b.output(mean);
    auto r = profiled_cpu(b);
    EXPECT_LE(r.max_rel_error, kTolerance);
    EXPECT_EQ(nn_test::count_steps(r, "CONV_2D [native]"), 1) << nn_test::step_labels(r);
    EXPECT_EQ(nn_test::count_steps(r, "ADD [native]"), 1) << nn_test::step_labels(r);
    nn::SessionOptions grouped;  // unprofiled: the steps as a run groups them
    grouped.delegates = {"cpu"};
    grouped.threads = 2;
    EXPECT_LE(nn_test::compare_with_reference(b.model, grouped).max_rel_error, kTolerance);
  }
}

// What must not fuse into a conv's input: a gated tensor someone else reads too, a gate
// that is not per channel, a MUL with an activation.
TEST(CpuDelegateFusion, GatedInputStaysUnfusedWhenShared) {
  Built b;
  uint32_t x = b.input({1, 6, 7, 13});
  uint32_t gate = b.input({1, 1, 1, 13});
  uint32_t plane = b.input({1, 6, 7, 1});
  uint32_t w = b.constant({13, 1, 1, 13}, 43), bias = b.constant({13}, 44);
  uint32_t shared = b.op(T::MUL, {x, gate, b.i32(0)});
  uint32_t conv1 = b.op(T::CONV_2D, {shared, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t by_plane = b.op(T::MUL, {conv1, plane, b.i32(0)});
  uint32_t conv2 = b.op(T::CONV_2D, {by_plane, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t relu_mul = b.op(T::MUL, {conv2, gate, b.i32(1)});
  uint32_t conv3 = b.op(T::CONV_2D, {relu_mul, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(conv3);
  b.output(shared);
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "MUL [xnnpack]"), 3) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "CONV_2D [native]"), 3) << nn_test::step_labels(r);
}

// What must not fuse: an ADD that broadcasts, and a conv output that is also a model
// output (it has to be written as is). Both still match the reference.
TEST(CpuDelegateFusion, BroadcastAddAndVisibleOutputStayUnfused) {
  Built b;
  uint32_t x = b.input({1, 7, 9, 13});
  uint32_t row = b.input({1, 1, 9, 13});
  uint32_t w = b.constant({13, 1, 1, 13}, 35), bias = b.constant({13}, 36);
  uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t bcast = b.op(T::ADD, {conv, row, b.i32(0)});
  uint32_t conv2 = b.op(T::CONV_2D, {bcast, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  b.output(b.op(T::ADD, {conv2, x, b.i32(0)}));
  b.output(conv2);
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  EXPECT_EQ(nn_test::count_steps(r, "ADD [xnnpack]"), 2) << nn_test::step_labels(r);
  EXPECT_EQ(nn_test::count_steps(r, "CONV_2D [native]"), 2) << nn_test::step_labels(r);
}

// A residual produced after the conv in model order (a side branch): the fused conv must
// wait for it. Checks the step order through the numbers.
TEST(CpuDelegateFusion, ResidualFromLaterBranchIsReadyFirst) {
  Built b;
  uint32_t x = b.input({1, 6, 6, 16});
  uint32_t w = b.constant({16, 1, 1, 16}, 37), bias = b.constant({16}, 38);
  uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
  uint32_t side = b.op(T::LOGISTIC, {x});  // XNNPACK, after the conv in op order
  b.output(b.op(T::ADD, {conv, side, b.i32(0)}));
  auto r = profiled_cpu(b);
  EXPECT_LE(r.max_rel_error, kTolerance);
  ASSERT_EQ(r.steps.size(), 2u) << nn_test::step_labels(r);
  EXPECT_NE(r.steps[0].label.find("LOGISTIC"), std::string::npos) << nn_test::step_labels(r);
  EXPECT_NE(r.steps[1].label.find("CONV_2D [native]"), std::string::npos) << nn_test::step_labels(r);
}

// An op XNNPACK lacks (TANH) between XNNPACK ops: three steps inside the one CPU
// partition, tensors handed across, same numbers.
TEST(CpuDelegateSteps, ReferenceOpBetweenXnnpackSteps) {
  Built b;
  uint32_t x = b.input({1, 6, 7, 13});
  uint32_t w = b.constant({5, 1, 1, 13}, 23), bias = b.constant({5}, 24);
  uint32_t conv = b.op(T::CONV_2D, {x, w, bias, b.i32(2), b.i32(1), b.i32(1), b.i32(1)});
  uint32_t t = b.op(T::TANH, {conv});  // no XNNPACK node, no native kernel
  uint32_t s = b.op(T::LOGISTIC, {t});
  b.output(s);
  b.output(conv);
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  auto c = nn_test::compare_with_reference(b.model, o);
  EXPECT_LE(c.max_rel_error, kTolerance);
  o.profile = true;
  c = nn_test::compare_with_reference(b.model, o);
  EXPECT_EQ(nn_test::count_steps(c, "[xnnpack]") + nn_test::count_steps(c, "[native]"), 2)
      << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "TANH [reference]"), 1) << nn_test::step_labels(c);
  // The report names one CPU partition: steps are internal to the delegate.
  EXPECT_NE(c.report.find("partition 0: cpu, 3 ops"), std::string::npos) << c.report;
}

// Ops with constant inputs only (DEQUANTIZE of FP16 weights) fold at compile time, so the
// conv reading them still lowers to XNNPACK with static weights.
TEST(CpuDelegateFolding, Fp16WeightsBehindDequantizeFold) {
  Built b;
  uint32_t x = b.input({1, 5, 5, 3});
  std::vector<uint16_t> half(4 * 3 * 3 * 3, 0x3C00);             // 1.0
  for (size_t i = 0; i < half.size(); i += 3) half[i] = 0xB800;  // -0.5
  uint32_t w16 =
      b.model->add_constant(OperandType::TENSOR_FLOAT16, {4, 3, 3, 3}, half.data(), half.size() * 2);
  uint32_t w = b.model->add_tensor(OperandType::TENSOR_FLOAT32, {});
  b.model->add_operation(T::DEQUANTIZE, {w16}, {w});
  uint32_t bias = b.constant({4}, 25);
  b.output(b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
  auto c = profiled_cpu(b);
  EXPECT_LE(c.max_rel_error, kTolerance);
  ASSERT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
  EXPECT_NE(c.steps[0].label.find("op 1 CONV_2D [native]"), std::string::npos) << nn_test::step_labels(c);
}

}  // namespace
