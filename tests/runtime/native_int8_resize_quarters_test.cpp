// The int8 RESIZE_BILINEAR's AVX-512 forms (native_int8_elementwise.cpp, Int8Resize): the
// 2x-width row with its products by 1/4 fused into the adds (CpuOptions::native_int8_resize_quarters)
// and the requantization by a reciprocal with one FMA correction instead of a division
// (CpuOptions::native_int8_resize_reciprocal, int8_resize_reciprocal). Every output byte
// equal to the reference kernel's, at odd sizes and channel counts, 1 and 2 threads; which
// form ran (the kernel name) with each switch on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::has_avx512_int8;
using nn_test::q8;
using nn_test::run;

float from_bits(uint32_t b) {
  float y;
  std::memcpy(&y, &b, sizeof y);
  return y;
}

// The output byte of the reference's requantization and of the reciprocal's.
int8_t by_division(float y, float so, int32_t zo) {
  return static_cast<int8_t>(std::clamp(std::round(y / so) + float(zo), -128.f, 127.f));
}
int8_t by_reciprocal(float y, float so, float inv, int32_t zo) {
  return static_cast<int8_t>(std::clamp(std::round(cpu::int8_resize_quotient(y, so, inv)) + float(zo), -128.f, 127.f));
}

// Whether by_reciprocal equals by_division for every float within `window` bit patterns of
// each step of the division's output (up to the clamps), both signs, and on `samples` random
// y across the output range.
bool alike_by_search(float so, int32_t zo, float inv, uint32_t window, int samples) {
  for (int32_t n = 1; n <= 256; ++n) {
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (std::round(from_bits(mid) / so) >= float(n)) hi = mid; else lo = mid + 1;
    }
    for (uint32_t b = lo > window ? lo - window : 0; b <= lo + window; ++b)
      for (float y : {from_bits(b), -from_bits(b)})
        if (by_reciprocal(y, so, inv, zo) != by_division(y, so, zo)) return false;
  }
  std::mt19937 rng(static_cast<uint32_t>(so * 1e6f) + uint32_t(zo + 128));
  std::uniform_real_distribution<float> range(-300.f * so, 300.f * so);
  for (int i = 0; i < samples; ++i) {
    const float y = range(rng);
    if (by_reciprocal(y, so, inv, zo) != by_division(y, so, zo)) return false;
  }
  return true;
}

// The check accepts 1 / so on the decoder's scales and on odd ones, and what it accepts
// rounds as the division on a window 16x wider and across the range; a reciprocal far
// off (which does not round alike) it rejects.
TEST(NativeInt8ResizeReciprocal, AcceptsOnlyAReciprocalThatRoundsAsTheDivision) {
  for (float so : {0.012608f, 0.051638f, 0.02558f, 0.0173f, 0.031f, 0.004f, 0.1f, 1.f / 3, 3.f, 7.16374731f, 1e-7f})
    for (int32_t zo : {-128, 9, 127}) {
      const std::string what = "scale " + std::to_string(so) + " zero point " + std::to_string(zo);
      float inv = 0.f;
      ASSERT_TRUE(cpu::int8_resize_reciprocal(so, zo, &inv)) << what;
      EXPECT_EQ(inv, 1.f / so) << what;
      EXPECT_TRUE(alike_by_search(so, zo, inv, 1024, 20000)) << what;
      // A reciprocal 2^16 ulps (about 2^-7) too large, which the correction does not make
      // good: the check must find where it rounds otherwise.
      uint32_t bits;
      std::memcpy(&bits, &inv, sizeof bits);
      const float off = from_bits(bits + (1u << 16));
      const bool alike = alike_by_search(so, zo, off, 64, 0);
      EXPECT_FALSE(alike) << what << ": a reciprocal 2^16 ulps off rounds alike; pick another";
      EXPECT_EQ(cpu::int8_resize_rounds_alike(so, zo, off), alike) << what;
    }
  float inv = 0.f;
  EXPECT_FALSE(cpu::int8_resize_reciprocal(0x1p-120f, 0, &inv));  // outside the checked exponents
}

struct Scales {
  float in, out;
  int32_t zo;
  int32_t zi = -128;  // input zero point: above -128, the input reaches below zero and the output clamps at -128
};

// One RESIZE_BILINEAR, half-pixel centres, [1, in_h, in_w, c] -> [1, out_h, out_w, c].
std::shared_ptr<Model> resize_model(uint32_t in_h, uint32_t in_w, uint32_t out_h, uint32_t out_w, uint32_t c,
                                    Scales s) {
  auto m = std::make_shared<Model>();
  Operand in = q8({1, in_h, in_w, c}, s.in, s.zi);
  in.lifetime = Lifetime::MODEL_INPUT;
  std::vector<uint32_t> ins{m->add_operand(in)};
  m->inputs = ins;
  ins.push_back(m->add_scalar_i32(int32_t(out_w)));
  ins.push_back(m->add_scalar_i32(int32_t(out_h)));
  ins.push_back(m->add_scalar_bool(false));
  ins.push_back(m->add_scalar_bool(false));
  ins.push_back(m->add_scalar_bool(true));
  Operand out = q8({1, out_h, out_w, c}, s.out, s.zo);
  out.lifetime = Lifetime::MODEL_OUTPUT;
  const uint32_t y = m->add_operand(out);
  m->add_operation(T::RESIZE_BILINEAR, ins, {y});
  m->outputs = {y};
  return m;
}

