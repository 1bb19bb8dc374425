// The int8 MUL by a per-channel gate on int16 pairs (CpuOptions::native_int8_gate_pairs;
// Int8Mul::gate_pairs_vnni with AVX-512 VNNI, gate_pairs_avx2 with and without AVX-VNNI):
// every output byte equal to the reference kernel's for every (input byte, gate byte) pair
// at channel counts that put the 64- and 32-element steps across pixels
// at every offset (255, 257), and on random inputs at 1, 13, 17, 63, 65 and 130 channels and
// odd widths, 1 and 2 threads, right shifts 0 to 15 and activations; the switch changes the
// kernel; it does not take a same-shaped MUL, a multiplier of 2^30, a left shift, a right
// shift above 15.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "ops/quant_math.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::has_avx2;
using nn_test::has_avx512_int8;
using nn_test::has_avx512_vnni;
using nn_test::has_avx_vnni;
using nn_test::q8;
using nn_test::run;

struct Scales {
  float a, b, out;
  int32_t za, zb, zo, fuse;
};

// a [1, h, w, c] times a gate [1, 1, 1, c] (or a same-shaped b).
std::shared_ptr<Model> mul(Dims a, Dims b, const Scales& sc) {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_operand(q8(a, sc.a, sc.za, Lifetime::MODEL_INPUT));
  const uint32_t g = m->add_operand(q8(b, sc.b, sc.zb, Lifetime::MODEL_INPUT));
  const uint32_t f = m->add_scalar_i32(sc.fuse);
  const uint32_t y = m->add_operand(q8(a, sc.out, sc.zo, Lifetime::MODEL_OUTPUT));
  m->add_operation(T::MUL, {x, g, f}, {y});
  m->inputs = {x, g};
  m->outputs = {y};
  return m;
}

// Byte-equal to the reference on AVX-512, AVX2 with AVX-VNNI and AVX2 alone, the switch on
// and off, 1 and 2 threads; `pairs`: the pair kernel of the ISA runs with the switch on, never
// otherwise.
void check(const std::shared_ptr<Model>& m, const std::vector<std::vector<int8_t>>& x, bool pairs,
           const std::string& name) {
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << name;
  const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
  ASSERT_FALSE(expected.empty()) << name;
  struct Mode {
    const char* name;
    bool avx512, avx_vnni;
    const char* kernel;  // the pair kernel's name
  };
  std::vector<Mode> modes;
  if (has_avx512_vnni()) modes.push_back({"AVX-512", true, true, "native int8 mul AVX-512 VNNI gate pairs"});
  if (has_avx2() && has_avx_vnni()) modes.push_back({"AVX-VNNI", false, true, "native int8 mul AVX2 gate pairs, AVX-VNNI"});
  if (has_avx2()) modes.push_back({"AVX2", false, false, "native int8 mul AVX2 gate pairs"});
  for (const Mode& mode : modes)
    for (bool on : {true, false})
      for (int threads : {1, 2}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point (the fp32 gate: native_int8_test)
        cpu.avx512 = mode.avx512;
        cpu.avx_vnni = mode.avx_vnni;
        cpu.native_int8_gate_pairs = on;
        std::string kernel;
        const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
        const std::string where = name + " (" + mode.name + (on ? "" : ", switch off") + ", " +
                                  std::to_string(threads) + " threads, " + kernel + ")";
        ASSERT_EQ(got.size(), expected.size()) << where;
        size_t differ = 0, first = got.size();
        for (size_t i = 0; i < got.size(); ++i)
          if (got[i] != expected[i]) {
            if (!differ) first = i;
            ++differ;
          }
        EXPECT_EQ(differ, 0u) << where << ": first at " << first << " (" << int(got[first]) << " vs "
                              << int(expected[first]) << ")";
        EXPECT_EQ(kernel.rfind("native int8 mul", 0), 0u) << where;
        EXPECT_EQ(kernel == mode.kernel, pairs && on) << where;
        EXPECT_EQ(kernel.find("gate pairs") != std::string::npos, pairs && on) << where;
      }
}

std::vector<Scales> scales() {
  std::vector<Scales> v = {{0.105f, 1.f / 256, 0.053f, -124, -128, -122, 1},  // selfie's gate, ReLU
                           {0.9f, 0.9f, 1.f, 0, 0, 0, 0},                      // 0.81: no right shift
                           {0.03f, 0.05f, 0.07f, 11, -7, 2, 3},                // RELU6
                           {0.02f, 0.011f, 0.9f, 127, 127, -128, 0},           // a right shift of 12
                           {0.0021f, 0.0081f, 0.8f, -128, -128, 127, 2}};      // RELU1, a shift of 15
  std::mt19937 rng(5);
  auto r = [&rng](float lo, float hi) { return lo + (hi - lo) * float(rng() % 100000) / 100000.f; };
  for (int i = 0; i < 8; ++i)
    v.push_back({r(0.001f, 0.3f), r(0.001f, 0.3f), r(0.0005f, 0.2f), int32_t(rng() % 256) - 128,
                 int32_t(rng() % 256) - 128, int32_t(rng() % 256) - 128, 0});
  return v;
}

