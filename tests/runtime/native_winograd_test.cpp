// NativeWinograd (delegates/cpu/native_winograd.h) against a direct convolution in double:
// odd channel counts and image sizes (ragged edge tiles), SAME and VALID padding, every
// epilogue stage, the residual, 1 and 2 threads (same bits), AVX-512 and AVX2, F(4x4) and
// F(2x2); and CpuOptions::winograd choosing it inside the CPU delegate.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "delegates/cpu/native_winograd.h"
#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeArgs;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeIsa;
using nn::cpu::NativeWinograd;

bool has_avx512() {
  return nn::cpu::native_avx512_enabled();
}

enum class Stage { kNone, kRelu, kRelu6, kHardSwish, kResidual, kResidualRelu, kSwish };
const char* stage_name(Stage s) {
  switch (s) {
    case Stage::kNone:
      return "none";
    case Stage::kRelu:
      return "relu";
    case Stage::kRelu6:
      return "relu6";
    case Stage::kHardSwish:
      return "hard_swish";
    case Stage::kResidual:
      return "residual";
    case Stage::kResidualRelu:
      return "residual+relu";
    case Stage::kSwish:
      return "swish";
  }
  return "?";
}

Epilogue epilogue_of(Stage s) {
  Epilogue e;
  if (s == Stage::kRelu) e.lo = 0.f;
  if (s == Stage::kRelu6 || s == Stage::kHardSwish) e.lo = 0.f, e.hi = 6.f;
  if (s == Stage::kHardSwish) e.lo = -1.f, e.hi = 1.f, e.hard_swish = true;
  if (s == Stage::kResidual || s == Stage::kResidualRelu) e.residual = true;
  if (s == Stage::kResidualRelu) e.lo = -0.5f, e.res_lo = 0.f;
  if (s == Stage::kSwish) e.swish = true;
  return e;
}

struct Case {
  uint32_t h, w, in_c, out_c;
  bool same;  // SAME (pad 1, output h x w) or VALID (input (h + 2) x (w + 2))
  Stage stage;
};

std::string describe(const Case& c) {
  return std::to_string(c.h) + "x" + std::to_string(c.w) + " " + std::to_string(c.in_c) + "->" +
         std::to_string(c.out_c) + (c.same ? " SAME " : " VALID ") + stage_name(c.stage);
}

NativeConvShape shape_of(const Case& c) {
  NativeConvShape s;
  s.batch = 2;  // tiles of one image never read the other's
  s.out_h = c.h, s.out_w = c.w, s.in_c = c.in_c, s.out_c = c.out_c;
  s.in_h = c.same ? c.h : c.h + 2, s.in_w = c.same ? c.w : c.w + 2;
  s.kernel_h = s.kernel_w = 3;
  s.pad_top = s.pad_left = c.same ? 1 : 0;
  return s;
}

using Data = nn_test::NativeConvData;

// max |got - want| / scale.
double relative_error(const std::vector<float>& got, const std::vector<float>& want, double scale) {
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
  return err / scale;
}

// The largest output of the conv before its epilogue (and the residual): what Winograd's
// rounding error is proportional to. A clamp to [0, 6] of sums of +-20 leaves outputs of
// at most 6 with the error of the sums.
double scale_of(const NativeConvShape& s, const Data& d, const Epilogue& e) {
  double scale = 1e-30;
  for (float v : nn_test::direct_conv(s, d, Epilogue{})) scale = std::max(scale, std::fabs(double(v)));
  if (e.residual)
    for (float v : d.residual) scale = std::max(scale, std::fabs(double(v)));
  return scale;
}

// Every case on one ISA and tile size: the error bound, and 2 threads giving 1 thread's bits.
// Returns the worst error seen.
double check_cases(const std::vector<Case>& cases, const NativeIsa& isa, uint32_t m, double bound) {
  pthreadpool_t pool = pthreadpool_create(2);
  double worst = 0;
  uint32_t seed = 11;
  for (const Case& c : cases) {
    const NativeConvShape s = shape_of(c);
    EXPECT_TRUE(NativeWinograd::supports(s));
    const Data d = nn_test::random_conv_data(s, seed += 5);
    const Epilogue e = epilogue_of(c.stage);
    const NativeWinograd op(s, d.filter.data(), d.bias.data(), e, 2, m, isa);
    EXPECT_TRUE(op.ok());
    EXPECT_EQ(op.output_tile(), m);
    const std::vector<float> want = nn_test::direct_conv(s, d, e);
    const std::vector<float> one = nn_test::run_native(op, d, e, want.size(), nullptr);
    const std::vector<float> two = nn_test::run_native(op, d, e, want.size(), pool);
    const double err = relative_error(one, want, scale_of(s, d, e));
    worst = std::max(worst, err);
    EXPECT_LE(err, bound) << describe(c) << (isa.avx512 ? " AVX-512" : " AVX2") << " F(" << m << "x" << m
                          << ")";
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
        << describe(c) << ": 2 threads differ from 1";
  }
  pthreadpool_destroy(pool);
  return worst;
}

