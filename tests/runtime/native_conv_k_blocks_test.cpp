// NativeConv's k-blocked AVX-512 GEMM (NativeIsa::k_blocks): convs whose weight panels
// outgrow half of L1 walk them in slices of k, every micro-tile of up to 64 rows through
// each slice. Against a direct conv in double on shapes that take every path into it
// (pointwise, strided 1x1, im2col rows of a 7x7 map, 3x3 rows read in place and through
// edge strips, grouped, 16-wide and half-used 32-wide panels, 64-row chunks and 4 / 2 / 1-row
// tails), every epilogue stage, 1 and 2 threads; with the switch off the same bits (each
// output is the same FMAs in the same order); and the CpuOptions switch names the kernel.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "native_conv_test_util.h"
#include "runtime/thread_pool.h"
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

NativeIsa avx512_isa(bool k_blocks) {
  NativeIsa isa = NativeIsa::with(true, 0, true);
  isa.k_blocks = k_blocks;
  return isa;
}

TEST(NativeConvKBlocks, MatchesTheDirectConvAndTheUnblockedKernel) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  pthreadpool_t pool = pthreadpool_create(2);
  // {h, w, in_c, out_c, kernel, stride, groups}: a 7x7 map's 1x1 conv (49 rows: 48 + 1) and
  // its 3x3 conv (im2col rows), 8 x 9 (72 rows: a 64-row chunk and 8), 1x1 on 5 x 7 (35:
  // 32 + 2 + 1) and 1 x 23 (16 + 4 + 2 + 1), a strided 1x1, 3x3 rows read in place (three
  // tiles in one call) and through edge strips (6 x 40), 16 output channels (16-wide
  // panels), 33, 40 and 48 (a last 32-wide panel with 1, 8 or 16 valid columns), a grouped
  // 1x1 and 3x3, a 3 x 4 map (12 rows: not blocked), 400 input channels (slices of unequal
  // length) and a 3x3 conv on 200 (k 1800, many slices).
  const uint32_t cases[][7] = {{7, 7, 512, 64, 1, 1, 1},   {7, 7, 64, 96, 3, 1, 1},  {8, 9, 300, 48, 1, 1, 1},
                               {5, 7, 256, 40, 1, 1, 1},   {1, 23, 400, 33, 1, 1, 1}, {13, 11, 260, 64, 1, 2, 1},
                               {6, 40, 80, 32, 3, 1, 1},  {9, 9, 700, 16, 1, 1, 1}, {7, 7, 512, 128, 1, 1, 2},
                               {6, 10, 192, 64, 3, 1, 2}, {3, 4, 512, 32, 1, 1, 1}, {7, 7, 200, 64, 3, 1, 1}};
  const Stage stages[] = {Stage::kNone, Stage::kRelu6, Stage::kHardSwish, Stage::kResidual};
  uint32_t seed = 31;
  size_t blocked = 0;
  for (const auto& c : cases)
    for (Stage stage : stages) {
      const NativeConvShape s = nn_test::same_conv_shape(c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
      SCOPED_TRACE(nn_test::describe(c, stage));
      const size_t k = size_t(c[4]) * c[4] * (s.in_c / s.groups);
      const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
      seed += 4;
      const Epilogue e = epilogue_of(stage);
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      NativeConv on(s, d.filter.data(), d.bias.data(), e, avx512_isa(true));
      NativeConv off(s, d.filter.data(), d.bias.data(), e, avx512_isa(false));
      ASSERT_TRUE(on.ok() && off.ok());
      // Blocked where a panel (16 or 32 columns wide) outgrows half of L1.
      const size_t width = s.out_c / s.groups > 16 ? 32 : 16;
      EXPECT_EQ(on.k_block() > 0, k * width * sizeof(float) > nn::cpu::l1d_bytes() / 2);
      EXPECT_EQ(off.k_block(), 0u);
      blocked += on.k_block() > 0;
      nn_test::expect_same_bits_as_without(on, off, d, e, want, k, pool);
    }
  // The shapes above are deep enough to be blocked on any L1 up to 64 KB.
  if (nn::cpu::l1d_bytes() <= (size_t(64) << 10)) {
    EXPECT_GE(blocked, 10u * 4);
  }
  pthreadpool_destroy(pool);
}

