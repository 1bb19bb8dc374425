// The native int8 elementwise kernels' AVX2 forms (native_int8_elementwise.cpp), run on an
// AVX-512 host with CpuOptions::avx512 off: the 2x resize's integer sums (Int8Resize,
// CpuOptions::native_int8_resize_integer) give the AVX-512 integer form's bytes, within one
// step of the reference's float blend, at odd sizes and channel counts, inputs at both int8
// ends, 1 and 2 threads; the same-shaped ADD in one rounding (CpuOptions::native_int8_add_avx2)
// within one step of NNAPI's for every input pair; the fp32 gate MUL's AVX2 loop (rounded,
// then clamped as bytes) with the AVX-512 form's bytes; the global average pool's AVX2 sums.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::q8;
using nn_test::run;

// One RESIZE_BILINEAR, half-pixel centres, [1, in_h, in_w, c] -> [1, out_h, out_w, c], the
// same scale and zero point in and out (the integer form's case) unless `out_scale` is set.
std::shared_ptr<Model> resize_model(uint32_t in_h, uint32_t in_w, uint32_t out_h, uint32_t out_w, uint32_t c,
                                    float scale, int32_t zp, float out_scale = 0.f) {
  auto m = std::make_shared<Model>();
  Operand in = q8({1, in_h, in_w, c}, scale, zp);
  in.lifetime = Lifetime::MODEL_INPUT;
  std::vector<uint32_t> ins{m->add_operand(in)};
  m->inputs = ins;
  ins.push_back(m->add_scalar_i32(int32_t(out_w)));
  ins.push_back(m->add_scalar_i32(int32_t(out_h)));
  ins.push_back(m->add_scalar_bool(false));
  ins.push_back(m->add_scalar_bool(false));
  ins.push_back(m->add_scalar_bool(true));
  Operand out = q8({1, out_h, out_w, c}, out_scale > 0.f ? out_scale : scale, zp);
  out.lifetime = Lifetime::MODEL_OUTPUT;
  const uint32_t y = m->add_operand(out);
  m->add_operation(T::RESIZE_BILINEAR, ins, {y});
  m->outputs = {y};
  return m;
}

// Inputs: uniform over all 256 values, all -128, all 127, and -128 / 127 in runs (each
// edge tap's -1/4 weight against a 5/4 one pushes the sum past both int8 ends).
std::vector<std::vector<int8_t>> resize_inputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int8_t>> v(4, std::vector<int8_t>(n));
  for (size_t i = 0; i < n; ++i) {
    v[0][i] = static_cast<int8_t>(int(rng() % 256) - 128);
    v[1][i] = -128;
    v[2][i] = 127;
    v[3][i] = (i / 3 + i / 7) % 2 ? 127 : -128;
  }
  return v;
}

struct Shape {
  uint32_t in_h, in_w, out_h, out_w;
};

