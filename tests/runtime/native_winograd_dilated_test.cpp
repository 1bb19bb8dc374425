// NativeWinograd on dilated 3x3 stride-1 convs (delegates/cpu/native_winograd.h): at
// dilation d the d_h x d_w polyphase sub-images are undilated convs, tiled and transformed
// as the undilated ones with their pixels d apart. Against a direct dilated convolution in
// double: dilations 2, 3, 4 and 2x3, odd maps (not a multiple of d or of 4, so sub-images
// differ in size and some tiles hold no pixel), batch 2, SAME and VALID padding, the
// epilogues (ReLU, residual ADD, swish), 1 and 2 threads (same bits), AVX-512 and AVX2, the
// panel split; the rule (winograd_choice) on FCN's and DeepLab's shapes; and
// CpuOptions::dilated_winograd choosing the kernel inside the CPU delegate.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "delegates/cpu/native_winograd.h"
#include "native_conv_test_util.h"
#include "runtime_test_util.h"
#include "test_model.h"
#include "test_support.h"

namespace {

using nn::cpu::Epilogue;
using nn::cpu::NativeConvShape;
using nn::cpu::NativeIsa;
using nn::cpu::NativeWinograd;
using Data = nn_test::NativeConvData;

enum class Stage { kNone, kRelu, kResidual, kResidualRelu, kSwish };

Epilogue epilogue_of(Stage s) {
  Epilogue e;
  if (s == Stage::kRelu) e.lo = 0.f;
  if (s == Stage::kResidual || s == Stage::kResidualRelu) e.residual = true;
  if (s == Stage::kResidualRelu) e.lo = -0.5f, e.res_lo = 0.f;
  if (s == Stage::kSwish) e.swish = true;
  return e;
}

struct Case {
  uint32_t h, w, in_c, out_c, dil_h, dil_w;
  bool same;  // SAME (padded by the dilation, output h x w) or VALID (input (h + 2 d) x (w + 2 d))
  Stage stage;
};

std::string describe(const Case& c) {
  return std::to_string(c.h) + "x" + std::to_string(c.w) + " " + std::to_string(c.in_c) + "->" +
         std::to_string(c.out_c) + " dilation " + std::to_string(c.dil_h) + "x" + std::to_string(c.dil_w) +
         (c.same ? " SAME" : " VALID") + " stage " + std::to_string(int(c.stage));
}

NativeConvShape shape_of(const Case& c) {
  NativeConvShape s;
  s.batch = 2;  // tiles of one image never read the other's
  s.out_h = c.h, s.out_w = c.w, s.in_c = c.in_c, s.out_c = c.out_c;
  s.in_h = c.same ? c.h : c.h + 2 * c.dil_h, s.in_w = c.same ? c.w : c.w + 2 * c.dil_w;
  s.kernel_h = s.kernel_w = 3;
  s.dilation_h = c.dil_h, s.dilation_w = c.dil_w;
  s.pad_top = c.same ? c.dil_h : 0, s.pad_left = c.same ? c.dil_w : 0;
  return s;
}

// max |got - want| / the largest pre-epilogue output (or residual): Winograd's rounding
// error follows the magnitudes in a tile.
double relative_error(const NativeConvShape& s, const Data& d, const Epilogue& e, const std::vector<float>& got,
                      const std::vector<float>& want) {
  double scale = 1e-30, err = 0;
  for (float v : nn_test::direct_conv(s, d, Epilogue{})) scale = std::max(scale, std::fabs(double(v)));
  if (e.residual)
    for (float v : d.residual) scale = std::max(scale, std::fabs(double(v)));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
  return err / scale;
}

std::vector<NativeIsa> isas() {
  std::vector<NativeIsa> v = {NativeIsa::with(false, 0, true)};
  if (nn::cpu::native_avx512_enabled()) v.push_back(NativeIsa::with(true, -1, true));
  return v;
}

TEST(NativeWinogradDilated, MatchesTheDirectConvOnOddMaps) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  const Case cases[] = {
      {9, 11, 24, 40, 2, 2, true, Stage::kRelu},           // sub-images 5x6, 5x5, 4x6, 4x5
      {17, 13, 33, 17, 2, 2, false, Stage::kResidual},     // VALID, ragged channels
      {13, 10, 16, 32, 3, 3, true, Stage::kResidualRelu},  // 13 = 4 * 3 + 1: empty tiles
      {14, 19, 40, 24, 3, 3, true, Stage::kSwish},
      {19, 21, 32, 48, 4, 4, true, Stage::kNone},
      {11, 9, 20, 36, 4, 4, false, Stage::kRelu},
      {15, 12, 24, 24, 2, 3, true, Stage::kResidual},  // uneven dilations
  };
  pthreadpool_t pool = pthreadpool_create(2);
  uint32_t seed = 3;
  for (const NativeIsa& isa : isas()) {
    double worst = 0;
    for (const Case& c : cases) {
      const std::string what = describe(c) + (isa.avx512 ? " AVX-512" : " AVX2");
      const NativeConvShape s = shape_of(c);
      ASSERT_TRUE(NativeWinograd::supports(s)) << what;
      const Data d = nn_test::random_conv_data(s, seed += 7);
      const Epilogue e = epilogue_of(c.stage);
      const NativeWinograd op(s, d.filter.data(), d.bias.data(), e, 2, 4, isa);
      ASSERT_TRUE(op.ok()) << what;
      const std::vector<float> want = nn_test::direct_conv(s, d, e);
      const std::vector<float> one = nn_test::run_native(op, d, e, want.size(), nullptr);
      const std::vector<float> two = nn_test::run_native(op, d, e, want.size(), pool);
      const double err = relative_error(s, d, e, one, want);
      worst = std::max(worst, err);
      EXPECT_LE(err, 3e-5) << what;  // the undilated F(4x4) tests' bound
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << what << ": 2 threads differ";
    }
    std::printf("dilated F(4x4,3x3) %s: worst relative error %.2e\n", isa.avx512 ? "AVX-512" : "AVX2", worst);
  }
  pthreadpool_destroy(pool);
}

