// NativeConv's AVX2 8x8 kernel (NativeIsa::avx2_8_columns): a last 16-wide panel with 1-8
// valid output channels runs its multiple of 8 rows on it. Against a direct conv in double
// on odd shapes (rows no multiple of 6 or 8, fewer than 8, input channels odd), every
// epilogue stage, 1 and 2 threads; with the switch off the same bits (each output is the
// same FMAs in the same order); and the CpuOptions switch changes the kernel it names.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeArgs;
using nn::cpu::NativeConv;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeIsa;
using T = nn::OperationType;
using Built = nn_test::TestModel;

using nn_test::epilogue_of;
using nn_test::Stage;

using Data = nn_test::NativeConvData;

NativeIsa avx2_isa(bool eight_columns) {
  return NativeIsa::with(false, 0, true, eight_columns);
}

TEST(NativeConv8Columns, MatchesTheDirectConvAndTheSixBySixteenKernel) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  // {h, w, in_c, out_c, stride}: MobileNetV2's 24-channel projection shape at odd sizes, the
  // 7x7 image (49 rows: 6 x 8 + 1), fewer rows than a tile, 1 to 8 columns, 40 and 72
  // channels (32 + 8, 64 + 8), a strided 1x1 conv (implicit GEMM, one segment).
  const uint32_t cases[][5] = {{7, 7, 96, 24, 1}, {9, 13, 17, 24, 1}, {1, 7, 5, 8, 1},  {3, 5, 33, 1, 1},
                               {5, 11, 9, 3, 1},  {13, 9, 40, 40, 1}, {6, 6, 19, 72, 1}, {17, 15, 24, 24, 2},
                               {2, 4, 16, 7, 1},  {8, 8, 144, 24, 1}};
  const Stage stages[] = {Stage::kNone, Stage::kRelu6, Stage::kHardSwish, Stage::kResidual};
  uint32_t seed = 11;
  for (const auto& c : cases)
    for (Stage stage : stages) {
      const NativeConvShape s = nn_test::same_conv_shape(c[0], c[1], c[2], c[3], 1, c[4]);
      SCOPED_TRACE(std::to_string(c[0]) + "x" + std::to_string(c[1]) + " " + std::to_string(c[2]) + "->" +
                   std::to_string(c[3]) + " stride " + std::to_string(c[4]) + " stage " +
                   std::to_string(int(stage)));
      const Data d = nn_test::random_conv_data(s, seed);
      seed += 4;
      const size_t n = size_t(s.out_h) * s.out_w * s.out_c;
      const Epilogue e = epilogue_of(stage);
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      NativeConv on(s, d.filter.data(), d.bias.data(), e, avx2_isa(true));
      NativeConv off(s, d.filter.data(), d.bias.data(), e, avx2_isa(false));
      EXPECT_EQ(on.eight_column_panel(), c[3] % 16 != 0 && c[3] % 16 <= 8);
      EXPECT_FALSE(off.eight_column_panel());
      const std::vector<float> base = nn_test::run_native(off, d, e, n, nullptr);
      for (pthreadpool_t p : {pthreadpool_t(nullptr), pool}) {
        const std::vector<float> got = nn_test::run_native(on, d, e, n, p);
        double worst = 0;
        for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
        EXPECT_LE(worst, 2e-5 * std::sqrt(double(s.in_c))) << (p ? "2 threads" : "1 thread");
        EXPECT_EQ(got, base) << (p ? "2 threads" : "1 thread") << ": not the 6x16 kernel's bits";
      }
    }
  pthreadpool_destroy(pool);
}

TEST(NativeConv8Columns, TheSwitchNamesTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  Built b;  // 1x1 conv 40 -> 24 on 7x7 with RELU6, then a 3x3 conv 24 -> 16 (no 8-column panel)
  uint32_t x = b.input({1, 7, 7, 40});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({24, 1, 1, 40}, 3), b.constant({24}, 4), b.i32(0), b.i32(0),
                                 b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(3), b.boolean(false)});
  b.output(b.op(T::CONV_2D, {y, b.constant({16, 3, 3, 24}, 5), b.constant({16}, 6), b.i32(1), b.i32(1),
                             b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off;
  on.avx512 = off.avx512 = false;
  off.avx2_8_columns = false;
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0"), "native conv AVX2, 8-column last panel");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "native conv AVX2");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 1").find("8-column"), std::string::npos);
  // On AVX-512 (32-wide panels) it never applies.
  if (nn::cpu::native_avx512_enabled()) {
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0").find("8-column"), std::string::npos);
  }
  nn_test::expect_cpu_matches_reference(b.model, {on, off});
}

}  // namespace
