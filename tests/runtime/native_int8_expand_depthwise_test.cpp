// An int8 1x1 conv and the int8 depthwise conv that alone reads it run as one op
// (CpuPartition::fuse_int8_expand_depthwise, CpuOptions::int8_expand_depthwise): the fused
// op's output equals the reference kernels' conv then depthwise byte for byte with AVX-512
// VNNI at 2 threads (rows split in two ranges, an image's rows across both in a batch of two;
// a one-row image in one range); the kernel text says "conv+depthwise" and the depthwise is
// among the head's ops. Where it must not apply (1 thread, the AVX2 forms, the expanded tensor
// read twice, a dilated depthwise, a 3x3 producer, the switch off) the two stay steps of
// their own, with the same bytes.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <functional>
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
constexpr int32_t kNone = 0, kRelu6 = 3;

using nn_test::entry_of;
using nn_test::has_avx2;
using nn_test::has_avx512_vnni;
using nn_test::has_avx_vnni;
using nn_test::q8;

// Random per-channel int8 filter [dims] (channel axis `axis`) and int32 bias of `c` channels.
std::pair<uint32_t, uint32_t> weights(Model& m, const Dims& dims, uint32_t axis, uint32_t c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> w(num_elements(dims));
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  const uint32_t f = m.add_constant(OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL, dims, w.data(), w.size());
  m.operands[f].channel_quant.channel_dim = axis;
  for (uint32_t o = 0; o < c; ++o) m.operands[f].channel_quant.scales.push_back(0.002f * (1.f + 0.31f * float(o % 7)));
  std::vector<int32_t> bias(c);
  for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 8001) - 4000;
  const uint32_t b = m.add_constant_i32({c}, bias);
  m.operands[b].scale = 0.f;
  return {f, b};
}

// A CONV_2D kernel x kernel (stride 1, SAME) of x to `out_c` channels.
uint32_t conv(Model& m, uint32_t x, uint32_t out_c, uint32_t kernel, int32_t fuse, uint32_t seed, float scale,
              int32_t zp) {
  const Dims in = m.operands[x].dims;
  auto [f, b] = weights(m, {out_c, kernel, kernel, in[3]}, 0, out_c, seed);
  const uint32_t y = m.add_operand(q8({in[0], in[1], in[2], out_c}, scale, zp));
  m.add_operation(T::CONV_2D,
                  {x, f, b, m.add_scalar_i32(1), m.add_scalar_i32(1), m.add_scalar_i32(1), m.add_scalar_i32(fuse)},
                  {y});
  return y;
}

// A DEPTHWISE_CONV_2D (multiplier 1) with explicit padding {left, right, top, bottom}.
uint32_t depthwise(Model& m, uint32_t x, uint32_t kernel, uint32_t stride, std::array<uint32_t, 4> pad,
                   int32_t fuse, uint32_t dilation, uint32_t seed, float scale, int32_t zp) {
  const Dims in = m.operands[x].dims;
  const uint32_t c = in[3], reach = (kernel - 1) * dilation + 1;
  auto [f, b] = weights(m, {1, kernel, kernel, c}, 3, c, seed);
  const Dims out{in[0], (in[1] + pad[2] + pad[3] - reach) / stride + 1, (in[2] + pad[0] + pad[1] - reach) / stride + 1,
                 c};
  const uint32_t y = m.add_operand(q8(out, scale, zp));
  std::vector<uint32_t> ins = {x, f, b};
  for (uint32_t p : pad) ins.push_back(m.add_scalar_i32(int32_t(p)));
  for (int32_t v : {int32_t(stride), int32_t(stride), 1, fuse}) ins.push_back(m.add_scalar_i32(v));
  if (dilation != 1) {
    ins.push_back(m.add_scalar_bool(false));
    ins.push_back(m.add_scalar_i32(int32_t(dilation)));
    ins.push_back(m.add_scalar_i32(int32_t(dilation)));
  }
  m.add_operation(T::DEPTHWISE_CONV_2D, ins, {y});
  return y;
}

using Outcome = nn_test::Int8Outcome;
using Mode = nn_test::Int8Mode;

