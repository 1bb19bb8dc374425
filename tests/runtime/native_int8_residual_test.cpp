// An int8 residual ADD run by the native int8 conv or depthwise conv that writes one of its
// inputs (CpuPartition::fuse_int8_residual_adds): by NNAPI's fixed-point arithmetic
// (CpuOptions::native_int8_residual) or, with AVX-512 VBMI, by the ADD's byte tables
// (CpuOptions::native_int8_residual_table, on by default). The fused op's output equals the
// reference kernels' conv then ADD byte for byte, on the AVX-512 VNNI, AVX2 and AVX2 +
// AVX-VNNI forms, 1 and 2 threads; the kernel text says "+ADD" ("+ADD table") and lists the
// ADD among the head's ops. Where the fusion must not apply (the conv's output read twice, a
// broadcast ADD, both switches off, the tables without VBMI) the ADD stays an op of its own.
#include <gtest/gtest.h>

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
constexpr int32_t kNone = 0, kRelu = 1, kRelu6 = 3;

using nn_test::has_avx2;
using nn_test::has_avx512_vbmi;
using nn_test::has_avx512_vnni;
using nn_test::has_avx_vnni;
using nn_test::entry_of;
using nn_test::q8;

using nn_test::int8_conv;
using nn_test::int8_add;

using Outcome = nn_test::Int8Outcome;
using Mode = nn_test::Int8Mode;

// The fused ADD's forms: NNAPI's arithmetic, the byte tables, neither (both switches off).
enum class Form { kArithmetic, kTable, kOff };

CpuOptions with_form(CpuOptions cpu, Form form) {
  cpu.native_int8_residual = form == Form::kArithmetic;
  cpu.native_int8_residual_table = form == Form::kTable;
  return cpu;
}

// Runs `m` (model inputs random int8, seeded by name) on the reference kernels and on the CPU
// delegate in every mode and form at 1 and 2 threads: every output byte equal. `conv_op` is
// the conv expected to run ADD op `add_op` (`fused`: by the arithmetic always, by the tables
// on AVX-512 with VBMI, as the ADD's scales here all give exact tables), else the ADD must be
// an entry of its own.
void check(const std::shared_ptr<Model>& m, const std::string& name, uint32_t conv_op, uint32_t add_op,
           bool fused) {
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << name;
  const std::vector<std::vector<int8_t>> x = nn_test::random_int8_inputs(*m, name);
  const Outcome expected = nn_test::run_int8(m, x, "reference", {}, 1);
  ASSERT_FALSE(expected.outputs.empty()) << name;
  for (const Mode& mode : nn_test::int8_modes())
    for (int threads : {1, 2})
      for (Form form : {Form::kArithmetic, Form::kTable, Form::kOff}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
        cpu.avx512 = mode.avx512;
        cpu.avx_vnni = mode.avx_vnni;
        cpu = with_form(cpu, form);
        const Outcome got = nn_test::run_int8(m, x, "cpu", cpu, threads);
        const std::string where = name + " (" + mode.name + ", " + std::to_string(threads) + " threads" +
                                  (form == Form::kArithmetic ? ", arithmetic"
                                   : form == Form::kTable    ? ", tables"
                                                             : ", switches off") +
                                  ")";
        const StepTiming* head = entry_of(got.kernels, conv_op);
        const StepTiming* adder = entry_of(got.kernels, add_op);
        ASSERT_TRUE(head && adder) << where;
        ASSERT_EQ(head->kernel.rfind("native int8 ", 0), 0u) << where << ": the conv ran on " << head->kernel;
        const bool fuses = fused && (form == Form::kArithmetic ||
                                     (form == Form::kTable && mode.avx512 && has_avx512_vbmi()));
        if (fuses) {
          EXPECT_EQ(head, adder) << where << ": the ADD ran on " << adder->kernel;
          EXPECT_NE(head->kernel.find(" +ADD"), std::string::npos) << where << ": " << head->kernel;
          EXPECT_EQ(head->kernel.find(" +ADD table") != std::string::npos, form == Form::kTable)
              << where << ": " << head->kernel;
          ASSERT_EQ(got.outputs.size(), expected.outputs.size());
          for (size_t o = 0; o < got.outputs.size(); ++o) {
            size_t differ = 0;
            for (size_t i = 0; i < got.outputs[o].size(); ++i) differ += got.outputs[o][i] != expected.outputs[o][i];
            EXPECT_EQ(differ, 0u) << where << ": " << differ << " of " << got.outputs[o].size()
                                  << " bytes of output " << o << " differ from the reference";
          }
        } else {
          EXPECT_NE(head, adder) << where << ": the ADD ran in " << head->kernel;
          EXPECT_EQ(head->kernel.find("+ADD"), std::string::npos) << where << ": " << head->kernel;
          // XNNPACK's qs8 add rounds once in its own way: within one step.
          for (size_t o = 0; o < got.outputs.size(); ++o)
            for (size_t i = 0; i < got.outputs[o].size(); ++i)
              ASSERT_LE(std::abs(got.outputs[o][i] - expected.outputs[o][i]), 1) << where << " output " << o;
        }
      }
}

