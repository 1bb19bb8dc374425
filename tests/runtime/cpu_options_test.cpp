// Each CpuOptions switch changes the kernel it names, as --explain and --profile show it
// (Session::kernels()), and both choices give the reference kernels' numbers.
#include <gtest/gtest.h>

#include <string>

#include "runtime_test_util.h"
#include "test_model.h"

namespace {

using nn::CpuOptions;
using T = nn::OperationType;
using Built = nn_test::TestModel;

bool has_avx512() {
  return __builtin_cpu_supports("avx512f");
}

// Options `on` (the defaults) and `off` (`turn_off` applied), on AVX-512 where the CPU has it
// and on the AVX2 kernels: check(on, off) for each.
template <class TurnOff, class Check>
void on_both_isas(TurnOff turn_off, Check check) {
  for (bool avx512 : {true, false}) {
    if (avx512 && !has_avx512()) continue;
    SCOPED_TRACE(avx512 ? "AVX-512" : "AVX2");
    CpuOptions on, off;
    on.avx512 = off.avx512 = avx512;
    turn_off(off);
    check(on, off);
  }
}

// The kernel Session::kernels() names for the step whose label starts with `op` ("op 0 CONV_2D").
std::string kernel_of(Built& b, const CpuOptions& cpu, const std::string& op) {
  return nn_test::cpu_kernel_of(b.model, cpu, op);
}

// Whether both settings match the reference kernels.
void expect_both_exact(Built& b, const CpuOptions& off) {
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  EXPECT_LE(nn_test::compare_with_reference(b.model, o).max_rel_error, 1e-4);
  o.cpu = off;
  EXPECT_LE(nn_test::compare_with_reference(b.model, o).max_rel_error, 1e-4);
}

void validate(Built& b) {
  nn::Status v = b.model->validate_and_infer_shapes();
  ASSERT_TRUE(v.is_ok()) << v.to_string();
}

uint32_t conv(Built& b, uint32_t x, uint32_t in_c, uint32_t out_c, uint32_t k, uint32_t seed) {
  uint32_t w = b.constant({out_c, k, k, in_c}, seed), bias = b.constant({out_c}, seed + 1);
  return b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
}

uint32_t depthwise(Built& b, uint32_t x, uint32_t c, uint32_t seed, uint32_t k = 3) {
  uint32_t w = b.constant({1, k, k, c}, seed), bias = b.constant({c}, seed + 1);
  return b.op(T::DEPTHWISE_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
}

TEST(CpuOptions, NativeKernelsOffLeavesConvsToXnnpack) {
  // 8 input channels: the implicit-GEMM conv (winograd_pays wants 16; native_winograd_test has that one).
  Built b;
  b.output(conv(b, b.input({1, 9, 11, 8}), 8, 24, 3, 1));
  validate(b);
  CpuOptions off;
  off.native_kernels = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native conv", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
  expect_both_exact(b, off);
}

TEST(CpuOptions, NativeDataOpsOffLeavesCopiesToTheReference) {
  Built b;
  uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 3});
  b.output(b.op(T::CONCATENATION, {x, y, b.i32(3)}));
  validate(b);
  CpuOptions off;
  off.native_data_ops = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0"), "native concat");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "reference");
  expect_both_exact(b, off);
}

TEST(CpuOptions, Avx512OffPicksTheAvx2Kernels) {
  Built b;
  b.output(conv(b, b.input({1, 9, 11, 16}), 16, 24, 3, 3));
  validate(b);
  CpuOptions off;
  off.avx512 = false;
  const std::string on = kernel_of(b, {}, "op 0");
  EXPECT_NE(on.find(has_avx512() ? "AVX-512" : "AVX2"), std::string::npos) << on;
  EXPECT_NE(kernel_of(b, off, "op 0").find("AVX2"), std::string::npos) << kernel_of(b, off, "op 0");
  expect_both_exact(b, off);
}