// Large filters for few tiles: the threads split the filters' panels over one block of all
// the sub-images' tiles; the same bits as blocks of tiles.
TEST(NativeWinogradDilated, PanelSplitKeepsTheBits) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  const Case c{9, 13, 320, 392, 2, 2, true, Stage::kResidualRelu};  // 18 MB of F(4x4) filters
  const NativeConvShape s = shape_of(c);
  const Data d = nn_test::random_conv_data(s, 41);
  const Epilogue e = epilogue_of(c.stage);
  const size_t n = size_t(s.batch) * s.out_h * s.out_w * s.out_c;
  for (const NativeIsa& isa : isas()) {
    const std::string what = describe(c) + (isa.avx512 ? " AVX-512" : " AVX2");
    const NativeWinograd blocks(s, d.filter.data(), d.bias.data(), e, 1, 4, isa, /*panel_split=*/false);
    const NativeWinograd split(s, d.filter.data(), d.bias.data(), e, 2, 4, isa);
    ASSERT_TRUE(blocks.ok() && split.ok()) << what;
    EXPECT_FALSE(blocks.splits_panels());
    EXPECT_TRUE(split.splits_panels()) << what;
    const std::vector<float> want = nn_test::run_native(blocks, d, e, n, nullptr);
    EXPECT_LE(relative_error(s, d, e, want, nn_test::direct_conv(s, d, e)), 3e-5) << what;
    pthreadpool_t pool = pthreadpool_create(2);
    const std::vector<float> got = nn_test::run_native(split, d, e, n, pool);
    pthreadpool_destroy(pool);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << what;
  }
}