// Odd sizes and channel counts (vector tails, full vectors, several of them).
constexpr uint32_t kChannels[] = {1, 13, 16, 24, 37};

// A projection 1x1 conv and ADD(skip) as MobileNetV2's blocks: the skip a model input, either
// side of the ADD, with and without an activation on the ADD.
TEST(NativeInt8Residual, PointwiseConvAddEqualsTheReference) {
  uint32_t seed = 1;
  for (uint32_t c : kChannels)
    for (int32_t fuse : {kNone, kRelu, kRelu6})
      for (bool conv_first : {true, false}) {
        auto m = std::make_shared<Model>();
        const uint32_t x = m->add_operand(q8({1, 7, 9, 2 * c + 3}, 0.05f, -17, Lifetime::MODEL_INPUT));
        const uint32_t skip = m->add_operand(q8({1, 7, 9, c}, 0.08f, 9, Lifetime::MODEL_INPUT));
        const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, kNone, seed++, 0.11f, 5);
        const uint32_t z = conv_first ? int8_add(*m, y, skip, fuse, 0.13f, -6) : int8_add(*m, skip, y, fuse, 0.13f, -6);
        m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
        m->inputs = {x, skip};
        m->outputs = {z};
        check(m, "1x1 conv x" + std::to_string(c) + " + ADD fuse " + std::to_string(fuse) +
                     (conv_first ? "" : ", skip first"), 0, 1, true);
      }
}

// A 3x3 conv (stride 1 and 2, SAME) with its own RELU6, then ADD with ReLU.
TEST(NativeInt8Residual, WindowConvAddEqualsTheReference) {
  uint32_t seed = 100;
  for (uint32_t c : kChannels)
    for (uint32_t stride : {1u, 2u}) {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 11, 9, 5}, 0.04f, 3, Lifetime::MODEL_INPUT));
      const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 3, stride, kRelu6, seed++, 0.07f, -100);
      const uint32_t skip =
          m->add_operand(q8(m->operands[y].dims, 0.02f, -40, Lifetime::MODEL_INPUT));
      const uint32_t z = int8_add(*m, y, skip, kRelu, 0.09f, -128);
      m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x, skip};
      m->outputs = {z};
      check(m, "3x3/" + std::to_string(stride) + " conv x" + std::to_string(c) + " + ADD", 0, 1, true);
    }
}