// PackedGemm (NativeWinograd's GEMMs) blocks its panels the same way: against a GEMM in
// double, and the same bits as unblocked, on m = 37 rows (a 64-row chunk's 32 + 4 + 1)
// and 80 (64 + 16), k deep enough to block, n 16 (16-wide panels), 40 and 70 (32-wide).
TEST(NativeConvKBlocks, PackedGemmMatchesTheUnblockedOne) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  const size_t count = 2;
  uint32_t seed = 71;
  for (size_t k : {size_t(300), size_t(900)})
    for (size_t n : {size_t(16), size_t(40), size_t(70)})
      for (size_t m : {size_t(37), size_t(80)}) {
        SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n) + " m " + std::to_string(m));
        const std::vector<float> b = nn_test::random_floats(count * k * n, seed++, -1.f, 1.f);
        const std::vector<float> a = nn_test::random_floats(m * k, seed++, -1.f, 1.f);
        nn::cpu::PackedGemm on(count, k, n, b.data(), avx512_isa(true));
        nn::cpu::PackedGemm off(count, k, n, b.data(), avx512_isa(false));
        ASSERT_TRUE(on.ok() && off.ok());
        for (size_t i = 0; i < count; ++i) {
          std::vector<float> got(m * n, -7.f), base(m * n, -7.f);
          on.multiply(i, m, a.data(), k, got.data(), n);
          off.multiply(i, m, a.data(), k, base.data(), n);
          double worst = 0;
          for (size_t r = 0; r < m; ++r)
            for (size_t c = 0; c < n; ++c) {
              double want = 0;
              for (size_t q = 0; q < k; ++q) want += double(a[r * k + q]) * b[(i * k + q) * n + c];
              worst = std::max(worst, std::abs(got[r * n + c] - want));
            }
          EXPECT_LE(worst, 2e-5 * std::sqrt(double(k)));
          EXPECT_EQ(got, base) << "not the unblocked GEMM's bits";
        }
      }
}

TEST(NativeConvKBlocks, TheSwitchNamesTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  Built b;  // 1x1 conv 512 -> 64 on 7x7 with RELU6 (blocked), then a 3x3 conv 64 -> 16 (k 576 x 16 wide:
            // blocked only on an L1 below 72 KB), then a 1x1 conv 16 -> 48 (never)
  uint32_t x = b.input({1, 7, 7, 512});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({64, 1, 1, 512}, 3), b.constant({64}, 4), b.i32(0), b.i32(0),
                                 b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(3), b.boolean(false)});
  uint32_t z = b.op(T::CONV_2D, {y, b.constant({16, 3, 3, 64}, 5), b.constant({16}, 6), b.i32(1), b.i32(1),
                                 b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)});
  b.output(b.op(T::CONV_2D, {z, b.constant({48, 1, 1, 16}, 7), b.constant({48}, 8), b.i32(0), b.i32(0), b.i32(0),
                             b.i32(0), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off;
  off.k_blocks = false;
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0"), "native conv AVX-512, k-blocked");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "native conv AVX-512");
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 2"), "native conv AVX-512");
  // AVX2 convs are blocked by their own switch (native_conv_avx2_k_blocks_test.cpp), not this one.
  nn::CpuOptions avx2;
  avx2.avx512 = false;
  avx2.k_blocks = false;
  EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx2, "op 0"), "native conv AVX2, k-blocked");
  nn_test::expect_cpu_matches_reference(b.model, {on, off});
}

