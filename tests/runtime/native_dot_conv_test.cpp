// NativeDotConv (delegates/cpu/native_dot_conv.h): convs of 1-4 output channels as a dot
// product per output pixel. Against the conv in double on shapes that take every path
// (windows read in place, the left / right / top / bottom edges from zero-padded strips,
// maps narrower than one block, a last block overlapping the one before, strides, windows
// of one or several vectors with a masked tail, 2 images), every epilogue stage, AVX-512
// and AVX2, 1 and 2 threads; which convs it takes; and that CpuOptions::dot_conv names the
// kernel and matches the reference kernels in a model.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <string>
#include <vector>

#include "delegates/cpu/native_dot_conv.h"
#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeDotConv;
using nn::cpu::NativeIsa;
using T = nn::OperationType;

struct Case {
  uint32_t h, w, in_c, out_c, kh, kw, stride, pad_top, pad_left, pad_bottom, pad_right;
};

NativeConvShape shape_of(const Case& c) {
  NativeConvShape s;
  s.batch = 2;
  s.in_h = c.h, s.in_w = c.w, s.in_c = c.in_c, s.out_c = c.out_c;
  s.kernel_h = c.kh, s.kernel_w = c.kw, s.stride_h = s.stride_w = c.stride;
  s.pad_top = c.pad_top, s.pad_left = c.pad_left;
  s.out_h = (c.h + c.pad_top + c.pad_bottom - c.kh) / c.stride + 1;
  s.out_w = (c.w + c.pad_left + c.pad_right - c.kw) / c.stride + 1;
  return s;
}

std::string describe(const Case& c) {
  return std::to_string(c.h) + "x" + std::to_string(c.w) + " " + std::to_string(c.in_c) + "->" +
         std::to_string(c.out_c) + " kernel " + std::to_string(c.kh) + "x" + std::to_string(c.kw) + " stride " +
         std::to_string(c.stride) + " pads " + std::to_string(c.pad_top) + "," + std::to_string(c.pad_left) + "," +
         std::to_string(c.pad_bottom) + "," + std::to_string(c.pad_right);
}

TEST(NativeDotConv, MatchesTheConvInDouble) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  // pose_landmark's head (3x3, 8 -> 1, SAME) on 40 columns (interior 38: two blocks of 16
  // and one overlapping, or four and one of 8 on AVX2); 13 channels (window rows of 39
  // floats: two full vectors and a masked 7); RGB in (a 9-float row, masked); a 5x5 over
  // 6 columns (no interior block: every pixel from strips); 2 and 4 outputs, stride 2 with
  // uneven padding, a 1x3 and a 3x1, a 1x1 stride 2 (not pointwise), an unpadded 2x2, 6 outputs.
  const Case cases[] = {{9, 40, 8, 1, 3, 3, 1, 1, 1, 1, 1},  {7, 33, 13, 2, 3, 3, 1, 1, 1, 1, 1},
                        {6, 37, 3, 1, 3, 3, 2, 0, 0, 1, 1},  {5, 6, 4, 3, 5, 5, 1, 2, 2, 2, 2},
                        {8, 50, 8, 4, 3, 3, 1, 1, 1, 1, 1},  {6, 29, 16, 1, 1, 3, 1, 0, 1, 0, 1},
                        {11, 21, 5, 2, 3, 1, 1, 1, 0, 1, 0}, {9, 35, 24, 3, 1, 1, 2, 0, 0, 0, 0},
                        {8, 34, 6, 1, 2, 2, 2, 0, 0, 0, 0},  {4, 70, 1, 1, 3, 3, 1, 1, 1, 1, 1},  {7, 27, 8, 6, 3, 3, 1, 1, 1, 1, 1}};
  const nn_test::Stage stages[] = {nn_test::Stage::kNone, nn_test::Stage::kRelu6, nn_test::Stage::kHardSwish,
                                   nn_test::Stage::kResidual};
  uint32_t seed = 301;
  for (bool avx512 : {true, false}) {
    if (avx512 && !nn::cpu::native_avx512_enabled()) continue;
    const NativeIsa isa = NativeIsa::with(avx512, 0, true);
    for (const Case& c : cases)
      for (int stage = 0; stage < 5; ++stage) {
        const NativeConvShape s = shape_of(c);
        Epilogue e = stage < 4 ? nn_test::epilogue_of(stages[stage]) : Epilogue{};
        if (stage == 4) e.swish = true;
        SCOPED_TRACE(describe(c) + (avx512 ? " AVX-512" : " AVX2") + " stage " + std::to_string(stage));
        
        const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
        seed += 4;
        const std::vector<float> want = nn_test::direct_conv(s, d, e);
        NativeDotConv op(s, d.filter.data(), d.bias.data(), e, isa);
        ASSERT_TRUE(op.ok());
        nn_test::expect_matches_at_1_and_2_threads(op, d, e, want, pool, describe(c));
      }
  }
  pthreadpool_destroy(pool);
}