// Selfie's decoder block: conv -> depthwise 3x3 -> ADD(conv's output, depthwise's output).
// The conv's output has two readers (no fusion for the conv); the depthwise takes the ADD,
// its own input as the residual. 5x5 too (AVX2 has both).
TEST(NativeInt8Residual, DepthwiseAddOfItsOwnInputEqualsTheReference) {
  uint32_t seed = 200;
  for (uint32_t c : kChannels)
    for (uint32_t kernel : {3u, 5u})
      for (int32_t fuse : {kNone, kRelu}) {
        // Wide 3x3 depthwise convs are XNNPACK's unless VBMI's VNNI form runs them.
        if (kernel == 3 && c > 32 && !has_avx512_vbmi()) continue;
        auto m = std::make_shared<Model>();
        const uint32_t x = m->add_operand(q8({1, 9, 13, 8}, 0.05f, -17, Lifetime::MODEL_INPUT));
        const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, kNone, seed++, 0.06f, 12);
        const uint32_t d = int8_conv(*m, y, T::DEPTHWISE_CONV_2D, c, kernel, 1, kRelu6, seed++, 0.03f, -128);
        const uint32_t z = int8_add(*m, y, d, fuse, 0.075f, -20);
        m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
        m->inputs = {x};
        m->outputs = {z};
        check(m, std::to_string(kernel) + "x" + std::to_string(kernel) + " depthwise x" + std::to_string(c) +
                     " + ADD(its input) fuse " + std::to_string(fuse),
              1, 2, true);
      }
}

// Two convs of one input, their outputs added: the first conv cannot take the ADD (the other
// input is written after it runs), the second can, with the first's output as the residual.
TEST(NativeInt8Residual, TwoConvsIntoOneAddFuseIntoTheLaterOne) {
  for (uint32_t c : {13u, 16u}) {
    auto m = std::make_shared<Model>();
    const uint32_t x = m->add_operand(q8({1, 7, 9, 11}, 0.05f, -17, Lifetime::MODEL_INPUT));
    const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, kNone, 500 + c, 0.11f, 5);
    const uint32_t r = int8_conv(*m, x, T::CONV_2D, c, 3, 1, kRelu, 510 + c, 0.07f, -60);
    const uint32_t z = int8_add(*m, y, r, kNone, 0.13f, -6);
    m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
    m->inputs = {x};
    m->outputs = {z};
    check(m, "two convs x" + std::to_string(c) + " + ADD", 1, 2, true);
  }
}

