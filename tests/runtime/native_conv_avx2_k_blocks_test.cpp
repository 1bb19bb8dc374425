// NativeConv's k-blocked AVX2 GEMM (NativeIsa::avx2_k_blocks): convs whose 16-wide weight
// panels outgrow half of L1 walk them in slices of k, every micro-tile of up to 64 rows
// through each slice (a 7x7 map's 49 rows in one call). Against a direct conv in double on
// odd shapes (rows no multiple of 6, two 64-row chunks, channels no multiple of 8 or 16,
// slices of unequal length, pointwise, strided, 3x3 in place / edge strips / im2col rows,
// grouped), every epilogue stage, 1 and 2 threads; with the switch off the same bits (each
// output is the same FMAs in the same order); which convs take it (1x1 convs on a map of
// one 64-row chunk whose weights outgrow half of L2: one slice); and the CpuOptions switch
// names the kernel (AVX-512 unchanged).
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
using nn::cpu::NativeConv;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeIsa;
using T = nn::OperationType;
using Built = nn_test::TestModel;

using nn_test::epilogue_of;
using nn_test::Stage;

NativeIsa avx2_isa(bool blocks, bool eight_columns = true) {
  NativeIsa isa = NativeIsa::with(false, 0, true, eight_columns);
  isa.avx2_k_blocks = blocks;
  return isa;
}

TEST(NativeConvAvx2KBlocks, MatchesTheDirectConvAndTheUnblockedKernel) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  // {h, w, in_c, out_c, kernel, stride, groups}: 7x7 1x1 convs (49 rows) on 960 channels (3
  // slices), 400 and 600 onto 40 (a last panel of 8: the 8x8 kernel where it is on) and 45
  // (13 columns); 5 x 7 (35 rows) and 1 x 23 (23) onto 33 and 17 channels; 9x9 (81 rows:
  // tiles of 48 and 33) and 14x14 (196: four of 48 and an unblocked 4); 3 x 4 (12 rows: two
  // micro-tiles); a strided 1x1 onto 7 x 6; 3x3 convs on a 7x7 map (im2col rows once), on
  // 6 x 40 (rows in place and through edge strips) and on 200 channels (k 1800); grouped
  // 1x1 and 3x3; 160 and 7 input channels on 7x7 (not blocked); 7x7 and 3 x 5 1x1 convs
  // whose weights outgrow half of L2 (MNASNet's 192 -> 1152, here 1144: a last panel of 8;
  // 200 -> 1400: 15 rows, three micro-tiles): one slice on an L2 below 1.7 MB.
  const uint32_t cases[][7] = {
      {7, 7, 960, 64, 1, 1, 1},   {7, 7, 400, 40, 1, 1, 1},   {7, 7, 600, 45, 1, 1, 1},
      {5, 7, 500, 33, 1, 1, 1},   {1, 23, 400, 17, 1, 1, 1},  {9, 9, 700, 16, 1, 1, 1},
      {14, 14, 576, 24, 1, 1, 1}, {3, 4, 512, 32, 1, 1, 1},   {13, 11, 520, 48, 1, 2, 1},
      {7, 7, 64, 40, 3, 1, 1},    {6, 40, 80, 32, 3, 1, 1},   {7, 7, 200, 16, 3, 1, 1},
      {7, 7, 1024, 64, 1, 1, 2},  {6, 10, 192, 64, 3, 1, 2},  {7, 7, 160, 96, 1, 1, 1},
      {7, 7, 7, 19, 1, 1, 1},     {7, 7, 192, 1144, 1, 1, 1}, {3, 5, 200, 1400, 1, 1, 1}};
  const Stage stages[] = {Stage::kNone, Stage::kRelu6, Stage::kHardSwish, Stage::kResidual};
  const size_t slice = std::max<size_t>(64, nn::cpu::l1d_bytes() / 2 / (16 * sizeof(float)));
  uint32_t seed = 131;
  size_t blocked = 0;
  for (const auto& c : cases)
    for (Stage stage : stages)
      for (bool eight_columns : {true, false}) {
        const NativeConvShape s = nn_test::same_conv_shape(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
        SCOPED_TRACE(nn_test::describe(c, stage) + (eight_columns ? "" : " no 8x8 kernel"));
        const size_t k = size_t(c[4]) * c[4] * (s.in_c / s.groups);
        const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
        seed += 4;
        const Epilogue e = epilogue_of(stage);
        const std::vector<float> want = nn_test::direct_conv(s, d, e);
        NativeConv on(s, d.filter.data(), d.bias.data(), e, avx2_isa(true, eight_columns));
        NativeConv off(s, d.filter.data(), d.bias.data(), e, avx2_isa(false, eight_columns));
        ASSERT_TRUE(on.ok() && off.ok());
        // Slices of half of L1 where a panel outgrows that; one slice on a 1x1 conv of a
        // 64-row chunk whose weights outgrow half of L2.
        const size_t m = size_t(c[0]) * c[1];
        const bool one_slice = c[4] == 1 && c[5] == 1 && c[6] == 1 && m >= 12 && m <= 64 &&
                               k * c[3] * sizeof(float) > nn::cpu::l2_bytes() / 2;
        const size_t want_block = k > slice ? slice : one_slice ? k : 0;
        EXPECT_EQ(on.k_block(), want_block);
        EXPECT_EQ(off.k_block(), 0u);
        blocked += on.k_block() > 0;
        nn_test::expect_same_bits_as_without(on, off, d, e, want, k, pool);
      }
  // Nine cases are deep enough to be blocked on any L1 up to 64 KB (14 on 48 KB).
  if (nn::cpu::l1d_bytes() <= (size_t(64) << 10)) {
    EXPECT_GE(blocked, 9u * 4 * 2);
  }
  pthreadpool_destroy(pool);
}

