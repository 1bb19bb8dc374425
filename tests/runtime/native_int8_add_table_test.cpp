// A same-shaped int8 ADD through Int8AddTable's four byte tables (AVX-512 VBMI,
// CpuOptions::native_int8_add_table): the CPU delegate's output equals the reference kernel's
// byte for byte over every one of the 65536 input pairs, each fuse code, 1 and 2 threads, and
// the step's kernel is the table's. It does not run where it must not: the switch off, no
// AVX-512 (the AVX2 mode), a broadcasting ADD, or scales whose tables would round a tie
// differently from NNAPI (Int8AddTable::build refuses them).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8_add.h"
#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::has_avx512_vbmi;
using nn_test::q8;
using cpu::Int8AddMath;
using cpu::Int8AddTable;
using cpu::NativeIsa;

constexpr const char* kTable = "native int8 add AVX-512 VBMI table";

struct Params {
  float sa, sb, so;
  int32_t za, zb, zo, fuse;
};

std::string describe(const Params& p) {
  return "sa " + std::to_string(p.sa) + " za " + std::to_string(p.za) + " sb " + std::to_string(p.sb) + " zb " +
         std::to_string(p.zb) + " so " + std::to_string(p.so) + " zo " + std::to_string(p.zo) + " fuse " +
         std::to_string(p.fuse);
}

// out = ADD(a, b) of [1, h, w, c] tensors (b of b_dims when given: a broadcast).
std::shared_ptr<Model> add_model(const Params& p, Dims dims, Dims b_dims = {}) {
  auto m = std::make_shared<Model>();
  const uint32_t a = m->add_operand(q8(dims, p.sa, p.za, Lifetime::MODEL_INPUT));
  const uint32_t b = m->add_operand(q8(b_dims.empty() ? dims : b_dims, p.sb, p.zb, Lifetime::MODEL_INPUT));
  const uint32_t z = m->add_operand(q8(dims, p.so, p.zo, Lifetime::MODEL_OUTPUT));
  m->add_operation(T::ADD, {a, b, m->add_scalar_i32(p.fuse)}, {z});
  m->inputs = {a, b};
  m->outputs = {z};
  EXPECT_TRUE(m->validate_and_infer_shapes().is_ok());
  return m;
}

// Inputs holding every (a, b) byte pair, b's order scrambled, 65536 + 77 values (a tail
// shorter than a vector).
std::vector<std::vector<int8_t>> every_pair(size_t n) {
  std::vector<int8_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<int8_t>(i & 255);
    b[i] = static_cast<int8_t>(((i >> 8) * 167 + 29) & 255);
  }
  return {a, b};
}

struct Ran {
  std::vector<int8_t> out;
  std::string kernel;
};

Ran run(const std::shared_ptr<Model>& m, const std::vector<std::vector<int8_t>>& x, const char* delegate,
        const CpuOptions& cpu, int threads) {
  Ran r;
  r.out = nn_test::run(m, x, delegate, cpu, threads, &r.kernel);
  return r;
}

// Parameters the tables take (each checked: build() returns true for them).
const std::vector<Params> kTaken = {
    {0.0513f, 0.0797f, 0.1031f, -17, 9, 3, 0},    // b the larger scale
    {0.0797f, 0.0513f, 0.1031f, 9, -17, -5, 0},   // a the larger
    {0.0419f, 0.0419f, 0.0933f, 0, 0, -20, 1},    // equal scales, ReLU
    {0.0213f, 0.1093f, 0.1171f, -128, 5, 20, 3},  // ReLU6
    {0.0987f, 0.0311f, 0.0529f, 12, -3, 0, 2},    // RELU1, output scale below an input's
    {0.0313f, 0.0171f, 0.0397f, -60, 44, -30, 0},
    // selfie's op 91: B spans more than a byte (the split form).
    {0.1487148106098175f, 0.22154055535793304f, 0.21141359210014343f, 32, 12, 16, 0},
};

TEST(NativeInt8AddTable, EveryInputPairEqualsTheReference) {
  if (!has_avx512_vbmi() || !nn_test::has_avx512_int8()) GTEST_SKIP() << "no AVX-512 VBMI";
  const auto x = every_pair(65536 + 77);
  for (const Params& p : kTaken) {
    const auto m = add_model(p, {1, 1, 65536 + 77, 1});
    const Ran want = run(m, x, "reference", {}, 1);
    for (int threads : {1, 2}) {
      const std::string where = describe(p) + ", " + std::to_string(threads) + " threads";
      const Ran got = run(m, x, "cpu", {}, threads);
      ASSERT_EQ(got.kernel, kTable) << where;
      ASSERT_EQ(got.out.size(), want.out.size()) << where;
      size_t differ = 0;
      for (size_t i = 0; i < got.out.size(); ++i) differ += got.out[i] != want.out[i];
      EXPECT_EQ(differ, 0u) << where << ": " << differ << " of " << got.out.size() << " bytes differ";
    }
  }
}