// Byte-equal to the reference with each switch on and off, 1 and 2 threads: 2x both ways
// and 2x wide only (the quarters), and widths not doubled (the reciprocal alone); scales: the
// decoder's (in = out: many exact halves to round), requantizing, past the int8 range (both
// ends: an input zero point of 0 gives negative values),
// 255 si / so >= 2^30 (clamped in float, then also below zero), and quotients past float's range.
TEST(NativeInt8ResizeQuarters, EqualsTheReferenceWithEachSwitch) {
  if (!has_avx512_int8()) GTEST_SKIP() << "no AVX-512";
  struct Shape {
    uint32_t in_h, in_w, out_h, out_w;
  };
  for (Scales sc : {Scales{0.02558f, 0.02558f, -128}, Scales{0.0173f, 0.031f, 9}, Scales{0.0173f, 0.004f, -3},
                    Scales{0.0173f, 0.004f, -3, 0}, Scales{1.f, 1e-7f, 0}, Scales{1.f, 1e-7f, 0, 0}, Scales{1e30f, 1e-7f, 0}})
    for (uint32_t c : {1u, 13u, 16u, 24u, 37u})
      for (Shape sh : {Shape{7, 9, 14, 18}, Shape{5, 11, 13, 22}, Shape{6, 5, 12, 10}, Shape{7, 9, 13, 17}}) {
        auto m = resize_model(sh.in_h, sh.in_w, sh.out_h, sh.out_w, c, sc);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        std::mt19937 rng(c * 1000 + sh.out_w);
        std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(size_t(sh.in_h) * sh.in_w * c));
        for (int8_t& v : x[0]) v = static_cast<int8_t>(int(rng() % 256) - 128);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        ASSERT_FALSE(expected.empty());
        float inv;
        // Not where the quotient could leave float's range (1e30 -> 1e-7: the reference's is infinite).
        const bool reciprocal_checks =
            255.0 * sc.in / sc.out < 0x1p100 && cpu::int8_resize_reciprocal(sc.out, sc.zo, &inv);
        for (bool quarters : {true, false})
          for (bool reciprocal : {true, false})
            for (int threads : {1, 2}) {
              CpuOptions cpu;
              cpu.native_int8_resize_integer = false;  // the float blend: the reference's bytes
              cpu.native_int8_resize_quarters = quarters;
              cpu.native_int8_resize_reciprocal = reciprocal;
              std::string kernel;
              const std::string what = "scales " + std::to_string(sc.in) + " -> " + std::to_string(sc.out) + ", " +
                                       std::to_string(c) + " channels, " + std::to_string(sh.in_h) + "x" +
                                       std::to_string(sh.in_w) + " -> " + std::to_string(sh.out_h) + "x" +
                                       std::to_string(sh.out_w) + ", " + std::to_string(threads) + " threads";
              EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), expected) << what << " on " << kernel;
              const bool doubled = sh.out_w == 2 * sh.in_w;
              std::string name = "native int8 resize AVX-512";
              if (doubled) name += ", width doubled";
              if (doubled && quarters) name += ", quarters fused";
              if (reciprocal && reciprocal_checks) name += ", reciprocal";
              EXPECT_EQ(kernel, name) << what;
            }
      }
}

// The AVX2 rows (8 channels a step, the rest pixel by pixel; a 2x-width row of its own)
// equal the reference byte for byte, on the scales and shapes above and outputs clamped at
// both ends.
TEST(NativeInt8ResizeAvx2, EqualsTheReference) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  for (Scales sc : {Scales{0.02558f, 0.02558f, -128}, Scales{0.0173f, 0.031f, 9}, Scales{0.0173f, 0.004f, -3},
                    Scales{0.0173f, 0.004f, 127}, Scales{0.0173f, 0.004f, -3, 0}, Scales{0.0173f, 0.004f, 127, 5},
                    Scales{1.f, 1e-7f, 0}, Scales{1.f, 1e-7f, 0, 0}, Scales{1e30f, 1e-7f, 0}})
    for (uint32_t c : {1u, 8u, 13u, 24u, 37u})
      for (auto sh : {std::array<uint32_t, 4>{7, 9, 14, 18}, std::array<uint32_t, 4>{5, 11, 13, 22},
                      std::array<uint32_t, 4>{7, 9, 13, 17}}) {
        auto m = resize_model(sh[0], sh[1], sh[2], sh[3], c, sc);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        std::mt19937 rng(c * 1000 + sh[3]);
        std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(size_t(sh[0]) * sh[1] * c));
        for (int8_t& v : x[0]) v = static_cast<int8_t>(int(rng() % 256) - 128);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        ASSERT_FALSE(expected.empty());
        for (int threads : {1, 2}) {
          CpuOptions cpu;
          cpu.avx512 = false;
          cpu.native_int8_resize_integer = false;  // the float blend: the reference's bytes
          std::string kernel;
          const std::string what = "scales " + std::to_string(sc.in) + " -> " + std::to_string(sc.out) + " zo " +
                                   std::to_string(sc.zo) + ", " + std::to_string(c) + " channels, width " +
                                   std::to_string(sh[1]) + " -> " + std::to_string(sh[3]) + ", " +
                                   std::to_string(threads) + " threads";
          EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), expected) << what << " on " << kernel;
          EXPECT_EQ(kernel.rfind("native int8 resize AVX2", 0), 0u) << what << ": " << kernel;
        }
      }
}