// Runs `m` (inputs random int8, seeded by name) on the reference kernels and on the CPU
// delegate in every mode, 1 and 2 threads, the switch on and off: every output byte equal.
// Conv op `conv_op` and depthwise op `dw_op` run as one op when `fused`, the switch is on,
// threads > 1 and AVX-512, else as two (each on a native int8 kernel).
void check(const std::shared_ptr<Model>& m, const std::string& name, uint32_t conv_op, uint32_t dw_op, bool fused) {
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << name;
  const std::vector<std::vector<int8_t>> x = nn_test::random_int8_inputs(*m, name);
  const Outcome expected = nn_test::run_int8(m, x, "reference", {}, 1);
  ASSERT_FALSE(expected.outputs.empty()) << name;
  for (const Mode& mode : nn_test::int8_modes())
    for (int threads : {1, 2})
      for (bool on : {true, false}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
        cpu.adaptive_threads = false;  // the pool's ranges every run
        cpu.avx512 = mode.avx512;
        cpu.avx_vnni = mode.avx_vnni;
        cpu.int8_expand_depthwise = on;
        const Outcome got = nn_test::run_int8(m, x, "cpu", cpu, threads);
        const std::string where = name + " (" + mode.name + ", " + std::to_string(threads) + " threads" +
                                  (on ? "" : ", switch off") + ")";
        const StepTiming* head = entry_of(got.kernels, conv_op);
        const StepTiming* second = entry_of(got.kernels, dw_op);
        ASSERT_TRUE(head && second) << where;
        EXPECT_EQ(head->kernel.rfind("native int8 ", 0), 0u) << where << ": the conv ran on " << head->kernel;
        if (fused && on && threads > 1 && mode.avx512) {
          EXPECT_EQ(head, second) << where << ": the depthwise ran on " << second->kernel;
          EXPECT_EQ(head->kernel.rfind("native int8 conv+depthwise ", 0), 0u) << where << ": " << head->kernel;
        } else {
          EXPECT_NE(head, second) << where << ": the depthwise ran in " << head->kernel;
          EXPECT_EQ(head->kernel.find("conv+depthwise"), std::string::npos) << where << ": " << head->kernel;
        }
        ASSERT_EQ(got.outputs.size(), expected.outputs.size()) << where;
        for (size_t o = 0; o < got.outputs.size(); ++o) {
          size_t differ = 0;
          for (size_t i = 0; i < got.outputs[o].size(); ++i) differ += got.outputs[o][i] != expected.outputs[o][i];
          EXPECT_EQ(differ, 0u) << where << ": " << differ << " of " << got.outputs[o].size() << " bytes of output "
                                << o << " differ from the reference";
        }
      }
}

struct Case {
  uint32_t batch, h, w, in_c, c, kernel, stride;
  std::array<uint32_t, 4> pad;  // left, right, top, bottom
  int32_t conv_fuse, dw_fuse;
};

// Odd heights and widths (rows of 3 to 130 pixels), expanded channels not multiples of 16 or 64 (and a few that are),
// 3x3 and 5x5, stride 1 and 2, symmetric, one-sided and no padding, RELU6 or none on each.
TEST(NativeInt8ExpandDepthwise, EqualsTheReference) {
  const Case cases[] = {
      {1, 9, 11, 8, 24, 3, 1, {1, 1, 1, 1}, kRelu6, kNone},  {1, 7, 13, 16, 37, 3, 2, {1, 1, 1, 1}, kNone, kRelu6},
      {1, 8, 8, 16, 96, 3, 2, {0, 1, 0, 1}, kRelu6, kRelu6}, {2, 5, 9, 5, 13, 3, 1, {1, 1, 1, 1}, kNone, kNone},
      {1, 11, 7, 24, 70, 5, 1, {2, 2, 2, 2}, kRelu6, kNone}, {1, 13, 9, 12, 16, 5, 2, {1, 2, 1, 2}, kNone, kRelu6},
      {1, 6, 5, 3, 1, 3, 1, {0, 0, 0, 0}, kNone, kNone},     {1, 1, 17, 32, 64, 3, 1, {1, 1, 1, 1}, kRelu6, kNone},
      {1, 10, 3, 40, 130, 3, 2, {1, 1, 0, 2}, kNone, kNone},
      // Wide rows: the ring holds fewer rows than the image and wraps.
      {1, 12, 67, 8, 24, 3, 1, {1, 1, 1, 1}, kRelu6, kNone},  {2, 11, 130, 16, 20, 5, 2, {2, 2, 2, 2}, kNone, kNone},
      {1, 9, 129, 4, 16, 3, 2, {0, 1, 0, 1}, kNone, kRelu6},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    auto m = std::make_shared<Model>();
    const uint32_t x = m->add_operand(q8({c.batch, c.h, c.w, c.in_c}, 0.05f, -17, Lifetime::MODEL_INPUT));
    const uint32_t e = conv(*m, x, c.c, 1, c.conv_fuse, seed++, 0.06f, 12);
    const uint32_t d = depthwise(*m, e, c.kernel, c.stride, c.pad, c.dw_fuse, 1, seed++, 0.03f, -100);
    m->operands[d].lifetime = Lifetime::MODEL_OUTPUT;
    m->inputs = {x};
    m->outputs = {d};
    check(m,
          std::to_string(c.batch) + "x" + std::to_string(c.h) + "x" + std::to_string(c.w) + "x" +
              std::to_string(c.in_c) + " -> x" + std::to_string(c.c) + " " + std::to_string(c.kernel) + "x" +
              std::to_string(c.kernel) + "/" + std::to_string(c.stride),
          0, 1, true);
  }
}