std::vector<Case> odd_cases() {
  const uint32_t channels[] = {1, 13, 33, 130};
  const uint32_t sizes[][2] = {{1, 1}, {2, 3}, {4, 4}, {5, 7}, {9, 8}, {17, 23}};
  const Stage stages[] = {Stage::kNone,     Stage::kRelu,         Stage::kRelu6, Stage::kHardSwish,
                          Stage::kResidual, Stage::kResidualRelu, Stage::kSwish};
  std::vector<Case> cases;
  size_t k = 0;
  for (uint32_t in_c : channels)
    for (uint32_t out_c : channels)
      for (const auto& hw : sizes) {
        if (in_c * out_c > 33 * 130 && hw[0] * hw[1] > 100) continue;  // 130 -> 130 only on small images
        cases.push_back({hw[0], hw[1], in_c, out_c, k % 2 == 0, stages[k % 7]});
        ++k;
      }
  cases.push_back({17, 23, 130, 130, true, Stage::kResidualRelu});  // the largest, once
  return cases;
}

// Built for 2 slots, the blocks are cut to near-equal sizes, not whole micro-tiles (98
// tiles: 8 blocks of 13 or less, where 1 slot runs 16-tile blocks); every output keeps
// its bits.
void check_two_slot_blocks(const NativeIsa& isa, uint32_t m) {
  const Case c{26, 26, 64, 64, true, Stage::kResidualRelu};
  const NativeConvShape s = shape_of(c);
  const Data d = nn_test::random_conv_data(s, 91);
  const Epilogue e = epilogue_of(c.stage);
  const NativeWinograd one_slot(s, d.filter.data(), d.bias.data(), e, 1, m, isa);
  const NativeWinograd two_slots(s, d.filter.data(), d.bias.data(), e, 2, m, isa);
  ASSERT_TRUE(one_slot.ok() && two_slots.ok());
  pthreadpool_t pool = pthreadpool_create(2);
  const size_t n = size_t(s.batch) * s.out_h * s.out_w * s.out_c;
  const std::vector<float> one = nn_test::run_native(one_slot, d, e, n, nullptr), two = nn_test::run_native(two_slots, d, e, n, pool);
  pthreadpool_destroy(pool);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), n * sizeof(float)), 0)
      << describe(c) << (isa.avx512 ? " AVX-512" : " AVX2") << " F(" << m << "x" << m << ")";
  EXPECT_LE(relative_error(two, nn_test::direct_conv(s, d, e), scale_of(s, d, e)), 3e-5);
}

std::vector<NativeIsa> isas() {
  std::vector<NativeIsa> v = {NativeIsa::with(false, 0, true)};
  if (has_avx512()) v.push_back(NativeIsa::with(true, -1, true));
  return v;
}

TEST(NativeWinograd, F4MatchesTheDirectConvOnOddShapes) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  for (const NativeIsa& isa : isas()) {
    const double worst = check_cases(odd_cases(), isa, 4, 3e-5);  // measured 1.4e-5 (130 channels)
    std::printf("F(4x4,3x3) %s: worst relative error %.2e\n", isa.avx512 ? "AVX-512" : "AVX2", worst);
  }
}

TEST(NativeWinograd, F2MatchesTheDirectConvOnOddShapes) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  for (const NativeIsa& isa : isas()) {
    const double worst = check_cases(odd_cases(), isa, 2, 2e-6);  // measured 5.1e-7
    std::printf("F(2x2,3x3) %s: worst relative error %.2e\n", isa.avx512 ? "AVX-512" : "AVX2", worst);
  }
}

TEST(NativeWinograd, EveryEpilogueStageOnOneShape) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  std::vector<Case> cases;
  for (Stage st : {Stage::kNone, Stage::kRelu, Stage::kRelu6, Stage::kHardSwish, Stage::kResidual,
                   Stage::kResidualRelu, Stage::kSwish})
    for (bool same : {true, false}) cases.push_back({11, 14, 24, 40, same, st});
  for (const NativeIsa& isa : isas()) check_cases(cases, isa, 4, 3e-5);
}