TEST(CpuOptions, HalfWidthForcesTheYmmLastPanel) {
  if (!has_avx512() || !__builtin_cpu_supports("avx512vl")) GTEST_SKIP() << "no AVX-512VL";
  Built b;  // 40 output channels: a 32-wide panel, then 8 columns
  b.output(conv(b, b.input({1, 6, 9, 8}), 8, 40, 1, 5));
  validate(b);
  CpuOptions on, off;
  on.avx512_half_width = CpuOptions::HalfWidth::kOn;
  off.avx512_half_width = CpuOptions::HalfWidth::kOff;
  EXPECT_NE(kernel_of(b, on, "op 0").find("ymm last panel"), std::string::npos) << kernel_of(b, on, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0").find("ymm"), std::string::npos) << kernel_of(b, off, "op 0");
  expect_both_exact(b, off);
  expect_both_exact(b, on);
}

TEST(CpuOptions, NativeFullyConnectedOffLeavesItToXnnpack) {
  Built b;  // 5 x 7 rows of 24 (an MLP over every pixel) -> 40 units, RELU
  uint32_t x = b.input({1, 5, 7, 24});
  b.output(b.op(T::FULLY_CONNECTED, {x, b.constant({40, 24}, 23), b.constant({40}, 24), b.i32(1)}));
  validate(b);
  CpuOptions off;
  off.native_fully_connected = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native fully connected", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
  expect_both_exact(b, off);
}

TEST(CpuOptions, OneRowFullyConnectedStaysOnXnnpack) {
  Built b;  // a classifier's single row is a matrix-vector product
  uint32_t x = b.input({1, 24});
  b.output(b.op(T::FULLY_CONNECTED, {x, b.constant({40, 24}, 25), b.constant({40}, 26), b.i32(0)}));
  validate(b);
  EXPECT_EQ(kernel_of(b, {}, "op 0"), "xnnpack");
}

TEST(CpuOptions, TwoRowsOffRunsDepthwiseRowByRow) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no native kernels";
  Built b;
  b.output(depthwise(b, b.input({1, 14, 17, 40}), 40, 7));  // 17 wide: native on AVX2 too
  validate(b);
  // On AVX-512 (where the CPU has it) and on the AVX2 kernels.
  on_both_isas([](CpuOptions& off) { off.depthwise_two_rows = false; },
               [&](const CpuOptions& on, const CpuOptions& off) {
                 EXPECT_NE(kernel_of(b, on, "op 0").find("row pairs"), std::string::npos) << kernel_of(b, on, "op 0");
                 EXPECT_EQ(kernel_of(b, off, "op 0").find("row pairs"), std::string::npos)
                     << kernel_of(b, off, "op 0");
                 expect_both_exact(b, off);
                 expect_both_exact(b, on);
               });
}