// A k-blocked conv on a small image (NativeIsa::small_image_im2col): every micro-tile
// through im2col rows built once, one k-blocked call per panel, each thread a run of
// panels. Against a direct conv in double and the same bits as the switch off (in place,
// strips and im2col rows feed the same FMAs in the same order), 1 and 2 threads, on a 7x7
// 3x3 conv (49 rows), an 8x8 map's 1x3 and 3x1 convs (64 rows, one tile per output row), a
// 14x14 3x3 conv (196 rows: 64-row chunks and a 4-row tail), a 3x3 stride 2 conv onto 7x7
// and strided 1x1s (400 -> 64: its pixels outweigh its weights, yet its panels split at
// 2 threads, not its rows); a 17x17 map (289 rows) too; an 18x18 one (324 rows: 5 row tiles) and a shallow 3x3 (not blocked)
// stay as they were, and convs of one or three panels only on one thread (at two their
// rows split: the panels would not).
TEST(NativeConvKBlocks, SmallImagesRunTheirIm2colRowsOnce) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  if (nn::cpu::l1d_bytes() > (size_t(64) << 10)) GTEST_SKIP() << "L1 too large for these shapes to block";
  pthreadpool_t pool = pthreadpool_create(2);
  struct Case {
    uint32_t h, w, in_c, out_c, kh, kw, stride;
    bool once, once_at_2;
  };
  const Case cases[] = {{7, 7, 96, 80, 3, 3, 1, true, false},    {8, 8, 128, 128, 1, 3, 1, true, true},
                        {8, 8, 128, 128, 3, 1, 1, true, true},   {14, 14, 64, 64, 3, 3, 1, true, true},
                        {13, 13, 64, 40, 3, 3, 2, true, true},   {14, 14, 400, 256, 1, 1, 2, true, true},
                        {18, 18, 64, 64, 3, 3, 1, false, false}, {7, 7, 16, 64, 3, 3, 1, true, true},
                        {7, 7, 128, 32, 3, 3, 1, true, false}, {14, 14, 400, 64, 1, 1, 2, true, true},
                        {17, 17, 64, 64, 3, 3, 1, true, true}};
  uint32_t seed = 91;
  for (const Case& c : cases)
    for (Stage stage : {Stage::kRelu6, Stage::kResidual}) {
      NativeConvShape s;
      s.in_h = c.h, s.in_w = c.w, s.in_c = c.in_c, s.out_c = c.out_c;
      s.kernel_h = c.kh, s.kernel_w = c.kw, s.stride_h = s.stride_w = c.stride;
      s.pad_top = c.kh / 2, s.pad_left = c.kw / 2;
      s.out_h = (c.h - 1) / c.stride + 1, s.out_w = (c.w - 1) / c.stride + 1;
      SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + " " + std::to_string(c.in_c) + "->" +
                   std::to_string(c.out_c) + " kernel " + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
                   " stride " + std::to_string(c.stride) + " stage " + std::to_string(int(stage)));
      const size_t k = size_t(c.kh) * c.kw * c.in_c;
      const size_t n = size_t(s.out_h) * s.out_w * s.out_c;
      const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
      seed += 4;
      const Epilogue e = epilogue_of(stage);
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      NativeIsa off_isa = avx512_isa(true);
      off_isa.small_image_im2col = false;
      NativeConv on(s, d.filter.data(), d.bias.data(), e, avx512_isa(true));
      NativeConv off(s, d.filter.data(), d.bias.data(), e, off_isa);
      ASSERT_TRUE(on.ok() && off.ok());
      // Only a k-blocked conv runs its rows once, and whether it is depends on L1 (7x7 16 -> 64,
      // k 144, is on a 32 KB L1 and not on a 48 KB one).
      const bool once = c.once && on.k_block() > 0, once_at_2 = c.once_at_2 && on.k_block() > 0;
      EXPECT_EQ(on.im2col_once(1), once);
      EXPECT_EQ(on.im2col_once(2), once_at_2);
      EXPECT_FALSE(off.im2col_once(1));
      if (once_at_2) {
        EXPECT_FALSE(on.splits_rows(2));
      }
      for (pthreadpool_t p : {pthreadpool_t(nullptr), pool}) {
        const std::vector<float> got = nn_test::run_native(on, d, e, n, p);
        const std::vector<float> base = nn_test::run_native(off, d, e, n, p);
        double worst = 0;
        for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
        EXPECT_LE(worst, 2e-5 * std::sqrt(double(k))) << (p ? "2 threads" : "1 thread");
        EXPECT_EQ(got, base) << (p ? "2 threads" : "1 thread") << ": not the bits of the tiles read in place";
      }
    }
  pthreadpool_destroy(pool);
}

TEST(NativeConvKBlocks, TheSmallImageIm2colSwitchNamesTheKernel) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  if (nn::cpu::l1d_bytes() > (size_t(64) << 10)) GTEST_SKIP() << "L1 too large for this shape to block";
  Built b;  // a 3x3 conv 128 -> 64 on 8x8 (k 1152: blocked)
  uint32_t x = b.input({1, 8, 8, 128});
  b.output(b.op(T::CONV_2D, {x, b.constant({64, 3, 3, 128}, 3), b.constant({64}, 4), b.i32(1), b.i32(1),
                             b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0), b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off;
  off.small_image_im2col = false;
  for (int threads : {1, 2}) {
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0", threads), "native conv AVX-512, k-blocked, im2col once");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0", threads), "native conv AVX-512, k-blocked");
  }
  nn_test::expect_cpu_matches_reference(b.model, {on, off});
}