TEST(NativeWinograd, OnlyThreeByThreeStrideOne) {
  NativeConvShape s = shape_of({8, 8, 16, 16, true, Stage::kNone});
  EXPECT_TRUE(NativeWinograd::supports(s));
  NativeConvShape strided = s;
  strided.stride_h = 2;
  EXPECT_FALSE(NativeWinograd::supports(strided));
  NativeConvShape dilated = s;  // as polyphase sub-images (native_winograd_dilated_test.cpp)
  dilated.dilation_w = 2;
  EXPECT_TRUE(NativeWinograd::supports(dilated));
  NativeConvShape five = s;
  five.kernel_h = five.kernel_w = 5;
  EXPECT_FALSE(NativeWinograd::supports(five));
}

// Inside the CPU delegate: CpuOptions::winograd picks the kernel (Session::kernels(), what
// --explain and --profile print), and both choices match the reference kernels.
std::string kernel_of(const std::shared_ptr<nn::Model>& model, const nn::CpuOptions& cpu, int threads) {
  return nn_test::cpu_kernel_of(model, cpu, "op 0", threads);
}

TEST(NativeWinograd, SwitchPicksTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  using T = nn::OperationType;
  nn_test::TestModel b;
  // 3x3 SAME conv + RELU, then an ADD of the input: a residual block's second conv.
  const uint32_t x = b.input({1, 28, 28, 64});
  const uint32_t w = b.constant({64, 3, 3, 64}, 3, -0.1f, 0.1f), bias = b.constant({64}, 4);
  const uint32_t y = b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)});
  b.output(b.op(T::ADD, {y, x, b.i32(1)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions off;
  off.winograd = false;
  for (bool avx512 : {false, true}) {
    if (avx512 && !has_avx512()) continue;
    nn::CpuOptions on;
    on.avx512 = off.avx512 = avx512;
    for (int threads : {1, 2}) {
      const std::string with = kernel_of(b.model, on, threads), without = kernel_of(b.model, off, threads);
      EXPECT_EQ(with.rfind("native winograd F(4x4,3x3)", 0), 0u) << with;
      EXPECT_NE(with.find(avx512 ? "AVX-512" : "AVX2"), std::string::npos) << with;
      EXPECT_EQ(without.rfind("native conv", 0), 0u) << without;
      for (const nn::CpuOptions& cpu : {on, off}) {
        nn::SessionOptions o;
        o.delegates = {"cpu"};
        o.cpu = cpu;
        o.threads = threads;
        // Judged against the output's scale (~3; floor 1), not element by element down to 1%
        // of it: Winograd's rounding error follows the magnitudes in a tile, not each output.
        EXPECT_LE(nn_test::compare_with_reference(b.model, o, -1.f, 1.f, 7, 1.0).max_rel_error, 1e-4);
      }
    }
  }
}

TEST(NativeWinograd, BalancedBlocksForTwoSlotsKeepTheBits) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  for (const NativeIsa& isa : isas())
    for (uint32_t m : {2u, 4u}) check_two_slot_blocks(isa, m);
}

}  // namespace