// AVX2's integer sums: the AVX-512 integer form's bytes (where the CPU has AVX-512), within
// one step of the reference, 2x both ways (the edge rows' -1/4 weight) and 2x wide only,
// channel counts under 16, multiples of 16 and between; the kernel name says which form ran.
TEST(NativeInt8Avx2Resize, IntegerSumsEqualTheAvx512FormWithinOneStepOfTheReference) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  const bool avx512 = nn_test::has_avx512_int8();
  size_t total = 0, differ = 0;
  for (int32_t zp : {-128, 17, 127})
    for (uint32_t c : {1u, 8u, 13u, 16u, 24u, 37u, 128u})
      for (Shape sh : {Shape{7, 9, 14, 18}, Shape{5, 11, 10, 22}, Shape{4, 11, 4, 22}, Shape{6, 5, 12, 10},
                       Shape{1, 2, 2, 4}}) {
        auto m = resize_model(sh.in_h, sh.in_w, sh.out_h, sh.out_w, c, 0.0516f, zp);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        for (const std::vector<int8_t>& input :
             resize_inputs(size_t(sh.in_h) * sh.in_w * c, c * 100 + sh.out_w)) {
          const std::vector<std::vector<int8_t>> x{input};
          const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
          ASSERT_FALSE(expected.empty());
          const std::string what = "zero point " + std::to_string(zp) + ", " + std::to_string(c) +
                                   " channels, " + std::to_string(sh.in_h) + "x" + std::to_string(sh.in_w) +
                                   " -> " + std::to_string(sh.out_h) + "x" + std::to_string(sh.out_w) +
                                   ", input " + std::to_string(int(input[0])) + "," +
                                   std::to_string(int(input[1]));
          std::vector<int8_t> avx512_bytes;
          if (avx512) {
            std::string kernel;
            avx512_bytes = run(m, x, "cpu", CpuOptions{}, 1, &kernel);
            ASSERT_EQ(kernel, "native int8 resize AVX-512, width doubled, integer sums") << what;
          }
          for (int threads : {1, 2}) {
            CpuOptions cpu;
            cpu.avx512 = false;
            std::string kernel;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
            EXPECT_EQ(kernel, "native int8 resize AVX2, width doubled, integer sums") << what;
            ASSERT_EQ(got.size(), expected.size()) << what;
            if (avx512) {
              EXPECT_EQ(got, avx512_bytes) << what << ", " << threads << " threads";
            }
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_LE(std::abs(got[i] - expected[i]), 1) << what << " at " << i;
              differ += got[i] != expected[i];
            }
            total += got.size();
          }
        }
      }
  ASSERT_GT(total, 0u);
  EXPECT_LT(differ * 20, total) << differ << " of " << total << " bytes differ";
}

// With its switch off, or scales that differ, or a width not doubled, AVX2 keeps the float
// blend: the reference's bytes.
TEST(NativeInt8Avx2Resize, FloatBlendOtherwise) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  struct Case {
    Shape sh;
    float out_scale;
    bool integer_switch;
  };
  for (Case k : {Case{{7, 9, 14, 18}, 0.f, false}, Case{{7, 9, 14, 18}, 0.031f, true},
                 Case{{7, 9, 13, 17}, 0.f, true}}) {
    auto m = resize_model(k.sh.in_h, k.sh.in_w, k.sh.out_h, k.sh.out_w, 24, 0.0516f, -128, k.out_scale);
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    const std::vector<std::vector<int8_t>> x{resize_inputs(size_t(k.sh.in_h) * k.sh.in_w * 24, 5)[0]};
    CpuOptions cpu;
    cpu.avx512 = false;
    cpu.native_int8_resize_integer = k.integer_switch;
    std::string kernel;
    EXPECT_EQ(run(m, x, "cpu", cpu, 1, &kernel), run(m, x, "reference", {}, 1, nullptr)) << kernel;
    EXPECT_EQ(kernel.rfind("native int8 resize AVX2", 0), 0u) << kernel;
    EXPECT_EQ(kernel.find("integer sums"), std::string::npos) << kernel;
  }
}

// ADD(a, b) of two [1, 1, n, 1] int8 inputs with the given scales, zero points and fuse code.
struct AddScales {
  float a, b, out;
  int32_t za, zb, zo;
  int32_t fuse = 0;
};
std::shared_ptr<Model> add_model(uint32_t n, const AddScales& s) {
  auto m = std::make_shared<Model>();
  const uint32_t a = m->add_operand(q8({1, 1, n, 1}, s.a, s.za, Lifetime::MODEL_INPUT));
  const uint32_t b = m->add_operand(q8({1, 1, n, 1}, s.b, s.zb, Lifetime::MODEL_INPUT));
  m->inputs = {a, b};
  const uint32_t y = nn_test::int8_add(*m, a, b, s.fuse, s.out, s.zo);
  m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
  m->outputs = {y};
  return m;
}