TEST(CpuOptions, ConvBeforeResizeOffKeepsTheirOrder) {
  Built b;
  uint32_t x = b.input({1, 8, 10, 16});
  uint32_t up = b.op(T::RESIZE_BILINEAR, {x, b.i32(20), b.i32(16), b.boolean(false), b.boolean(false),
                                          b.boolean(true)});
  b.output(conv(b, up, 16, 8, 1, 9));
  validate(b);
  CpuOptions off;
  off.conv_before_resize = false;
  EXPECT_EQ(kernel_of(b, {}, "op 1").rfind("native conv+resize", 0), 0u) << kernel_of(b, {}, "op 1");
  EXPECT_EQ(kernel_of(b, off, "op 0").rfind("native resize", 0), 0u) << kernel_of(b, off, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 1").rfind("native conv ", 0), 0u) << kernel_of(b, off, "op 1");
  expect_both_exact(b, off);
}

TEST(CpuOptions, AddMeanOffWritesTheSum) {
  Built b;
  uint32_t x = b.input({1, 6, 7, 24}), y = b.input({1, 6, 7, 24});
  uint32_t sum = b.op(T::ADD, {x, y, b.i32(0)});
  b.output(b.op(T::MEAN, {sum, b.ints({1, 2}), b.i32(1)}));
  validate(b);
  CpuOptions off;
  off.add_mean = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native add+mean", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
  expect_both_exact(b, off);
}

// A MEAN over height and width (no ADD before it) of 10+ rows and 256+ KB runs on the native
// row sums; off, on XNNPACK's global average pool. A MEAN over the channels keeps its own
// kernel either way, and a 7x7 image's global MEAN (250 KB) and a 14x14 one of 188 KB stay
// XNNPACK's.
TEST(CpuOptions, NativeMeanOffRunsXnnpacksPool) {
  Built b;
  uint32_t x = b.input({1, 29, 23, 100});  // 261 KB
  b.output(b.op(T::MEAN, {x, b.ints({1, 2}), b.i32(1)}));
  b.output(b.op(T::MEAN, {x, b.ints({3}), b.i32(1)}));
  b.output(b.op(T::MEAN, {b.input({1, 7, 7, 1280}), b.ints({1, 2}), b.i32(1)}));
  b.output(b.op(T::MEAN, {b.input({1, 14, 14, 240}), b.ints({1, 2}), b.i32(1)}));
  validate(b);
  CpuOptions off;
  off.native_mean = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native global mean", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
  EXPECT_EQ(kernel_of(b, {}, "op 1"), kernel_of(b, off, "op 1"));
  EXPECT_EQ(kernel_of(b, {}, "op 1").find("global"), std::string::npos) << kernel_of(b, {}, "op 1");
  EXPECT_EQ(kernel_of(b, {}, "op 2"), "xnnpack");
  EXPECT_EQ(kernel_of(b, {}, "op 3"), "xnnpack");
  expect_both_exact(b, off);
}

TEST(CpuOptions, SeFusionOffMultipliesBeforeTheConv) {
  Built b;
  uint32_t x = b.input({1, 6, 7, 16}), gate = b.input({1, 1, 1, 16});
  uint32_t scaled = b.op(T::MUL, {x, gate, b.i32(0)});
  b.output(conv(b, scaled, 16, 24, 1, 11));
  validate(b);
  CpuOptions off;
  off.se_fusion = false;
  EXPECT_EQ(kernel_of(b, {}, "op 1").rfind("native conv (gated input)", 0), 0u) << kernel_of(b, {}, "op 1");
  EXPECT_EQ(kernel_of(b, off, "op 0"), "xnnpack");
  EXPECT_EQ(kernel_of(b, off, "op 1").find("gated"), std::string::npos) << kernel_of(b, off, "op 1");
  expect_both_exact(b, off);
}

TEST(CpuOptions, ExpandDepthwiseOffRunsThemApart) {
  Built b;  // the 1x1 expansion's 48x48x96 output (884 KB) is worth keeping out of memory
  uint32_t e = conv(b, b.input({1, 48, 48, 16}), 16, 96, 1, 13);
  b.output(depthwise(b, e, 96, 15, 5));  // 5x5: native on AVX2 hosts too
  validate(b);
  CpuOptions off;
  off.expand_depthwise = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native conv+depthwise", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0").rfind("native conv ", 0), 0u) << kernel_of(b, off, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 1").rfind("native depthwise", 0), 0u) << kernel_of(b, off, "op 1");
  expect_both_exact(b, off);
}

TEST(CpuOptions, ExpandDepthwisePairsOffRunsItsRowsOneAtATime) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no native kernels";
  Built b;  // an inverted residual at stride 1: 48x48x96 between the convs
  uint32_t e = conv(b, b.input({1, 48, 48, 16}), 16, 96, 1, 41);
  b.output(conv(b, depthwise(b, e, 96, 43, 5), 96, 16, 1, 45));
  validate(b);
  on_both_isas([](CpuOptions& off) { off.expand_depthwise_pairs = false; },
               [&](const CpuOptions& on, const CpuOptions& off) {
                 const std::string fused = kernel_of(b, on, "op 0"), apart = kernel_of(b, off, "op 0");
                 EXPECT_EQ(fused.rfind("native conv+depthwise+conv", 0), 0u) << fused;
                 EXPECT_NE(fused.find("row pairs"), std::string::npos) << fused;
                 EXPECT_EQ(apart.rfind("native conv+depthwise+conv", 0), 0u) << apart;
                 EXPECT_EQ(apart.find("row pairs"), std::string::npos) << apart;
                 expect_both_exact(b, off);
                 expect_both_exact(b, on);
               });
}

TEST(CpuOptions, DepthwiseProjectOffRunsTheProjectionApart) {
  Built b;  // the depthwise's 48x48x96 output (884 KB) read by a 1x1 projection
  uint32_t e = conv(b, b.input({1, 48, 48, 16}), 16, 96, 1, 19);
  b.output(conv(b, depthwise(b, e, 96, 21, 5), 96, 16, 1, 23));
  validate(b);
  CpuOptions off;
  off.depthwise_project = false;
  EXPECT_EQ(kernel_of(b, {}, "op 0").rfind("native conv+depthwise+conv", 0), 0u) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0").rfind("native conv+depthwise ", 0), 0u) << kernel_of(b, off, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 2").rfind("native conv ", 0), 0u) << kernel_of(b, off, "op 2");
  expect_both_exact(b, off);
}