namespace {

// Few tiles for large filters: one block of all tiles, the threads splitting the filters'
// panels in runs (NativeWinograd::splits_panels). Built for 1, 2 and 3 slots and run on
// that many threads, every output keeps the bits of the blocks-of-tiles form (panel_split
// off, 1 thread), which matches the direct conv: no output missed or written twice, at
// ragged panels (392 channels: 12 x 32 + 8 on AVX-512, 24 x 16 + 8 on AVX2), an odd map
// (24 tiles: more than one slot's block) and the per-channel-range swish and residual stages.
void check_panel_split(const NativeIsa& isa, Stage stage) {
  const Case c{9, 13, 320, 392, stage != Stage::kSwish, stage};  // 18 MB of F(4x4) filters
  const NativeConvShape s = shape_of(c);
  const Data d = nn_test::random_conv_data(s, 57);
  const Epilogue e = epilogue_of(c.stage);
  const std::string what = describe(c) + (isa.avx512 ? " AVX-512" : " AVX2");
  const NativeWinograd blocks(s, d.filter.data(), d.bias.data(), e, 1, 4, isa, /*panel_split=*/false);
  ASSERT_TRUE(blocks.ok());
  EXPECT_FALSE(blocks.splits_panels());
  const size_t n = size_t(s.batch) * s.out_h * s.out_w * s.out_c;
  const std::vector<float> want = nn_test::run_native(blocks, d, e, n, nullptr);
  EXPECT_LE(relative_error(want, nn_test::direct_conv(s, d, e), scale_of(s, d, e)), 3e-5) << what;
  for (size_t threads : {1u, 2u, 3u}) {
    const NativeWinograd split(s, d.filter.data(), d.bias.data(), e, threads, 4, isa);
    ASSERT_TRUE(split.ok());
    EXPECT_TRUE(split.splits_panels()) << what << ", " << threads << " slots";
    pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
    const std::vector<float> got = nn_test::run_native(split, d, e, n, pool);
    if (pool) pthreadpool_destroy(pool);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << what << ", " << threads << " threads";
  }
  // Small filters keep the blocks (2.4 MB: squeezenet's 64 -> 256 at 13x13).
  NativeConvShape small = shape_of({13, 13, 64, 256, true, Stage::kNone});
  small.batch = 1;
  EXPECT_FALSE(NativeWinograd(small, d.filter.data(), d.bias.data(), e, 2, 4, isa).splits_panels());
}

}  // namespace

TEST(NativeWinograd, PanelSplitKeepsTheBitsOnOneToThreeThreads) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  for (const NativeIsa& isa : isas())
    for (Stage st : {Stage::kNone, Stage::kResidualRelu, Stage::kSwish}) check_panel_split(isa, st);
}

// Where the threads split the panels, each filter byte is read once per run at any thread
// count, so the 1-thread rule decides (vgg11's 512 -> 512 at 14x14 and fcn_resnet50's
// 2048 -> 512 head at 32x32 had gone to the direct conv at 2 threads).
TEST(NativeWinograd, PaysAtTwoThreadsWhereThePanelsAreSplit) {
  NativeConvShape s = shape_of({14, 14, 512, 512, true, Stage::kNone});
  s.batch = 1;
  EXPECT_TRUE(nn::cpu::winograd_pays(s, 1));
  EXPECT_TRUE(nn::cpu::winograd_pays(s, 2));
  NativeConvShape head = shape_of({32, 32, 2048, 512, true, Stage::kNone});
  head.batch = 1;
  EXPECT_TRUE(nn::cpu::winograd_pays(head, 2));
  s.out_h = s.out_w = s.in_h = s.in_w = 7;  // 4 tiles for 9.4 MB of filters: the direct conv
  EXPECT_FALSE(nn::cpu::winograd_pays(s, 1));
  EXPECT_FALSE(nn::cpu::winograd_pays(s, 2));
}

// CpuOptions::winograd_panel_split: at 2 threads a 14x14 384 -> 384 conv (16 tiles for
// 21 MB of transformed filters) runs as Winograd with the panels split, and without the
// split on the direct conv (blocks of tiles would stream the filters once per thread); both
// match the reference kernels.
TEST(NativeWinograd, PanelSplitSwitchPicksTheKernel) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  using T = nn::OperationType;
  nn_test::TestModel b;
  const uint32_t x = b.input({1, 14, 14, 384});
  const uint32_t w = b.constant({384, 3, 3, 384}, 5, -0.05f, 0.05f), bias = b.constant({384}, 6);
  b.output(b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  nn::CpuOptions on, off;
  off.winograd_panel_split = false;
  EXPECT_EQ(kernel_of(b.model, on, 2).rfind("native winograd F(4x4,3x3)", 0), 0u) << kernel_of(b.model, on, 2);
  EXPECT_EQ(kernel_of(b.model, off, 2).rfind("native conv", 0), 0u) << kernel_of(b.model, off, 2);
  for (const nn::CpuOptions& cpu : {on, off}) {
    nn::SessionOptions o;
    o.delegates = {"cpu"};
    o.cpu = cpu;
    o.threads = 2;
    EXPECT_LE(nn_test::compare_with_reference(b.model, o, -1.f, 1.f, 7, 1.0).max_rel_error, 1e-4);
  }
}

namespace {

NativeConvShape square(uint32_t size, uint32_t in_c, uint32_t out_c) {
  NativeConvShape s = shape_of({size, size, in_c, out_c, true, Stage::kNone});
  s.batch = 1;
  return s;
}

NativeIsa rule_isa(bool avx512) {  // the rule reads only the ISA's micro-tile rows
  NativeIsa isa;
  isa.avx512 = avx512;
  return isa;
}

}  // namespace