// Every (a, b) pair once, then `extra` more (a tail past the last whole vector).
std::vector<std::vector<int8_t>> every_pair(size_t extra) {
  std::vector<std::vector<int8_t>> x(2, std::vector<int8_t>(65536 + extra));
  for (size_t i = 0; i < x[0].size(); ++i) {
    x[0][i] = static_cast<int8_t>(i % 256);
    x[1][i] = static_cast<int8_t>(i / 256 % 256 + i / 65536 * 37);
  }
  return x;
}

const AddScales kAddScales[] = {
    {0.0516f, 0.0473f, 0.0622f, -3, 11, -7},      // a residual ADD's scales
    {0.02f, 0.02f, 0.02f, -128, -128, -128},      // all the same, at the low end
    {0.1f, 0.013f, 0.05f, 127, -128, 127},        // zero points at both ends
    {0.003f, 0.2f, 0.41f, 0, 5, 0, 1},            // RELU: clamped at zo
    {0.0173f, 0.031f, 0.0117f, 9, -40, -100, 3},  // RELU6
    {0.3f, 0.25f, 0.04f, 0, 0, 0},                // ratios near 8: the shortest shift
};

// On AVX2 (cpu.avx512 off): within one step of the reference (NNAPI's fixed point) for every
// input pair, equal on most bytes, 1 and 2 threads, a tail past the last 32; the kernel name.
TEST(NativeInt8Avx2Add, OneRoundingWithinOneStepOfNnapi) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  const std::vector<std::vector<int8_t>> x = every_pair(45);
  size_t total = 0, differ = 0;
  for (const AddScales& s : kAddScales) {
    auto m = add_model(uint32_t(x[0].size()), s);
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
    ASSERT_EQ(expected.size(), x[0].size());
    const std::string what = "scales " + std::to_string(s.a) + ", " + std::to_string(s.b) + " -> " +
                             std::to_string(s.out) + ", fuse " + std::to_string(s.fuse);
    for (int threads : {1, 2}) {
      CpuOptions cpu;
      cpu.avx512 = false;
      std::string kernel;
      const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
      EXPECT_EQ(kernel, "native int8 add AVX2, one rounding") << what;
      ASSERT_EQ(got.size(), expected.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::abs(got[i] - expected[i]), 1)
            << what << ": a " << int(x[0][i]) << " b " << int(x[1][i]) << ", " << threads << " threads";
        differ += got[i] != expected[i];
      }
      total += got.size();
    }
  }
  EXPECT_LT(differ * 100, total) << differ << " of " << total << " bytes differ";  // 0.5% here
}

// The vector loop and the scalar tail give the same bytes: every pair again, 31 at a time
// (all tail), against the long run's bytes.
TEST(NativeInt8Avx2Add, TailEqualsTheVectorLoop) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  const std::vector<std::vector<int8_t>> x = every_pair(0);
  for (const AddScales& s : kAddScales) {
    CpuOptions cpu;
    cpu.avx512 = false;
    const std::vector<int8_t> whole = run(add_model(65536, s), x, "cpu", cpu, 1, nullptr);
    ASSERT_EQ(whole.size(), 65536u);
    auto m = add_model(31, s);
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    SessionOptions so;
    so.delegates = {"cpu"};
    so.cpu = cpu;
    so.threads = 1;
    auto session = Session::open(m, so);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    ASSERT_EQ((*session)->kernels().at(0).kernel, "native int8 add AVX2, one rounding");
    for (size_t i0 = 0; i0 < 65536; i0 += 31) {
      int8_t a[31] = {}, b[31] = {};
      const size_t n = std::min<size_t>(31, 65536 - i0);
      std::memcpy(a, x[0].data() + i0, n);
      std::memcpy(b, x[1].data() + i0, n);
      ASSERT_TRUE((*session)->set_input(0, a, 31).is_ok());
      ASSERT_TRUE((*session)->set_input(1, b, 31).is_ok());
      ASSERT_TRUE((*session)->run().is_ok());
      const auto* o = static_cast<const int8_t*>((*session)->output_data(0));
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(o[i], whole[i0 + i]) << "a " << int(a[i]) << " b " << int(b[i]);
    }
  }
}

