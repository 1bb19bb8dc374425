// NativeGroupedConv (AVX-512 grouped convs of <= 16 output channels per group, two groups per
// micro-kernel call) against a direct grouped convolution in double: 2-25 groups (odd
// counts leave a lone last group), 1-24 input and 1-16 output channels per group (not
// multiples of 16 too), 1x1 / 3x3 / 3x2 kernels, stride 1 and 2, padding, every epilogue
// stage, 1 and 2 threads (same bits); and the CPU delegate's choice: which grouped convs it
// takes on AVX-512, NN_NO_GROUPED_PAIRS' switch, and AVX2 unchanged.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "delegates/cpu/native_grouped_conv.h"
#include "delegates/cpu/native_kernels.h"
#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeGroupedConv;
using nn::cpu::NativeIsa;
using T = nn::OperationType;
using Built = nn_test::TestModel;

using Case = nn_test::GroupedConvCase;
using nn_test::describe;

std::vector<Case> cases() {
  // {group_in, group_out}: RegNet's 16 -> 16 (the unrolled kernel), 8, 24 -> 16, odd ones,
  // a single input channel.
  const uint32_t per_group[][2] = {{16, 16}, {8, 8}, {24, 16}, {13, 11}, {1, 8}, {16, 5}};
  const uint32_t groups[] = {2, 3, 5, 25, 7};
  // {kh, kw, stride, pad}: 3x3 SAME, 3x3 stride 2, 1x1, 1x1 stride 2, 3x2 with padding past
  // the kernel's reach (tiles wholly in the padding).
  const uint32_t kernels[][4] = {{3, 3, 1, 1}, {3, 3, 2, 1}, {1, 1, 1, 0}, {1, 1, 2, 0}, {3, 2, 1, 2}};
  const uint32_t sizes[][2] = {{7, 7}, {14, 14}, {5, 11}, {23, 29}, {9, 13}};
  std::vector<Case> v;
  size_t k = 0;
  for (const auto& pg : per_group)
    for (const auto& kn : kernels)
      for (int rep = 0; rep < 2; ++rep, ++k) {
        const auto& hw = sizes[(k + rep) % 5];
        v.push_back({groups[k % 5], pg[0], pg[1], hw[0], hw[1], kn[0], kn[1], kn[2], kn[3], int(k % 5)});
      }
  v.push_back({25, 16, 16, 7, 7, 3, 3, 1, 1, 3});    // RegNet's 7x7 stage
  v.push_back({2, 16, 16, 56, 56, 3, 3, 2, 1, 1});   // its first, stride 2
  v.push_back({10, 16, 16, 28, 28, 3, 3, 2, 1, 1});  // its 14x14 stage's first
  return v;
}

TEST(NativeGroupedPairs, MatchesTheDirectConvOnOddShapes) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  pthreadpool_t pool = pthreadpool_create(2);
  uint32_t seed = 5;
  double worst = 0;
  for (const Case& c : cases()) {
    const NativeConvShape s = nn_test::grouped_shape_of(c);
    ASSERT_TRUE(NativeGroupedConv::supports(s, NativeIsa::best())) << describe(c);
    const nn_test::NativeConvData d = nn_test::random_conv_data(s, seed += 7);
    const Epilogue e = nn_test::grouped_epilogue_of(c.stage);
    const NativeGroupedConv op(s, d.filter.data(), d.bias.data(), e);
    ASSERT_TRUE(op.ok()) << describe(c);
    const std::vector<float> want = nn_test::direct_conv(s, d, e);
    worst = std::max(worst, nn_test::expect_matches_at_1_and_2_threads(op, d, e, want, pool, describe(c)));
  }
  std::printf("grouped pairs: %zu shapes, worst relative error %.2e\n", cases().size(), worst);
  pthreadpool_destroy(pool);
}