// winograd_choice on the zoo's small maps (bench/README.md, "F(2x2) on small maps"): 4, 2
// or 0 (the direct conv) per shape, threads and ISA; with F(2x2) off, winograd_pays' F(4x4).
TEST(NativeWinograd, ChoiceOnSmallMaps) {
  using nn::cpu::winograd_choice;
  const NativeIsa avx512 = rule_isa(true), avx2 = rule_isa(false);
  // 7x7 512 -> 512 (resnet): F(2x2) on 1 thread; at 2 the AVX-512 direct conv, AVX2's F(2x2)
  // splitting its panels.
  const NativeConvShape deep = square(7, 512, 512);
  EXPECT_EQ(winograd_choice(deep, 1, true, avx512), 2u);
  EXPECT_EQ(winograd_choice(deep, 1, true, avx2), 2u);
  EXPECT_EQ(winograd_choice(deep, 2, true, avx512), 0u);
  EXPECT_EQ(winograd_choice(deep, 2, true, avx2), 2u);
  EXPECT_EQ(winograd_choice(deep, 2, false, avx2), 0u);
  EXPECT_EQ(winograd_choice(square(8, 448, 384), 1, true, avx512), 2u);  // inception_v3
  EXPECT_EQ(winograd_choice(square(8, 448, 384), 2, true, avx512), 0u);
  // 7x7 160 -> 320 (googlenet): F(4x4) before; the direct conv on AVX-512, F(2x2) on AVX2.
  const NativeConvShape mid = square(7, 160, 320);
  EXPECT_EQ(winograd_choice(mid, 1, true, avx512, false), 4u);
  EXPECT_EQ(winograd_choice(mid, 1, true, avx512), 0u);
  EXPECT_EQ(winograd_choice(mid, 1, true, avx2), 2u);
  EXPECT_EQ(winograd_choice(mid, 2, true, avx2), 0u);
  // Below 6144 pairs AVX2 keeps winograd_pays (densenet's 128 -> 32 at 7x7).
  EXPECT_EQ(winograd_choice(square(7, 128, 32), 1, true, avx2), 4u);
  EXPECT_EQ(winograd_choice(square(7, 128, 32), 1, true, avx512), 0u);
  // 14x14: F(4x4) on 1 thread; at 2, F(2x2), but the AVX-512 direct conv for 256 -> 256.
  const NativeConvShape r14 = square(14, 256, 256), g14 = square(14, 128, 256);
  for (const NativeIsa& isa : {avx512, avx2}) {
    EXPECT_EQ(winograd_choice(r14, 1, true, isa), 4u);
    EXPECT_EQ(winograd_choice(g14, 1, true, isa), 4u);
    EXPECT_EQ(winograd_choice(g14, 2, true, isa), 2u);
    EXPECT_EQ(winograd_choice(g14, 2, true, isa, false), 4u);
    EXPECT_EQ(winograd_choice(square(14, 512, 512), 2, true, isa), 2u);  // F(2x2)'s panels split
    // 28x28 and larger: F(4x4) as before.
    EXPECT_EQ(winograd_choice(square(28, 128, 128), 1, true, isa), 4u);
    EXPECT_EQ(winograd_choice(square(28, 128, 128), 2, true, isa), 4u);
  }
  EXPECT_EQ(winograd_choice(r14, 2, true, avx512), 0u);
  EXPECT_EQ(winograd_choice(r14, 2, true, avx2), 2u);
  EXPECT_EQ(winograd_choice(r14, 2, true, avx512, false), 4u);
  // Where F(4x4) splits its panels and F(2x2) would not, F(4x4) (384 -> 384 at 14x14).
  EXPECT_EQ(winograd_choice(square(14, 384, 384), 2, true, avx512), 4u);
  EXPECT_EQ(winograd_choice(square(14, 384, 384), 2, true, avx2), 4u);
  // Half-width AVX-512 (Zen 4), at 2 threads: Winograd where full-width cores take the
  // direct conv, F(4x4) on 14x14 maps, F(2x2) splitting its panels on 7x7 512 -> 512 (not
  // without the split); one thread and large maps as full width.
  NativeIsa half = avx512;
  half.half_width = true;
  EXPECT_EQ(winograd_choice(r14, 2, true, half), 4u);
  EXPECT_EQ(winograd_choice(g14, 2, true, half), 4u);
  EXPECT_EQ(winograd_choice(square(14, 512, 512), 2, true, half), 4u);
  EXPECT_EQ(winograd_choice(deep, 2, true, half), 2u);
  EXPECT_EQ(winograd_choice(deep, 2, false, half), 0u);
  EXPECT_EQ(winograd_choice(mid, 2, true, half), 0u);
  EXPECT_EQ(winograd_choice(r14, 1, true, half), 4u);
  EXPECT_EQ(winograd_choice(deep, 1, true, half), 2u);
  EXPECT_EQ(winograd_choice(mid, 1, true, half), 0u);
  EXPECT_EQ(winograd_choice(square(28, 128, 128), 2, true, half), 4u);
  // half_width means nothing without AVX-512: the AVX2 rule.
  NativeIsa avx2_half = avx2;
  avx2_half.half_width = true;
  EXPECT_EQ(winograd_choice(r14, 2, true, avx2_half), 2u);
  EXPECT_EQ(winograd_choice(deep, 2, true, avx2_half), 2u);
}

