// The AVX2 forms of NativeDepthwise's row pairs (tap row by tap row, the 3x3 tap rows
// unrolled, 16 channels at constant offsets) and of NativeAddMean (16 channels a pass).
// Row pairs against the conv in double and bit for bit against the same conv a row at a
// time, on channel counts that take every form (8, 13 with a masked tail, 16, 24, 40),
// widths that leave partial column groups, 3x3 / 5x5 / 3x5 / 5x3 windows, SAME and VALID
// padding, every epilogue stage, 2 images, 1 and 2 threads. The ADD-mean against the sums
// in double and bit for bit against its AVX-512 form (same order of additions per channel)
// on its whole 8-channel blocks.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <string>
#include <vector>

#include "native_conv_test_util.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeAddMean;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeDepthwise;
using nn::cpu::NativeIsa;

struct Case {
  uint32_t h, w, kh, kw, pad_top, pad_left, pad_bottom, pad_right;
};

NativeConvShape shape_of(const Case& c, uint32_t channels) {
  NativeConvShape s;
  s.batch = 2;
  s.in_h = c.h, s.in_w = c.w, s.in_c = s.out_c = s.groups = channels;
  s.kernel_h = c.kh, s.kernel_w = c.kw;
  s.pad_top = c.pad_top, s.pad_left = c.pad_left;
  s.out_h = c.h + c.pad_top + c.pad_bottom - c.kh + 1;
  s.out_w = c.w + c.pad_left + c.pad_right - c.kw + 1;
  return s;
}

// AVX2 (the AVX-512 kernels off), row pairs on or off.
NativeIsa avx2(bool two_rows) {
  return NativeIsa::with(false, 0, two_rows);
}

TEST(NativeDepthwiseAvx2Rows, RowPairsMatchTheConvAndOneRowAtATime) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  const Case cases[] = {
      {9, 37, 3, 3, 1, 1, 1, 1},  // inner groups of 8, one of 4, edge groups and single pixels
      {8, 30, 3, 3, 1, 1, 1, 1},  {7, 13, 3, 3, 1, 1, 1, 1}, {6, 6, 3, 3, 1, 1, 1, 1},
      {6, 3, 3, 3, 1, 1, 1, 1},   {5, 1, 3, 3, 1, 1, 1, 1},  {8, 23, 3, 3, 0, 0, 0, 0},
      {10, 21, 5, 5, 2, 2, 2, 2}, {7, 9, 5, 5, 2, 2, 2, 2},  {9, 19, 3, 5, 1, 2, 1, 2},
      {9, 22, 5, 3, 2, 1, 2, 1},  {6, 17, 3, 3, 0, 1, 2, 1},
  };
  const uint32_t channels[] = {8, 13, 16, 24, 40};
  uint32_t seed = 907;
  for (const Case& c : cases)
    for (uint32_t ch : channels)
      for (int stage = 0; stage < 5; ++stage) {
        const NativeConvShape s = shape_of(c, ch);
        Epilogue e = stage < 4 ? nn_test::epilogue_of(nn_test::Stage(stage)) : Epilogue{};
        if (stage == 4) e.swish = true;
        SCOPED_TRACE(std::to_string(c.h) + "x" + std::to_string(c.w) + "x" + std::to_string(ch) + " kernel " +
                     std::to_string(c.kh) + "x" + std::to_string(c.kw) + " pads " +
                     std::to_string(c.pad_top) + "," + std::to_string(c.pad_left) + "," +
                     std::to_string(c.pad_bottom) + "," + std::to_string(c.pad_right) + " stage " +
                     std::to_string(stage));
        const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed);
        seed += 4;
        const std::vector<float> filter = nn_test::depthwise_filter(s, d);
        const size_t taps = size_t(s.kernel_h) * s.kernel_w;
        const std::vector<float> want = nn_test::direct_conv(s, d, e);
        NativeDepthwise pairs(s, filter.data(), d.bias.data(), e, avx2(true));
        NativeDepthwise rows(s, filter.data(), d.bias.data(), e, avx2(false));
        ASSERT_TRUE(pairs.ok() && rows.ok());
        ASSERT_TRUE(pairs.row_pairs());
        ASSERT_FALSE(rows.row_pairs());
        if (stage < 4 || ch % 8 == 0) {
          nn_test::expect_same_bits_as_without(pairs, rows, d, e, want, taps, pool);
        } else {
          // Swish runs over both rows of a pair at once, so where a row's length is not a
          // multiple of 8 its last floats take the vector exp instead of the scalar tail's.
          nn_test::expect_matches_at_1_and_2_threads(pairs, d, e, want, pool, "swish");
        }
      }
  pthreadpool_destroy(pool);
}

