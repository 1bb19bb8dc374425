// NativeDepthwise's pixel pairs (NativeIsa::depthwise_pixel_pairs): 8-channel stride-1
// depthwise convs on AVX-512 with two adjacent output pixels per zmm. Against the conv in
// double and bit for bit against the 16-lane kernel, on widths that take every column group
// (one pixel, odd widths, a last pair with one pixel, groups of 16 inside), SAME and VALID
// padding, 3x3 / 5x5 / 1x3 / 3x5 windows, every epilogue stage, 2 images, 1 and 2 threads;
// which convs take it; and that CpuOptions::depthwise_pixel_pairs names the kernel and both
// match the reference kernels in a model.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <string>
#include <vector>

#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeDepthwise;
using nn::cpu::NativeIsa;
using T = nn::OperationType;

struct Case {
  uint32_t h, w, kh, kw, pad_top, pad_left, pad_bottom, pad_right;
};

NativeConvShape shape_of(const Case& c, uint32_t channels = 8) {
  NativeConvShape s;
  s.batch = 2;
  s.in_h = c.h, s.in_w = c.w, s.in_c = s.out_c = s.groups = channels;
  s.kernel_h = c.kh, s.kernel_w = c.kw;
  s.pad_top = c.pad_top, s.pad_left = c.pad_left;
  s.out_h = c.h + c.pad_top + c.pad_bottom - c.kh + 1;
  s.out_w = c.w + c.pad_left + c.pad_right - c.kw + 1;
  return s;
}

NativeIsa isa_of(bool pairs) {
  NativeIsa isa = NativeIsa::with(true, 0, true);
  isa.depthwise_pixel_pairs = pairs;
  return isa;
}

TEST(NativeDepthwisePixelPairs, MatchesTheConvAndTheSixteenLaneKernel) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  pthreadpool_t pool = pthreadpool_create(2);
  const Case cases[] = {
      {9, 37, 3, 3, 1, 1, 1, 1},  // pose_landmark's SAME 3x3 on an odd width: 16-pixel groups, a 1-pixel last pair
      {7, 40, 3, 3, 1, 1, 1, 1},  {5, 1, 3, 3, 1, 1, 1, 1},   {6, 2, 3, 3, 1, 1, 1, 1},  {4, 3, 3, 3, 1, 1, 1, 1},
      {8, 23, 3, 3, 0, 0, 0, 0},  {11, 29, 5, 5, 2, 2, 2, 2}, {6, 6, 5, 5, 2, 2, 2, 2},  {7, 19, 1, 3, 0, 1, 0, 1},
      {9, 21, 3, 5, 1, 2, 1, 2},  {5, 18, 3, 3, 0, 1, 2, 1},  {7, 35, 5, 3, 2, 0, 2, 2},
  };
  const nn_test::Stage stages[] = {nn_test::Stage::kNone, nn_test::Stage::kRelu6, nn_test::Stage::kHardSwish,
                                   nn_test::Stage::kResidual};
  uint32_t seed = 811;
  for (const Case& c : cases)
    for (int stage = 0; stage < 5; ++stage) {
      const NativeConvShape s = shape_of(c);
      Epilogue e = stage < 4 ? nn_test::epilogue_of(stages[stage]) : Epilogue{};
      if (stage == 4) e.swish = true;
      SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + " kernel " + std::to_string(c.kh) + "x" +
                   std::to_string(c.kw) + " pads " + std::to_string(c.pad_top) + "," + std::to_string(c.pad_left) +
                   "," + std::to_string(c.pad_bottom) + "," + std::to_string(c.pad_right) + " stage " +
                   std::to_string(stage));
      const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
      seed += 4;
      const std::vector<float> filter = nn_test::depthwise_filter(s, d);
      const size_t taps = size_t(s.kernel_h) * s.kernel_w;
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      NativeDepthwise on(s, filter.data(), d.bias.data(), e, isa_of(true));
      NativeDepthwise off(s, filter.data(), d.bias.data(), e, isa_of(false));
      ASSERT_TRUE(on.ok() && off.ok());
      ASSERT_TRUE(on.pixel_pairs());
      ASSERT_FALSE(off.pixel_pairs());
      nn_test::expect_same_bits_as_without(on, off, d, e, want, taps, pool);
    }
  pthreadpool_destroy(pool);
}

TEST(NativeDepthwisePixelPairs, TakesOnlyEightChannelStrideOneConvsOnAvx512) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  const Epilogue none;
  auto takes = [&](NativeConvShape s, bool avx512 = true) {
    NativeIsa isa = isa_of(true);
    isa.avx512 = avx512;
    return NativeDepthwise(s, std::vector<float>(size_t(s.kernel_h) * s.kernel_w * s.out_c, 0.5f).data(), nullptr,
                           none, isa)
        .pixel_pairs();
  };
  const NativeConvShape s = shape_of({9, 37, 3, 3, 1, 1, 1, 1});
  EXPECT_TRUE(takes(s));
  EXPECT_FALSE(takes(s, false));
  EXPECT_FALSE(takes(shape_of({9, 37, 3, 3, 1, 1, 1, 1}, 16)));
  EXPECT_FALSE(takes(shape_of({9, 37, 3, 3, 1, 1, 1, 1}, 4)));
  NativeConvShape strided = s;
  strided.stride_h = strided.stride_w = 2;
  strided.out_h = 5, strided.out_w = 19;
  EXPECT_FALSE(takes(strided));
  NativeConvShape dilated = s;
  dilated.dilation_h = dilated.dilation_w = 2;
  dilated.out_h = 7, dilated.out_w = 35;
  EXPECT_FALSE(takes(dilated));
  EXPECT_FALSE(takes(shape_of({9, 37, 7, 7, 3, 3, 3, 3})));
}

// In a model: a SAME 3x3 depthwise over 8 channels with RELU6 on 20x27; the switch off
// leaves it on the 16-lane kernel.
TEST(NativeDepthwisePixelPairs, TheSwitchNamesTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  nn_test::TestModel b;
  uint32_t x = b.input({1, 20, 27, 8});
  b.output(b.op(T::DEPTHWISE_CONV_2D,
                {x, b.constant({1, 3, 3, 8}, 5), b.constant({8}, 6), b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off, avx2;
  off.depthwise_pixel_pairs = false;
  avx2.avx512 = false;
  if (nn::cpu::native_avx512_enabled()) {
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0"), "native depthwise AVX-512, pixel pairs");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "native depthwise AVX-512, row pairs");
  }
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx2, "op 0"), "native depthwise AVX2, row pairs");
  nn_test::expect_cpu_matches_reference(b.model, {on, off, avx2});
}

}  // namespace