// F(2x2) on the shapes winograd_choice now gives it: deep filters on 7x7 and 8x8 maps (the
// 512 -> 512 one with its panels split on 2 threads) and 14x14; within F(2x2)'s bound, and 2
// threads give 1 thread's bits.
TEST(NativeWinograd, F2MatchesTheDirectConvOnSmallDeepMaps) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  const std::vector<Case> cases = {{7, 7, 512, 512, true, Stage::kResidualRelu},
                                   {8, 8, 448, 384, true, Stage::kRelu},
                                   {14, 14, 256, 256, true, Stage::kResidual}};
  for (const NativeIsa& isa : isas()) {
    const double worst = check_cases(cases, isa, 2, 2e-6);
    std::printf("F(2x2,3x3) %s small deep maps: worst relative error %.2e\n", isa.avx512 ? "AVX-512" : "AVX2",
                worst);
  }
}

// CpuOptions::winograd_f2 in the delegate: a 7x7 384 -> 384 conv runs F(2x2) on 1 thread
// (off: the direct conv, winograd_pays wanting more tiles), a 14x14 128 -> 256 conv F(2x2) on
// 2 threads (off: F(4x4)); both choices match the reference kernels.
TEST(NativeWinograd, F2SwitchPicksTheKernel) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  using T = nn::OperationType;
  struct Conv {
    uint32_t size, in_c, out_c;
    int threads;
    const char* off_kernel;
  };
  for (const Conv& c : {Conv{7, 384, 384, 1, "native conv"}, Conv{14, 128, 256, 2, "native winograd F(4x4,3x3)"}}) {
    nn_test::TestModel b;
    const uint32_t x = b.input({1, c.size, c.size, c.in_c});
    const uint32_t w = b.constant({c.out_c, 3, 3, c.in_c}, 8, -0.05f, 0.05f), bias = b.constant({c.out_c}, 9);
    b.output(b.op(T::CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1)}));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    for (bool avx512 : {false, true}) {
      if (avx512 && !has_avx512()) continue;
      nn::CpuOptions on, off;
      on.avx512 = off.avx512 = avx512;
      // The full-width rule on any host (half-width AVX-512 keeps F(4x4) at 2 threads).
      on.avx512_half_width = off.avx512_half_width = nn::CpuOptions::HalfWidth::kOff;
      off.winograd_f2 = false;
      const std::string with = kernel_of(b.model, on, c.threads), without = kernel_of(b.model, off, c.threads);
      if (avx512) {
        nn::CpuOptions half = on;
        half.avx512_half_width = nn::CpuOptions::HalfWidth::kOn;
        const std::string on_half = kernel_of(b.model, half, c.threads);
        EXPECT_EQ(on_half.rfind(c.threads > 1 ? "native winograd F(4x4,3x3)" : "native winograd F(2x2,3x3)", 0), 0u)
            << on_half;
      }
      EXPECT_EQ(with.rfind("native winograd F(2x2,3x3)", 0), 0u) << with;
      EXPECT_EQ(without.rfind(c.off_kernel, 0), 0u) << without;
      EXPECT_EQ(without.find("F(2x2"), std::string::npos) << without;
      for (const nn::CpuOptions& cpu : {on, off}) {
        nn::SessionOptions o;
        o.delegates = {"cpu"};
        o.cpu = cpu;
        o.threads = c.threads;
        EXPECT_LE(nn_test::compare_with_reference(b.model, o, -1.f, 1.f, 7, 1.0).max_rel_error, 1e-4);
      }
    }
  }
}