// Which form runs: with AVX-512 never this one (the VBMI tables, or XNNPACK with them off);
// on AVX2 this one, XNNPACK with the switch off or where a ratio of scales leaves the int16
// multipliers too short.
TEST(NativeInt8Avx2Add, KernelChoice) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  const std::vector<std::vector<int8_t>> x = every_pair(0);
  std::string kernel;
  CpuOptions cpu;
  if (nn_test::has_avx512_vbmi()) {
    for (const AddScales& s : kAddScales) {  // the tables, or XNNPACK where they differ from NNAPI
      run(add_model(65536, s), x, "cpu", cpu, 1, &kernel);
      EXPECT_TRUE(kernel == "native int8 add AVX-512 VBMI table" || kernel == "xnnpack") << kernel;
    }
  }
  if (nn_test::has_avx512_int8()) {
    CpuOptions no_table;
    no_table.native_int8_add_table = false;
    run(add_model(65536, kAddScales[0]), x, "cpu", no_table, 1, &kernel);
    EXPECT_EQ(kernel, "xnnpack");
  }
  cpu.avx512 = false;
  run(add_model(65536, kAddScales[0]), x, "cpu", cpu, 1, &kernel);
  EXPECT_EQ(kernel, "native int8 add AVX2, one rounding");
  run(add_model(65536, AddScales{0.5f, 0.25f, 0.05f, 0, 0, 0}), x, "cpu", cpu, 1, &kernel);  // ratio 10
  EXPECT_EQ(kernel.find("native int8 add"), std::string::npos) << kernel;
  cpu.native_int8_add_avx2 = false;
  run(add_model(65536, kAddScales[0]), x, "cpu", cpu, 1, &kernel);
  EXPECT_EQ(kernel.find("native int8 add"), std::string::npos) << kernel;
}

TEST(NativeInt8Avx2Add, EnvironmentTurnsItOff) {
  nn_test::expect_env_turns_off("NN_NO_NATIVE_INT8_ADD_AVX2", &CpuOptions::native_int8_add_avx2);
}

// MUL of a [1, pixels, 1, c] tensor by a per-channel gate [1, 1, 1, c].
std::shared_ptr<Model> gate_model(uint32_t pixels, uint32_t c, const AddScales& s) {
  auto m = std::make_shared<Model>();
  const uint32_t a = m->add_operand(q8({1, pixels, 1, c}, s.a, s.za, Lifetime::MODEL_INPUT));
  const uint32_t g = m->add_operand(q8({1, 1, 1, c}, s.b, s.zb, Lifetime::MODEL_INPUT));
  m->inputs = {a, g};
  const uint32_t y = m->add_operand(q8({1, pixels, 1, c}, s.out, s.zo, Lifetime::MODEL_OUTPUT));
  m->add_operation(T::MUL, {a, g, m->add_scalar_i32(s.fuse)}, {y});
  m->outputs = {y};
  return m;
}