// At one thread a k-blocked 1x1 conv whose input outgrows half of L2 runs its tiles row
// tile by row tile, each through every panel (NativeIsa::serial_row_tiles), on both
// kernels: against a direct conv in double and the same bits as panel-major (each tile is
// the same calls), 1 and 2 threads, on 575 rows (AVX-512: 8 64-row tiles and 63; AVX2: 11
// of 48 and 47) x 520 -> 200 (1.2 MB of input; panel tiles of 3 + 3 + 1 32-wide panels,
// the last with 8 valid columns; AVX2: 7 + 6 16-wide ones), 323 rows x 1100 -> 72 (1.4 MB;
// one panel per tile), and convs it leaves panel-major: 132 rows x 520 (0.3 MB: in L2),
// one panel (16 channels), one row tile (7x7 on AVX-512).
TEST(NativeConvKBlocks, OneThreadRunsEachRowTileThroughEveryPanel) {
  pthreadpool_t pool = pthreadpool_create(2);
  struct Case {
    uint32_t h, w, in_c, out_c;
    bool panels;  // more than one panel tile
  };
  const Case cases[] = {{23, 25, 520, 200, true}, {17, 19, 1100, 72, true}, {12, 11, 520, 200, true},
                        {10, 10, 700, 16, false}};
  size_t reordered = 0;
  uint32_t seed = 131;
  for (bool avx512 : {true, false}) {
    if (avx512 && !nn::cpu::native_avx512_enabled()) continue;
    for (const Case& c : cases)
      for (Stage stage : {Stage::kRelu6, Stage::kResidual}) {
        const NativeConvShape s = nn_test::same_conv_shape(c.h, c.w, c.in_c, c.out_c, 1, 1);
        SCOPED_TRACE(std::string(avx512 ? "AVX-512 " : "AVX2 ") + std::to_string(c.h) + "x" +
                     std::to_string(c.w) + " " + std::to_string(c.in_c) + "->" + std::to_string(c.out_c) +
                     " stage " + std::to_string(int(stage)));
        const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
        seed += 4;
        const Epilogue e = epilogue_of(stage);
        const std::vector<float> want = nn_test::direct_conv(s, d, e);
        NativeIsa on_isa = NativeIsa::with(avx512, 0, true), off_isa = on_isa;
        off_isa.serial_row_tiles = false;
        NativeConv on(s, d.filter.data(), d.bias.data(), e, on_isa);
        NativeConv off(s, d.filter.data(), d.bias.data(), e, off_isa);
        ASSERT_TRUE(on.ok() && off.ok());
        ASSERT_GT(on.k_block(), 0u);
        const bool large = size_t(c.h) * c.w * c.in_c * sizeof(float) > nn::cpu::l2_bytes() / 2;
        EXPECT_EQ(on.serial_row_tiles(1), c.panels && large);
        reordered += on.serial_row_tiles(1);
        EXPECT_FALSE(on.serial_row_tiles(2));  // a pool's threads take row tiles first anyway
        EXPECT_FALSE(off.serial_row_tiles(1));
        nn_test::expect_same_bits_as_without(on, off, d, e, want, c.in_c, pool);
      }
    // One row tile: every panel in one tile already.
    const NativeConvShape s = nn_test::same_conv_shape(7, 7, 600, 96, 1, 1);
    const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
    EXPECT_FALSE(NativeConv(s, d.filter.data(), d.bias.data(), Epilogue(), NativeIsa::with(avx512, 0, true))
                     .serial_row_tiles(1));
  }
  // Both large shapes reorder on an L2 of up to 2 MB.
  if (nn::cpu::l2_bytes() <= (size_t(2) << 20)) {
    EXPECT_GE(reordered, 2u * 2);
  }
  pthreadpool_destroy(pool);
}

// The switch names the order at one thread only (a pool's threads take row tiles first).
TEST(NativeConvKBlocks, TheSerialRowTilesSwitchNamesTheOrder) {
  if (nn::cpu::l2_bytes() > (size_t(2) << 20)) GTEST_SKIP() << "L2 too large for this input to outgrow half";
  Built b;  // 1x1 conv 520 -> 192 on 23x25 (k-blocked on either kernel, panels of whole columns; 1.2 MB of input)
  b.output(b.op(T::CONV_2D, {b.input({1, 23, 25, 520}), b.constant({192, 1, 1, 520}, 3), b.constant({192}, 4),
                             b.i32(0), b.i32(0), b.i32(0), b.i32(0), b.i32(1), b.i32(1), b.i32(0),
                             b.boolean(false)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  for (bool avx512 : {true, false}) {
    if (avx512 && !nn::cpu::native_avx512_enabled()) continue;
    nn::CpuOptions on, off;
    on.avx512 = off.avx512 = avx512;
    off.serial_row_tiles = false;
    const std::string isa = avx512 ? "AVX-512" : "AVX2";
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0"), "native conv " + isa + ", k-blocked, row tiles outer");
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "native conv " + isa + ", k-blocked");
    if (nn::usable_cores() >= 2) {
      EXPECT_EQ(nn_test::cpu_kernel_of(b.model, on, "op 0", 2).find("row tiles outer"), std::string::npos);
    }
    nn_test::expect_cpu_matches_reference(b.model, {on, off});
  }
}

}  // namespace