// Whether the gate form takes these scales: a right shift of at most 15, not the multiplier 2^30.
bool gate_form(const Scales& sc) {
  const quant::Multiplier m = quant::quantize_multiplier(double(sc.a) * sc.b / sc.out);
  return m.shift <= 0 && m.shift >= -15 && m.multiplier != (1 << 30);
}

// Pixel p holds p - 128 in every channel, gate channel c holds c % 256 - 128: every pair.
TEST(NativeInt8GatePairs, EveryPairEqualsTheReference) {
  size_t taken = 0;  // not vacuous: most of the scales take the pair form
  for (const Scales& sc : scales()) taken += gate_form(sc);
  EXPECT_GE(taken, 7u);
  for (uint32_t c : {255u, 257u}) {
    std::vector<std::vector<int8_t>> x(2);
    for (int p = 0; p < 256; ++p)
      for (uint32_t j = 0; j < c; ++j) x[0].push_back(static_cast<int8_t>(p - 128));
    for (uint32_t j = 0; j < c; ++j) x[1].push_back(static_cast<int8_t>(int(j % 256) - 128));
    for (const Scales& sc : scales())
      check(mul({1, 256, 1, c}, {1, 1, 1, c}, sc), x, gate_form(sc),
            "every pair x" + std::to_string(c) + " " + std::to_string(sc.a) + " x " + std::to_string(sc.b) + " -> " +
                std::to_string(sc.out));
  }
}

std::vector<std::vector<int8_t>> random_inputs(const Model& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int8_t>> x;
  for (uint32_t i : m.inputs) {
    x.emplace_back(num_elements(m.operands[i].dims));
    for (int8_t& v : x.back()) v = static_cast<int8_t>(int(rng() % 256) - 128);
  }
  return x;
}

TEST(NativeInt8GatePairs, OddShapesEqualTheReference) {
  const std::vector<Scales> sc = scales();
  uint32_t seed = 1;
  for (uint32_t c : {1u, 13u, 17u, 63u, 65u, 130u})
    for (uint32_t w : {1u, 7u, 33u})
      for (size_t s = 0; s < sc.size(); s += 3) {
        auto m = mul({1, 5, w, c}, {1, 1, 1, c}, sc[s]);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        check(m, random_inputs(*m, seed++), gate_form(sc[s]),
              "gate x" + std::to_string(c) + " w" + std::to_string(w) + " scales " + std::to_string(s));
      }
  // Several chunks per thread (16 KB each): 96 x 96 x 24.
  auto m = mul({1, 96, 96, 24}, {1, 1, 1, 24}, sc[0]);
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  check(m, random_inputs(*m, 99), gate_form(sc[0]), "gate 96x96x24");
}

TEST(NativeInt8GatePairs, NotWhereTheGateFormDoesNotApply) {
  // A same-shaped b.
  {
    auto m = mul({1, 5, 7, 19}, {1, 5, 7, 19}, {0.03f, 0.05f, 0.07f, 11, -7, 2, 0});
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    check(m, random_inputs(*m, 3), false, "same-shaped MUL");
  }
  // The multiplier 2^30 (0.5 * 0.25 / 1 = 2^-3).
  {
    auto m = mul({1, 5, 7, 19}, {1, 1, 1, 19}, {0.5f, 0.25f, 1.f, 3, -9, 0, 0});
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    check(m, random_inputs(*m, 4), false, "gate MUL by 2^-3");
  }
  // A right shift of 17 (0.0021 * 0.0017 / 0.8).
  {
    auto m = mul({1, 5, 7, 19}, {1, 1, 1, 19}, {0.0021f, 0.0017f, 0.8f, 3, -9, -20, 0});
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    check(m, random_inputs(*m, 6), false, "gate MUL with a right shift of 17");
  }
  // A left shift (0.5 * 0.5 / 0.01 = 25).
  {
    auto m = mul({1, 5, 7, 19}, {1, 1, 1, 19}, {0.5f, 0.5f, 0.01f, 3, -9, -20, 3});
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    check(m, random_inputs(*m, 5), false, "gate MUL with a left shift");
  }
}

}  // namespace
}  // namespace nn
