// NativeConv's grouped form (NativeConvShape::groups: each group's channels read as per-tap
// runs) against a direct grouped convolution in double: groups 2-5, odd channel counts per
// group, 1x1 / 3x3 / 3x2 kernels, stride 1 and 2, padding wider than the kernel's reach,
// every epilogue stage, 1 and 2 threads (same bits), AVX2 and AVX-512; and the CPU
// delegate's rule (grouped_conv_pays): where it runs GROUPED_CONV_2D natively, where not,
// and that the fusions built for dense convs leave it alone.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <cstring>
#include <limits>
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

using Case = nn_test::GroupedConvCase;
using nn_test::describe;

std::vector<Case> cases() {
  const uint32_t per_group[][2] = {{1, 1}, {3, 5}, {8, 8}, {13, 20}, {16, 16}, {17, 33}};
  const uint32_t groups[] = {2, 3, 4, 5};
  // {kh, kw, stride, pad}: pointwise; 1x1 stride 2; 3x3 SAME; 3x3 stride 2; 3x2 with padding
  // beyond the kernel's reach on the left (tiles wholly in the padding).
  const uint32_t kernels[][4] = {{1, 1, 1, 0}, {1, 1, 2, 0}, {3, 3, 1, 1}, {3, 3, 2, 1}, {3, 2, 1, 2}};
  const uint32_t sizes[][2] = {{5, 7}, {9, 13}, {14, 14}, {23, 29}};
  std::vector<Case> v;
  size_t k = 0;
  for (const auto& pg : per_group)
    for (const auto& kn : kernels) {
      // Each per-group shape and kernel meets two group counts, sizes and stages in turn.
      for (int rep = 0; rep < 2; ++rep, ++k) {
        const auto& hw = sizes[k % 4];
        v.push_back({groups[k % 4], pg[0], pg[1], hw[0], hw[1], kn[0], kn[1], kn[2], kn[3], int(k % 5)});
      }
    }
  v.push_back({25, 16, 16, 14, 14, 3, 3, 1, 1, 3});  // RegNet's 400-channel stage
  v.push_back({2, 16, 16, 56, 56, 3, 3, 2, 1, 1});    // and its first, stride 2
  // Its 7x7 stage: at 2 threads the panels split, several groups per tile, whose im2col rows
  // hold only those groups' channels.
  v.push_back({25, 16, 16, 7, 7, 3, 3, 1, 1, 3});
  // Groups in tiles of as many as keep a row tile's im2col rows within a quarter of L2: 13
  // groups of 16 (tiles of unequal groups), 11 groups of 24 (two panels per group), strided.
  v.push_back({13, 16, 16, 7, 9, 3, 3, 1, 1, 1});
  v.push_back({11, 24, 24, 9, 7, 3, 3, 2, 1, 2});
  return v;
}

std::vector<NativeIsa> isas() {
  std::vector<NativeIsa> v = {NativeIsa::with(false, 0, true)};
  if (nn::cpu::native_avx512_enabled()) v.push_back(NativeIsa::with(true, -1, true));
  return v;
}

TEST(NativeGroupedConv, MatchesTheDirectConvOnOddShapes) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  pthreadpool_t pool = pthreadpool_create(2);
  for (const NativeIsa& isa : isas()) {
    uint32_t seed = 3;
    double worst = 0;
    for (const Case& c : cases()) {
      const NativeConvShape s = nn_test::grouped_shape_of(c);
      const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed += 7);
      const Epilogue e = nn_test::grouped_epilogue_of(c.stage);
      const NativeConv op(s, d.filter.data(), d.bias.data(), e, isa);
      ASSERT_TRUE(op.ok()) << describe(c);
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      const std::string what = describe(c) + (isa.avx512 ? " AVX-512" : " AVX2");
      worst = std::max(worst, nn_test::expect_matches_at_1_and_2_threads(op, d, e, want, pool, what));
    }
    std::printf("grouped conv %s: worst relative error %.2e\n", isa.avx512 ? "AVX-512" : "AVX2", worst);
  }
  pthreadpool_destroy(pool);
}

TEST(NativeGroupedConv, RefusesChannelsThatDoNotSplit) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  NativeConvShape s = nn_test::grouped_shape_of({3, 4, 4, 6, 6, 3, 3, 1, 1, 0});
  s.out_c = 13;  // not a multiple of 3
  const std::vector<float> filter(size_t(13) * 9 * 4, 0.5f);
  EXPECT_FALSE(NativeConv(s, filter.data(), nullptr, Epilogue{}).ok());
}

// --- The CPU delegate's choice ---

std::string kernel_of(Built& b, const nn::CpuOptions& cpu, const std::string& op) {
  return nn_test::cpu_kernel_of(b.model, cpu, op);
}

double error_vs_reference(Built& b, const nn::CpuOptions& cpu, int threads) {
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.cpu = cpu;
  o.threads = threads;
  return nn_test::compare_with_reference(b.model, o).max_rel_error;
}

// GROUPED_CONV_2D, explicit padding, NHWC: groups of in_c / groups channels, k x k.
uint32_t grouped(Built& b, uint32_t x, uint32_t in_c, uint32_t out_c, uint32_t groups, uint32_t k, uint32_t stride,
                 uint32_t seed, int32_t fuse = 0) {
  const uint32_t pad = k / 2;
  uint32_t w = b.constant({out_c, k, k, in_c / groups}, seed), bias = b.constant({out_c}, seed + 1);
  return b.op(T::GROUPED_CONV_2D, {x, w, bias, b.i32(pad), b.i32(pad), b.i32(pad), b.i32(pad), b.i32(stride),
                                   b.i32(stride), b.i32(groups), b.i32(fuse), b.boolean(false)});
}