TEST(NativeInt8AddTable, ImageShapesEqualTheReference) {
  if (!has_avx512_vbmi() || !nn_test::has_avx512_int8()) GTEST_SKIP() << "no AVX-512 VBMI";
  const Params p = kTaken[0];
  for (const Dims& d : {Dims{1, 7, 9, 16}, Dims{1, 33, 31, 24}, Dims{1, 1, 1, 3}}) {
    const auto m = add_model(p, d);
    std::vector<std::vector<int8_t>> x(2, std::vector<int8_t>(num_elements(d)));
    for (size_t i = 0; i < x[0].size(); ++i) {
      x[0][i] = static_cast<int8_t>(i * 37 + 11);
      x[1][i] = static_cast<int8_t>(i * 91 + 5);
    }
    const Ran want = run(m, x, "reference", {}, 1);
    const Ran got = run(m, x, "cpu", {}, 2);
    EXPECT_EQ(got.kernel, kTable);
    EXPECT_EQ(got.out, want.out) << num_elements(d) << " values";
  }
}

TEST(NativeInt8AddTable, NotWhereItMustNotRun) {
  const Params p = kTaken[0];
  const auto x = every_pair(4096);
  const auto m = add_model(p, {1, 1, 4096, 1});
  CpuOptions off;
  off.native_int8_add_table = false;
  EXPECT_NE(run(m, x, "cpu", off, 1).kernel, kTable) << "switch off";
  CpuOptions avx2;
  avx2.avx512 = false;
  EXPECT_NE(run(m, x, "cpu", avx2, 1).kernel, kTable) << "AVX2 mode";
  // A per-channel broadcast.
  const auto bm = add_model(p, {1, 8, 8, 16}, {1, 1, 1, 16});
  std::vector<std::vector<int8_t>> bx = {std::vector<int8_t>(1024, 3), std::vector<int8_t>(16, -7)};
  EXPECT_NE(run(bm, bx, "cpu", {}, 1).kernel, kTable) << "broadcast";
}

// Int8AddTable::build itself: it takes the parameters above and refuses some (round scale
// ratios, where the floor form rounds a negative tie upward), and the session then leaves
// such an ADD to another kernel.
TEST(NativeInt8AddTable, BuildRefusesTablesThatDifferFromNnapi) {
  NativeIsa isa;
  for (const Params& p : kTaken) {
    Int8AddTable t;
    EXPECT_TRUE(t.build(Int8AddMath(q8({4}, p.sa, p.za), q8({4}, p.sb, p.zb), q8({4}, p.so, p.zo), p.fuse, isa)))
        << describe(p);
  }
  size_t refused = 0, tried = 0;
  Params refused_p{};
  for (int i = 1; i <= 24; ++i)
    for (int j = 1; j <= 12; ++j) {
      // Round ratios (i = 2j: a tie on every pair whose sum is an odd multiple of 1/2) and
      // others.
      const Params p{0.01f * float(i), 0.005f * float(j), 0.02f + 0.001f * float(i + j), 3, -1, 0, 0};
      Int8AddTable t;
      ++tried;
      if (!t.build(Int8AddMath(q8({4}, p.sa, p.za), q8({4}, p.sb, p.zb), q8({4}, p.so, p.zo), p.fuse, isa))) {
        if (refused++ == 0) refused_p = p;
        continue;
      }
      // Taken: every pair agrees with the arithmetic (build's own check, repeated here).
      Int8AddMath math(q8({4}, p.sa, p.za), q8({4}, p.sb, p.zb), q8({4}, p.so, p.zo), p.fuse, isa);
      for (int a = -128; a < 128; a += 3)
        for (int b = -128; b < 128; ++b)
          ASSERT_EQ(t.scalar(int8_t(a), int8_t(b)), math.scalar(a, b)) << describe(p) << " a " << a << " b " << b;
    }
  EXPECT_LT(refused, tried) << "no scales taken in the scan";
  ASSERT_GT(refused, 0u) << "no refused scales in the scan";
  if (has_avx512_vbmi() && nn_test::has_avx512_int8()) {
    const auto m = add_model(refused_p, {1, 1, 4096, 1});
    EXPECT_NE(run(m, every_pair(4096), "cpu", {}, 1).kernel, kTable) << describe(refused_p);
  }
}

}  // namespace
}  // namespace nn