TEST(NativeGroupedPairs, SupportsOnlyWhatItRuns) {
  NativeConvShape s = nn_test::grouped_shape_of({4, 16, 16, 14, 14, 3, 3, 1, 1, 0});
  const NativeIsa avx2 = NativeIsa::with(false, 0, true);
  EXPECT_FALSE(NativeGroupedConv::supports(s, avx2));  // AVX2: NativeConv's grouped form
  if (!nn::cpu::native_avx512_enabled()) return;
  const NativeIsa avx512 = NativeIsa::best();
  EXPECT_TRUE(NativeGroupedConv::supports(s, avx512));
  NativeConvShape wide = s;  // 17 output channels per group: more than one zmm
  wide.out_c = 4 * 17;
  EXPECT_FALSE(NativeGroupedConv::supports(wide, avx512));
  NativeConvShape uneven = s;  // 65 input channels do not split in 4
  uneven.in_c = 65;
  EXPECT_FALSE(NativeGroupedConv::supports(uneven, avx512));
  NativeConvShape dense = s;
  dense.groups = 1;
  EXPECT_FALSE(NativeGroupedConv::supports(dense, avx512));
  NativeConvShape dilated = s;
  dilated.dilation_h = dilated.dilation_w = 2;
  EXPECT_FALSE(NativeGroupedConv::supports(dilated, avx512));
}

// --- The CPU delegate's choice ---

// GROUPED_CONV_2D, SAME-like explicit padding, NHWC.
uint32_t grouped(Built& b, uint32_t x, uint32_t in_c, uint32_t out_c, uint32_t groups, uint32_t k, uint32_t stride,
                 uint32_t seed, int32_t fuse = 0) {
  const uint32_t pad = k / 2;
  uint32_t w = b.constant({out_c, k, k, in_c / groups}, seed), bias = b.constant({out_c}, seed + 1);
  return b.op(T::GROUPED_CONV_2D, {x, w, bias, b.i32(pad), b.i32(pad), b.i32(pad), b.i32(pad), b.i32(stride),
                                   b.i32(stride), b.i32(groups), b.i32(fuse), b.boolean(false)});
}

double error_vs_reference(Built& b, const nn::CpuOptions& cpu, int threads) {
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.cpu = cpu;
  o.threads = threads;
  return nn_test::compare_with_reference(b.model, o).max_rel_error;
}

TEST(NativeGroupedPairs, TakesRegNetsGroupsOnAvx512AndMatchesTheReference) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  for (uint32_t stride : {1u, 2u}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    Built b;  // a RegNet block's grouped conv + RELU, then its skip: 5 groups of 16 on 15x13
    const uint32_t x = b.input({1, 15, 13, 80});
    const uint32_t y = grouped(b, x, 80, 80, 5, 3, stride, 71, 1);
    if (stride == 1)
      b.output(b.op(T::ADD, {y, x, b.i32(1)}));
    else
      b.output(y);
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0"), "native grouped conv AVX-512, group pairs");
    if (stride == 1) {
      EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 1"), "(no step op 1)");  // in its epilogue
    }
    for (int threads : {1, 2}) EXPECT_LE(error_vs_reference(b, {}, threads), 1e-4) << threads << " threads";
    nn::CpuOptions off;
    off.grouped_pairs = false;
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "xnnpack");
    nn::CpuOptions avx2;
    avx2.avx512 = false;
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, avx2, "op 0"), "native grouped conv AVX2");
  }
}

TEST(NativeGroupedPairs, LeavesNarrowAndWideGroupsToXnnpack) {
  if (!nn::cpu::native_avx512_enabled()) GTEST_SKIP() << "no AVX-512";
  {
    Built b;  // 4 output channels per group: a quarter of each vector
    b.output(grouped(b, b.input({1, 14, 14, 32}), 32, 16, 4, 3, 1, 73));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0"), "xnnpack");
  }
  {
    Built b;  // 24 output channels per group: more than one vector
    b.output(grouped(b, b.input({1, 14, 14, 48}), 48, 48, 2, 3, 1, 75));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0"), "xnnpack");
  }
  {
    Built b;  // 8 per group: taken
    b.output(grouped(b, b.input({1, 14, 14, 24}), 24, 24, 3, 3, 1, 77));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0"), "native grouped conv AVX-512, group pairs");
    for (int threads : {1, 2}) EXPECT_LE(error_vs_reference(b, {}, threads), 1e-4) << threads << " threads";
  }
}

}  // namespace