TEST(CpuOptions, SwishEpilogueOffRunsSigmoidAndProductApart) {
  Built b;
  uint32_t y = conv(b, b.input({1, 6, 7, 8}), 8, 24, 3, 17);  // the implicit-GEMM conv, as above
  b.output(b.op(T::MUL, {y, b.op(T::LOGISTIC, {y}), b.i32(0)}));
  validate(b);
  CpuOptions off;
  off.swish_epilogue = false;
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  auto fused = nn::Session::open(b.model, o);
  ASSERT_TRUE(fused.is_ok()) << fused.status().to_string();
  ASSERT_EQ((*fused)->kernels().size(), 1u);
  EXPECT_EQ((*fused)->kernels()[0].ops.size(), 3u);  // CONV_2D, LOGISTIC, MUL in one native op
  EXPECT_EQ(kernel_of(b, off, "op 1"), "xnnpack");
  EXPECT_EQ(kernel_of(b, off, "op 2"), "xnnpack");
  expect_both_exact(b, off);
}

TEST(CpuOptions, DropDeadTapsOffKeepsTheWholeKernel) {
  Built b;  // 3x3 at dilation 9 on 5x5: only the centre tap reads the image
  uint32_t x = b.input({1, 5, 5, 8});
  b.output(b.op(T::CONV_2D, {x, b.constant({16, 3, 3, 8}, 19), b.constant({16}, 20), b.i32(9), b.i32(9), b.i32(9),
                             b.i32(9), b.i32(1), b.i32(1), b.i32(0), b.boolean(false), b.i32(9), b.i32(9)}));
  validate(b);
  CpuOptions off;
  off.drop_dead_taps = false;
  EXPECT_NE(kernel_of(b, {}, "op 0").find("1x1 live taps"), std::string::npos) << kernel_of(b, {}, "op 0");
  EXPECT_EQ(kernel_of(b, off, "op 0").find("live taps"), std::string::npos) << kernel_of(b, off, "op 0");
  expect_both_exact(b, off);
}

// NHWC <-> NCHW transposes move 8 x 8 tiles through AVX2 registers; off, the 8-float blocks
// with scalar stores. Odd sizes leave tails in both dims (and one dim of fewer than 8 that
// takes no tile); both match the reference exactly, on 1 and 2 threads (large enough to split).
TEST(CpuOptions, TransposeTilesOffMovesScalars) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2";
  struct Case {
    std::vector<uint32_t> dims;
    std::vector<int32_t> perm;
    bool tiled;  // the input's contiguous dim (>= 8) lands second to last once dims merge
  };
  const std::vector<Case> cases = {
      {{1, 28, 28, 58}, {0, 3, 1, 2}, true},   // ShuffleNet's NHWC -> NCHW ([C][HW])
      {{2, 58, 13, 11}, {0, 2, 3, 1}, true},   // NCHW -> NHWC ([HW][C], HW contiguous)
      {{1, 37, 29, 13}, {0, 3, 1, 2}, true},
      {{3, 19, 5}, {0, 2, 1}, false},          // 5 contiguous floats: too few for a block
      {{3, 5, 19}, {0, 2, 1}, true},           // 5 output columns: tiles none, tails only
      {{2, 9, 61, 4}, {0, 2, 1, 3}, false}};   // the contiguous dim stays last
  for (const auto& [dims, perm, tiled] : cases) {
    Built b;
    b.output(b.op(T::TRANSPOSE, {b.input(dims), b.ints(perm)}));
    validate(b);
    CpuOptions off;
    off.transpose_tiles = false;
    EXPECT_EQ(kernel_of(b, {}, "op 0") == "native transpose AVX2 8x8", tiled) << kernel_of(b, {}, "op 0");
    EXPECT_EQ(kernel_of(b, off, "op 0"), "native transpose");
    expect_both_exact(b, off);
    nn::SessionOptions two;
    two.delegates = {"cpu"};
    two.threads = 2;
    EXPECT_EQ(nn_test::compare_with_reference(b.model, two).max_rel_error, 0.0);
  }
}

}  // namespace