// Every pair of a conv output byte and a residual byte: a one-channel 1x1 conv whose output
// runs through the int8 range over the rows of a 256 x 256 image (input row - 128), the
// residual the column - 128; ADD scales and zero points that put the rounding steps in many
// places (equal input scales, each side the larger), with and without RELU.
TEST(NativeInt8Residual, EveryPairOfConvOutputAndResidualEqualsTheReference) {
  std::vector<std::vector<int8_t>> x(2);
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 256; ++j) {
      x[0].push_back(static_cast<int8_t>(i - 128));
      x[1].push_back(static_cast<int8_t>(j - 128));
    }
  std::mt19937 rng(5);
  int tables_fused = 0;
  for (int trial = 0; trial < 12; ++trial) {
    auto scale = [&rng] { return 0.002f + 0.2f * float(rng() % 10000) / 10000.f; };
    const float conv_scale = scale(), res_scale = trial % 4 == 0 ? conv_scale : scale(), out_scale = scale();
    const int32_t zr = int32_t(rng() % 256) - 128, zo = int32_t(rng() % 256) - 128;
    auto m = std::make_shared<Model>();
    const uint32_t in = m->add_operand(q8({1, 256, 256, 1}, 0.05f, 0, Lifetime::MODEL_INPUT));
    const uint32_t skip = m->add_operand(q8({1, 256, 256, 1}, res_scale, zr, Lifetime::MODEL_INPUT));
    // 0.05 * 0.002 * 127 * 128 / conv_scale: about +-1.6 / conv_scale steps, past the int8 range
    const uint32_t y = int8_conv(*m, in, T::CONV_2D, 1, 1, 1, kNone, 600 + trial, conv_scale, 0, 127);
    const uint32_t z = int8_add(*m, y, skip, trial % 3 == 1 ? kRelu : kNone, out_scale, zo);
    m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
    m->inputs = {in, skip};
    m->outputs = {z};
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    const Outcome expected = nn_test::run_int8(m, x, "reference", {}, 1);
    ASSERT_EQ(expected.outputs.size(), 1u);
    for (const Mode& mode : nn_test::int8_modes())
      for (Form form : {Form::kArithmetic, Form::kTable}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
        cpu.avx512 = mode.avx512;
        cpu.avx_vnni = mode.avx_vnni;
        cpu = with_form(cpu, form);
        const Outcome got = nn_test::run_int8(m, x, "cpu", cpu, 2);
        ASSERT_FALSE(got.kernels.empty());
        // The tables fuse only where they give NNAPI's bytes for every pair; where they do
        // not, the ADD is a step of its own (XNNPACK's: within one step).
        const bool by_table = got.kernels[0].kernel.find(" +ADD table") != std::string::npos;
        const bool fused = got.kernels[0].kernel.find(" +ADD") != std::string::npos;
        if (form == Form::kArithmetic) {
          EXPECT_TRUE(fused) << got.kernels[0].kernel;
        } else {
          EXPECT_EQ(fused, by_table) << got.kernels[0].kernel;
        }
        if (!(mode.avx512 && has_avx512_vbmi())) {
          EXPECT_FALSE(by_table) << got.kernels[0].kernel;
        }
        tables_fused += by_table;
        size_t differ = 0, far = 0;
        for (size_t i = 0; i < got.outputs[0].size(); ++i) {
          differ += got.outputs[0][i] != expected.outputs[0][i];
          far += std::abs(got.outputs[0][i] - expected.outputs[0][i]) > 1;
        }
        EXPECT_EQ(fused ? differ : far, 0u) << "trial " << trial << " (" << mode.name
                                            << (form == Form::kTable ? ", tables" : ", arithmetic") << "): "
                                            << differ << " of 65536 differ";
      }
  }
  if (has_avx512_vbmi()) {
    EXPECT_GT(tables_fused, 0) << "no trial's ADD fused by its tables";
  }
}

// Where the fusion must not apply: the conv's output read by a second op too, and an ADD that
// broadcasts the other input over the pixels.
TEST(NativeInt8Residual, AddStaysSeparateWhereItCannotFuse) {
  for (uint32_t c : {13u, 16u}) {
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 7, 9, 11}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t skip = m->add_operand(q8({1, 7, 9, c}, 0.08f, 9, Lifetime::MODEL_INPUT));
      const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, kNone, 300 + c, 0.11f, 5);
      const uint32_t z = int8_add(*m, y, skip, kNone, 0.13f, -6);
      const uint32_t z2 = int8_add(*m, y, y, kNone, 0.2f, 0);  // a second reader of the conv's output
      m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
      m->operands[z2].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x, skip};
      m->outputs = {z, z2};
      check(m, "1x1 conv x" + std::to_string(c) + " read twice", 0, 1, false);
    }
    {
      auto m = std::make_shared<Model>();
      const uint32_t x = m->add_operand(q8({1, 7, 9, 11}, 0.05f, -17, Lifetime::MODEL_INPUT));
      const uint32_t skip = m->add_operand(q8({1, 1, 1, c}, 0.08f, 9, Lifetime::MODEL_INPUT));
      const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, kNone, 310 + c, 0.11f, 5);
      const uint32_t z = int8_add(*m, y, skip, kNone, 0.13f, -6);
      m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
      m->inputs = {x, skip};
      m->outputs = {z};
      check(m, "1x1 conv x" + std::to_string(c) + " + broadcast ADD", 0, 1, false);
    }
  }
}

// NN_NO_NATIVE_INT8_RESIDUAL_TABLE=1 turns the table form off for tools and bench.
TEST(NativeInt8Residual, EnvironmentTurnsTheTablesOff) {
  nn_test::expect_env_turns_off("NN_NO_NATIVE_INT8_RESIDUAL_TABLE", &CpuOptions::native_int8_residual_table);
}

}  // namespace
}  // namespace nn