TEST(NativeDotConv, TakesOnlyDenseConvsOfFewOutputs) {
  NativeConvShape s = shape_of({9, 40, 8, 1, 3, 3, 1, 1, 1, 1, 1});
  const Epilogue none;
  EXPECT_EQ(NativeDotConv::supports(s, none, NativeIsa::best()), nn::cpu::native_conv_supported());
  NativeConvShape wide = s;
  wide.out_c = NativeDotConv::kMaxOutputs + 1;
  EXPECT_FALSE(NativeDotConv::supports(wide, none, NativeIsa::best()));
  NativeConvShape grouped = s;
  grouped.in_c = 8, grouped.out_c = 2, grouped.groups = 2;
  EXPECT_FALSE(NativeDotConv::supports(grouped, none, NativeIsa::best()));
  NativeConvShape dilated = s;
  dilated.dilation_h = dilated.dilation_w = 2;
  EXPECT_FALSE(NativeDotConv::supports(dilated, none, NativeIsa::best()));
  EXPECT_FALSE(NativeDotConv::supports(shape_of({9, 40, 8, 1, 1, 1, 1, 0, 0, 0, 0}), none, NativeIsa::best()));  // pointwise
  Epilogue logistic;
  logistic.logistic = true;
  EXPECT_FALSE(NativeDotConv::supports(s, logistic, NativeIsa::best()));
  // As many outputs as their window rows fill vectors: 3x3 over 8 channels (rows of 24
  // floats, 32 on AVX-512) up to 3 on AVX-512 and 6 on AVX2; over RGB (9 floats, 16) up to 2.
  if (!nn::cpu::native_conv_supported()) return;
  auto takes = [&](uint32_t in_c, uint32_t out_c, bool avx512) {
    NativeConvShape t = shape_of({9, 40, in_c, out_c, 3, 3, 1, 1, 1, 1, 1});
    return NativeDotConv::supports(t, none, NativeIsa::with(avx512, 0, true));
  };
  if (nn::cpu::native_avx512_enabled()) {
    EXPECT_TRUE(takes(8, 3, true));
    EXPECT_FALSE(takes(8, 4, true));
    EXPECT_TRUE(takes(16, 4, true));
    EXPECT_TRUE(takes(3, 2, true));
    EXPECT_FALSE(takes(3, 3, true));
  }
  EXPECT_TRUE(takes(8, 6, false));
  EXPECT_FALSE(takes(8, 7, false));
}

// In a model: a 3x3 conv 8 -> 1 with RELU6 on 20x24 (the dot conv) after a 1x1 conv 3 -> 8
// (the GEMM, pointwise); CpuOptions::dot_conv off puts the head back on the GEMM.
TEST(NativeDotConv, TheSwitchNamesTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  nn_test::TestModel b;
  uint32_t x = b.input({1, 20, 24, 3});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({8, 1, 1, 3}, 3), b.constant({8}, 4), b.i32(0), b.i32(0), b.i32(0),
                                 b.i32(0), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)});
  b.output(b.op(T::CONV_2D, {y, b.constant({1, 3, 3, 8}, 5), b.constant({1}, 6), b.i32(1), b.i32(1), b.i32(1),
                             b.i32(1), b.i32(1), b.i32(1), b.i32(3), b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off, avx2_on, avx2_off;
  off.dot_conv = avx2_off.dot_conv = false;
  avx2_on.avx512 = avx2_off.avx512 = false;
  if (nn::cpu::native_avx512_enabled()) {
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 1"), "native conv AVX-512, a dot per pixel");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 1"), "native conv AVX-512");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0").find("dot"), std::string::npos);
  }
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx2_on, "op 1"), "native conv AVX2, a dot per pixel");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx2_off, "op 1").find("dot"), std::string::npos);
  nn_test::expect_cpu_matches_reference(b.model, {on, off, avx2_on, avx2_off});
}

}  // namespace