// The fp32 gate (CpuOptions::int8_fp32_requant) on AVX2 gives the AVX-512 form's bytes and
// its own scalar tail's: every input byte against every gate byte (256 channels), channel
// counts that leave a step's channels offset and a tail, RELU and RELU6, products far past
// the int8 range (the float clamp kept), 1 and 2 threads.
TEST(NativeInt8Avx2Gate, Fp32GateEqualsTheAvx512Form) {
  if (!nn_test::has_avx2() || !nn_test::has_avx512_int8()) GTEST_SKIP() << "no AVX2 and AVX-512";
  const AddScales scales[] = {
      {0.105f, 1.f / 256, 0.053f, -124, -128, -122, 1},  // selfie's gate, ReLU
      {0.03f, 0.05f, 0.07f, 11, -7, 2, 3},               // RELU6
      {0.0516f, 0.02f, 0.011f, 127, 0, -128},            // zero points at the ends
      {1e3f, 1e3f, 1e-3f, 0, 0, 0},                      // products near 2^38: clamped in float
      {1e3f, 1e3f, 1e-3f, 0, 0, 5, 1},                   // and ReLU
  };
  for (const AddScales& s : scales)
    for (uint32_t c : {256u, 13u, 40u})
      for (uint32_t pixels : {256u, 37u}) {
        auto m = gate_model(pixels, c, s);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        std::vector<std::vector<int8_t>> x(2);
        for (uint32_t p = 0; p < pixels; ++p)
          for (uint32_t k = 0; k < c; ++k) x[0].push_back(static_cast<int8_t>(p * 7 + k * 3 + p / 37));
        for (uint32_t k = 0; k < c; ++k) x[1].push_back(static_cast<int8_t>(c == 256 ? k : k * 41 + 5));
        std::string kernel;
        const std::vector<int8_t> expected = run(m, x, "cpu", CpuOptions{}, 1, &kernel);
        ASSERT_EQ(kernel, "native int8 mul AVX-512 gate, fp32 requant");
        const std::vector<int8_t> reference = run(m, x, "reference", {}, 1, nullptr);
        for (int threads : {1, 2}) {
          CpuOptions cpu;
          cpu.avx512 = false;
          const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
          EXPECT_EQ(kernel, "native int8 mul AVX2 gate, fp32 requant");
          const std::string what = "scales " + std::to_string(s.a) + " x " + std::to_string(s.b) + " -> " +
                                   std::to_string(s.out) + ", " + std::to_string(c) + " channels, " +
                                   std::to_string(pixels) + " pixels, " + std::to_string(threads) +
                                   " threads";
          EXPECT_EQ(got, expected) << what;
          ASSERT_EQ(got.size(), reference.size());
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_LE(std::abs(got[i] - reference[i]), 1) << what << " at " << i;
        }
      }
}

// The global AVERAGE_POOL_2D on AVX2 (int16 partial sums, two accumulators): the reference's
// bytes with every value -128 or 127 (the largest partial sums an int16 lane holds), channel
// counts packed several pixels a vector, 16 a vector, and past the last 16; a pixel count
// with an odd step left over.
TEST(NativeInt8Avx2Pool, GlobalPoolAtBothEndsEqualsTheReference) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  for (int8_t v : {int8_t(-128), int8_t(127)})
    for (uint32_t c : {4u, 16u, 24u, 64u})
      for (Shape hw : {Shape{40, 205, 1, 1}, Shape{41, 203, 1, 1}}) {  // 8200 pixels; 8323 (a step left over)
        const uint32_t h = hw.in_h, w = hw.in_w;
        auto m = std::make_shared<Model>();
        Operand in = q8({1, h, w, c}, 0.031f, -5);
        in.lifetime = Lifetime::MODEL_INPUT;
        std::vector<uint32_t> ins{m->add_operand(in)};
        m->inputs = ins;
        for (int32_t p : {2, 1, 1, int32_t(w), int32_t(h), 0}) ins.push_back(m->add_scalar_i32(p));
        const uint32_t y = m->add_operand(q8({1, 1, 1, c}, 0.031f, -5, Lifetime::MODEL_OUTPUT));
        m->add_operation(T::AVERAGE_POOL_2D, ins, {y});
        m->outputs = {y};
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        std::vector<std::vector<int8_t>> x{std::vector<int8_t>(size_t(h) * w * c, v)};
        for (size_t i = 0; i < x[0].size(); i += 7) x[0][i] = int8_t(i % 256);  // not all alike
        for (int threads : {1, 2}) {
          CpuOptions cpu;
          cpu.avx512 = false;
          std::string kernel;
          EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), run(m, x, "reference", {}, 1, nullptr))
              << int(v) << ", " << c << " channels, width " << w << ", " << threads << " threads";
          EXPECT_EQ(kernel, "native int8 average pool AVX2");
        }
      }
}

}  // namespace
}  // namespace nn