TEST(NativeConvAvx2KBlocks, TheSwitchNamesTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  if (nn::cpu::l1d_bytes() >= (size_t(64) << 10)) GTEST_SKIP() << "L1 too large for this shape to block";
  Built b;  // on 7x7: a 1x1 conv 512 -> 64 with RELU6 (k 512: blocked on an L1 below 64 KB),
            // a 1x1 conv 64 -> 40 (never), then on 9x9 a 1x1 conv 40 -> 24 (never)
  uint32_t x = b.input({1, 7, 7, 512});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({64, 1, 1, 512}, 3), b.constant({64}, 4), b.i32(0), b.i32(0),
                                 b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(3), b.boolean(false)});
  uint32_t z = b.op(T::CONV_2D, {y, b.constant({40, 1, 1, 64}, 5), b.constant({40}, 6), b.i32(0), b.i32(0),
                                 b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)});
  // Pad 1 around it: 9x9.
  b.output(b.op(T::CONV_2D, {z, b.constant({24, 1, 1, 40}, 7), b.constant({24}, 8), b.i32(1), b.i32(1), b.i32(1),
                             b.i32(1), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off;
  on.avx512 = off.avx512 = false;
  off.avx2_k_blocks = false;
  on.k_block_rows = off.k_block_rows = false;  // names without the 2-thread row split (cpu_threads_test)
  for (int threads : {1, 2}) {
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0", threads), "native conv AVX2, k-blocked");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0", threads), "native conv AVX2");
  }
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 1"), "native conv AVX2, 8-column last panel");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 2"), "native conv AVX2, 8-column last panel");
  // The switch leaves the AVX-512 kernels as they were.
  if (nn::cpu::native_avx512_enabled()) {
    nn::CpuOptions avx512;
    avx512.avx2_k_blocks = false;
    avx512.avx512_half_width = nn::CpuOptions::HalfWidth::kOff;  // no ymm last panel on any host
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx512, "op 0"), "native conv AVX-512, k-blocked");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx512, "op 1"), "native conv AVX-512");
  }
  nn_test::expect_cpu_matches_reference(b.model, {on, off});
}

}  // namespace