// The expanded tensor also a model output, or read by a second op; a dilated depthwise; a
// 3x3 conv as the producer: no fusion, the same bytes.
TEST(NativeInt8ExpandDepthwise, DoesNotApplyWhereItMustNot) {
  for (uint32_t c : {13u, 32u}) {
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 9, 7, 8}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t e = conv(*m, x, c, 1, kRelu6, 10 + c, 0.06f, 12);
      const uint32_t d = depthwise(*m, e, 3, 1, {1, 1, 1, 1}, kNone, 1, 20 + c, 0.03f, -100);
      const uint32_t d2 = depthwise(*m, e, 3, 2, {1, 1, 1, 1}, kNone, 1, 30 + c, 0.04f, 7);
      m->operands[d].lifetime = Lifetime::MODEL_OUTPUT;
      m->operands[d2].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x};
      m->outputs = {d, d2};
      check(m, "expanded x" + std::to_string(c) + " read twice", 0, 1, false);
    }
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 9, 7, 8}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t e = conv(*m, x, c, 1, kRelu6, 40 + c, 0.06f, 12);
      const uint32_t d = depthwise(*m, e, 3, 1, {1, 1, 1, 1}, kNone, 1, 50 + c, 0.03f, -100);
      m->operands[e].lifetime = Lifetime::MODEL_OUTPUT;
      m->operands[d].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x};
      m->outputs = {d, e};
      check(m, "expanded x" + std::to_string(c) + " a model output", 0, 1, false);
    }
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 11, 9, 8}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t e = conv(*m, x, c, 1, kNone, 60 + c, 0.06f, 12);
      const uint32_t d = depthwise(*m, e, 3, 1, {2, 2, 2, 2}, kNone, 2, 70 + c, 0.03f, -100);
      m->operands[d].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x};
      m->outputs = {d};
      // A dilated 3x3 depthwise runs on the AVX-512 int32 lanes (no row kernel), or XNNPACK's.
      ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
      std::mt19937 rng(c);
      std::vector<std::vector<int8_t>> in(1, std::vector<int8_t>(num_elements(m->operands[x].dims)));
      for (int8_t& v : in[0]) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
      const Outcome expected = nn_test::run_int8(m, in, "reference", {}, 1);
      CpuOptions exact;
      exact.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
      for (int threads : {1, 2}) {
        const Outcome got = nn_test::run_int8(m, in, "cpu", exact, threads);
        const StepTiming* head = entry_of(got.kernels, 0);
        const StepTiming* second = entry_of(got.kernels, 1);
        ASSERT_TRUE(head && second);
        EXPECT_NE(head, second) << "dilated: fused into " << head->kernel;
        EXPECT_EQ(head->kernel.find("conv+depthwise"), std::string::npos) << head->kernel;
        if (second->kernel.rfind("native int8 ", 0) == 0) {
          EXPECT_EQ(got.outputs, expected.outputs);
        }
      }
    }
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 9, 7, 8}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t e = conv(*m, x, c, 3, kRelu6, 80 + c, 0.06f, 12);
      const uint32_t d = depthwise(*m, e, 3, 1, {1, 1, 1, 1}, kNone, 1, 90 + c, 0.03f, -100);
      m->operands[d].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x};
      m->outputs = {d};
      check(m, "3x3 conv x" + std::to_string(c) + " into a depthwise", 0, 1, false);
    }
  }
}

// The switch's environment variable (CpuOptions::from_environment, the one place env is read).
TEST(NativeInt8ExpandDepthwise, EnvironmentTurnsItOff) {
  nn_test::expect_env_turns_off("NN_NO_INT8_EXPAND_DEPTHWISE", &CpuOptions::int8_expand_depthwise);
}

}  // namespace
}  // namespace nn