nn::CpuOptions avx2() {
  nn::CpuOptions o;
  o.avx512 = false;
  return o;
}

TEST(NativeGroupedConv, RunsNativeOnAvx2AndMatchesTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  for (uint32_t stride : {1u, 2u}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    Built b;  // 5 groups of 7 -> 9 channels, RELU6 in the op, 17x19
    b.output(grouped(b, b.input({1, 17, 19, 35}), 35, 45, 5, 3, stride, 31, 3));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "native grouped conv AVX2");
    for (int threads : {1, 2}) EXPECT_LE(error_vs_reference(b, avx2(), threads), 1e-4) << threads << " threads";
    nn::CpuOptions off = avx2();
    off.native_grouped_conv = false;
    EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
    EXPECT_LE(error_vs_reference(b, off, 1), 1e-4);
  }
}

TEST(NativeGroupedConv, TakesTheResidualAddInItsEpilogue) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  Built b;  // a RegNet block's tail: grouped 3x3 conv (+RELU) + the skip, 4 groups of 16
  const uint32_t x = b.input({1, 12, 13, 64});
  const uint32_t y = grouped(b, x, 64, 64, 4, 3, 1, 41, 1);
  b.output(b.op(T::ADD, {y, x, b.i32(1)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "native grouped conv AVX2");
  EXPECT_EQ(kernel_of(b, avx2(), "op 1"), "(no step op 1)");  // absorbed by op 0's epilogue
  for (int threads : {1, 2}) EXPECT_LE(error_vs_reference(b, avx2(), threads), 1e-4);
}

TEST(NativeGroupedConv, DropsTapsThatReadOnlyPadding) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  Built b;  // one input row: a 3x3 window's top and bottom rows read only padding
  b.output(grouped(b, b.input({1, 1, 17, 32}), 32, 24, 4, 3, 1, 45));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  // 4 groups of 6 output channels: each group's panel has 6 valid columns (the 8x8 kernel).
  EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "native grouped conv AVX2, 8-column last panel, 1x3 live taps");
  for (int threads : {1, 2}) EXPECT_LE(error_vs_reference(b, avx2(), threads), 1e-4) << threads << " threads";
}

TEST(NativeGroupedConv, LeftToXnnpackWhereTheRuleSaysSo) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  {
    Built b;  // 25 taps: more runs than the kernel takes
    b.output(grouped(b, b.input({1, 11, 11, 16}), 16, 16, 2, 5, 1, 51));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "xnnpack");
  }
  {
    Built b;  // 2 x 2 output pixels: less than a micro-tile
    b.output(grouped(b, b.input({1, 2, 2, 16}), 16, 16, 2, 3, 1, 53));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "xnnpack");
  }
  if (nn::cpu::native_avx512_enabled()) {
    Built b;  // AVX-512: XNNPACK's grouped GEMMs beat NativeConv's there (measured on RegNet)
    b.output(grouped(b, b.input({1, 14, 14, 64}), 64, 64, 4, 3, 1, 55));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    nn::CpuOptions no_pairs;  // NativeGroupedConv's (native_grouped_pairs_test.cpp) turned off
    no_pairs.grouped_pairs = false;
    EXPECT_EQ(kernel_of(b, no_pairs, "op 0"), "xnnpack");
  }
}

TEST(NativeGroupedConv, DenseConvFusionsLeaveItAlone) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  // A grouped 1x1 conv feeding a depthwise conv on a large map: a dense conv there would run
  // with the depthwise (native conv+depthwise); the grouped one stays its own step.
  Built b;
  const uint32_t x = b.input({1, 112, 112, 32});
  const uint32_t y = grouped(b, x, 32, 96, 2, 1, 1, 61, 3);
  uint32_t w = b.constant({1, 3, 3, 96}, 63), bias = b.constant({96}, 64);
  b.output(b.op(T::DEPTHWISE_CONV_2D, {y, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  EXPECT_EQ(kernel_of(b, avx2(), "op 0"), "native grouped conv AVX2");
  EXPECT_EQ(kernel_of(b, avx2(), "op 1").rfind("native depthwise AVX2", 0), 0u) << kernel_of(b, avx2(), "op 1");
  EXPECT_LE(error_vs_reference(b, avx2(), 2), 1e-4);
  // The same with one group, a CONV_2D: it does fuse (else the above proves nothing).
  Built dense;
  const uint32_t dx = dense.input({1, 112, 112, 32});
  uint32_t cw = dense.constant({96, 1, 1, 32}, 61), cb = dense.constant({96}, 62);
  const uint32_t dy = dense.op(T::CONV_2D, {dx, cw, cb, dense.i32(0), dense.i32(0), dense.i32(0), dense.i32(0),
                                            dense.i32(1), dense.i32(1), dense.i32(3)});
  uint32_t dw = dense.constant({1, 3, 3, 96}, 63), db = dense.constant({96}, 64);
  dense.output(dense.op(T::DEPTHWISE_CONV_2D,
                        {dy, dw, db, dense.i32(1), dense.i32(1), dense.i32(1), dense.i32(1), dense.i32(3)}));
  ASSERT_TRUE(dense.model->validate_and_infer_shapes().is_ok());
  EXPECT_EQ(kernel_of(dense, avx2(), "op 0").rfind("native conv+depthwise AVX2", 0), 0u)
      << kernel_of(dense, avx2(), "op 0");
}

}  // namespace