// Without the 2x-width row (its switch off) no quarters, whatever their switch says.
TEST(NativeInt8ResizeQuarters, OnlyOnTheWidthDoublingRow) {
  if (!has_avx512_int8()) GTEST_SKIP() << "no AVX-512";
  auto m = resize_model(5, 6, 10, 12, 16, Scales{0.02558f, 0.02558f, -128});
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(5 * 6 * 16, 7));
  CpuOptions cpu;
  cpu.native_int8_resize_twice_w = false;
  std::string kernel;
  run(m, x, "cpu", cpu, 1, &kernel);
  EXPECT_EQ(kernel, "native int8 resize AVX-512, reciprocal");
  cpu.avx512 = false;  // AVX2: neither form
  run(m, x, "cpu", cpu, 1, &kernel);
  EXPECT_EQ(kernel.find("quarters"), std::string::npos) << kernel;
  EXPECT_EQ(kernel.find("reciprocal"), std::string::npos) << kernel;
}

// The integer form (CpuOptions::native_int8_resize_integer): where input and output share
// scale and zero point, a 2x width's taps summed in int16 and rounded by a shift, within one
// step of the reference's float blend and equal on most bytes (they part only near halves,
// where the reference's floats land either side), 1 and 2 threads, 2x both ways (the edge
// rows' -1/4 weight) and 2x wide only; the float form elsewhere (scales that differ, a width
// not doubled) and with the switch off.
TEST(NativeInt8ResizeInteger, WithinOneStepOfTheReference) {
  if (!has_avx512_int8()) GTEST_SKIP() << "no AVX-512";
  struct Shape {
    uint32_t in_h, in_w, out_h, out_w;
  };
  size_t total = 0, differ = 0;
  for (Scales sc : {Scales{0.02558f, 0.02558f, -128}, Scales{0.0516f, 0.0516f, 17, 17}, Scales{0.0516f, 0.0516f, 17}, Scales{0.0173f, 0.031f, 9}})
    for (uint32_t c : {1u, 13u, 16u, 24u, 37u, 128u})
      for (Shape sh : {Shape{7, 9, 14, 18}, Shape{5, 11, 13, 22}, Shape{6, 5, 12, 10}, Shape{7, 9, 13, 17}}) {
        auto m = resize_model(sh.in_h, sh.in_w, sh.out_h, sh.out_w, c, sc);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        std::mt19937 rng(c * 1000 + sh.out_w + 7);
        std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(size_t(sh.in_h) * sh.in_w * c));
        for (int8_t& v : x[0]) v = static_cast<int8_t>(int(rng() % 256) - 128);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        ASSERT_FALSE(expected.empty());
        const bool integer = sc.in == sc.out && sc.zi == sc.zo && sh.out_w == 2 * sh.in_w && sh.out_h == 2 * sh.in_h;
        const std::string what = "scales " + std::to_string(sc.in) + " -> " + std::to_string(sc.out) + ", " +
                                 std::to_string(c) + " channels, " + std::to_string(sh.in_h) + "x" +
                                 std::to_string(sh.in_w) + " -> " + std::to_string(sh.out_h) + "x" +
                                 std::to_string(sh.out_w);
        for (bool on : {true, false})
          for (int threads : {1, 2}) {
            CpuOptions cpu;
            cpu.native_int8_resize_integer = on;
            std::string kernel;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
            ASSERT_EQ(got.size(), expected.size()) << what;
            EXPECT_EQ(kernel.find("integer sums") != std::string::npos, on && integer) << what << ": " << kernel;
            if (!(on && integer)) {
              EXPECT_EQ(got, expected) << what << " on " << kernel;
              continue;
            }
            for (size_t i = 0; i < got.size(); ++i) {
              EXPECT_LE(std::abs(got[i] - expected[i]), 1) << what << " at " << i;
              differ += got[i] != expected[i];
            }
            total += got.size();
          }
      }
  ASSERT_GT(total, 0u);
  EXPECT_LT(differ * 20, total) << differ << " of " << total << " bytes differ";  // 2.6% here
}

// The switch's environment variable (CpuOptions::from_environment, the one place env is read).
TEST(NativeInt8ResizeInteger, EnvironmentTurnsItOff) {
  nn_test::expect_env_turns_off("NN_NO_NATIVE_INT8_RESIZE_INTEGER", &CpuOptions::native_int8_resize_integer);
}

}  // namespace
}  // namespace nn