std::vector<float> run_add_mean(const NativeAddMean& op, const std::vector<float>& a,
                                const std::vector<float>& b, size_t n, pthreadpool_t pool) {
  std::vector<float> out(n + 16, -7.f);
  auto scratch = nn::cpu::allocate_floats(op.scratch_bytes() / sizeof(float) + 16);
  nn::cpu::NativeArgs args;
  args.input = a.data();
  args.residual = b.data();
  args.output = out.data();
  args.scratch = scratch.get();
  args.pool = pool;
  op.run(args);
  for (size_t i = n; i < n + 16; ++i) EXPECT_EQ(out[i], -7.f) << "wrote past the output";
  out.resize(n);
  return out;
}

TEST(NativeDepthwiseAvx2Rows, AddMeanMatchesTheSumsAndItsAvx512Form) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  const uint32_t channels[] = {8, 13, 16, 24, 40, 127};
  const uint32_t widths[] = {1, 6, 9};  // odd and even pixel counts per row
  uint32_t seed = 31;
  for (uint32_t c : channels)
    for (uint32_t w : widths)
      for (bool clamp : {false, true}) {
        SCOPED_TRACE(std::to_string(c) + " channels, rows of " + std::to_string(w) +
                     (clamp ? ", clamped" : ""));
        nn::cpu::NativeAddMeanShape s;
        s.batch = 2, s.rows = 5, s.row_pixels = w, s.channels = c;
        if (clamp) s.lo = 0.f, s.hi = 1.f;
        const size_t n = size_t(s.batch) * s.rows * w * c;
        const auto a = nn_test::random_floats(n, seed), b = nn_test::random_floats(n, seed + 1);
        seed += 2;
        NativeAddMean op(s, avx2(true));
        ASSERT_TRUE(op.ok());
        const auto one = run_add_mean(op, a, b, size_t(s.batch) * c, nullptr);
        const auto two = run_add_mean(op, a, b, size_t(s.batch) * c, pool);
        EXPECT_EQ(one, two) << "2 threads differ from 1";
        for (uint32_t i = 0; i < s.batch; ++i)
          for (uint32_t ch = 0; ch < c; ++ch) {
            double sum = 0;
            for (size_t p = 0; p < size_t(s.rows) * w; ++p) {
              const size_t at = (size_t(i) * s.rows * w + p) * c + ch;
              sum += std::min(std::max(double(a[at]) + b[at], double(s.lo)), double(s.hi));
            }
            EXPECT_NEAR(one[i * c + ch], sum / (size_t(s.rows) * w), 1e-5)
                << "image " << i << " channel " << ch;
          }
        if (nn::cpu::native_avx512_enabled()) {
          // The channels of whole 8-lane blocks (AVX2 sums its last c % 8 one at a time).
          NativeAddMean wide(s, NativeIsa::with(true, 0, true));
          const auto other = run_add_mean(wide, a, b, size_t(s.batch) * c, nullptr);
          for (uint32_t i = 0; i < s.batch; ++i)
            for (uint32_t ch = 0; ch < c / 8 * 8; ++ch)
              EXPECT_EQ(one[i * c + ch], other[i * c + ch]) << "not the AVX-512 form's bits, channel " << ch;
        }
      }
  pthreadpool_destroy(pool);
}

}  // namespace