NativeConvShape dilated_same(uint32_t size, uint32_t in_c, uint32_t out_c, uint32_t d) {
  return shape_of({size, size, in_c, out_c, d, d, true, Stage::kNone});
}

// F(4x4) where the sub-images' tiles are full enough and winograd_pays; never F(2x2).
TEST(NativeWinogradDilated, Rule) {
  using nn::cpu::winograd_choice;
  for (const NativeIsa& isa : isas())
    for (int threads : {1, 2}) {
      NativeConvShape fcn2 = dilated_same(32, 256, 256, 2), fcn4 = dilated_same(32, 512, 512, 4);
      fcn2.batch = fcn4.batch = 1;
      EXPECT_EQ(winograd_choice(fcn2, threads, true, isa), 4u);  // fcn_resnet50's layer3
      EXPECT_EQ(winograd_choice(fcn4, threads, true, isa), 4u);  // and layer4
      EXPECT_EQ(winograd_choice(fcn2, threads, true, isa, true, /*dilated=*/false), 0u);
      // deeplabv3's ASPP: dilation 12 on 16x16, sub-images of 1-2 pixels.
      NativeConvShape aspp = dilated_same(16, 256, 256, 12);
      aspp.batch = 1;
      EXPECT_EQ(winograd_choice(aspp, threads, true, isa), 0u);
      // 20x20 at dilation 2: tiles of 10x10 sub-images 69% filled.
      EXPECT_EQ(winograd_choice(dilated_same(20, 64, 64, 2), threads, true, isa), 0u);
      EXPECT_EQ(winograd_choice(dilated_same(16, 64, 64, 2), threads, true, isa), 4u);
    }
}

// Inside the CPU delegate: CpuOptions::dilated_winograd picks the kernel (what --explain
// and --profile print), and both choices match the reference kernels, a residual block's
// conv + ReLU + ADD fused.
TEST(NativeWinogradDilated, SwitchPicksTheKernelAndBothMatchTheReference) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  using T = nn::OperationType;
  for (int32_t d : {2, 3, 4}) {
    SCOPED_TRACE("dilation " + std::to_string(d));
    nn_test::TestModel b;
    const uint32_t size = 8 * uint32_t(d);  // 8x8 sub-images
    const uint32_t x = b.input({1, size, size, 32});
    const uint32_t w = b.constant({32, 3, 3, 32}, 3, -0.1f, 0.1f), bias = b.constant({32}, 4);
    const uint32_t y = b.op(T::CONV_2D, {x, w, bias, b.i32(d), b.i32(d), b.i32(d), b.i32(d), b.i32(1), b.i32(1),
                                         b.i32(1), b.boolean(false), b.i32(d), b.i32(d)});
    b.output(b.op(T::ADD, {y, x, b.i32(1)}));
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    for (bool avx512 : {false, true}) {
      if (avx512 && !nn::cpu::native_avx512_enabled()) continue;
      nn::CpuOptions on, off;
      on.avx512 = off.avx512 = avx512;
      off.dilated_winograd = false;
      for (int threads : {1, 2}) {
        const std::string with = nn_test::cpu_kernel_of(b.model, on, "op 0", threads);
        const std::string without = nn_test::cpu_kernel_of(b.model, off, "op 0", threads);
        EXPECT_EQ(with, std::string("native winograd F(4x4,3x3) ") + (avx512 ? "AVX-512" : "AVX2") + ", dilation " +
                            std::to_string(d));
        EXPECT_EQ(without.rfind("native conv", 0), 0u) << without;
        EXPECT_EQ(without.find("winograd"), std::string::npos) << without;
        for (const nn::CpuOptions& cpu : {on, off}) {
          nn::SessionOptions o;
          o.delegates = {"cpu"};
          o.cpu = cpu;
          o.threads = threads;
          EXPECT_LE(nn_test::compare_with_reference(b.model, o, -1.f, 1.f, 7, 1.0).max_rel_error, 1e-4);
        }
      }
    }
  }
}

}  // namespace
