// An int8 table op (HARD_SWISH, LOGISTIC, TANH) applied by the native int8 conv or depthwise
// conv whose output it alone reads (CpuPartition::fuse_int8_conv_tables,
// CpuOptions::int8_conv_table): the fused op writes the table op's output, byte-equal to the
// reference kernels' conv then table, on every int8 form this CPU has, 1 and 2 threads; its
// kernel text names the table and lists the table op among its ops. Where it must not apply
// (the conv's output read twice, the switch off) the table op is a step of its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::entry_of;
using nn_test::int8_conv;
using nn_test::q8;

// The table op `type` of x: HARD_SWISH and TANH at the given output quantization, LOGISTIC
// at NNAPI's fixed 1/256, -128.
uint32_t table_op(Model& m, uint32_t x, T type) {
  const Operand out = type == T::LOGISTIC ? q8(m.operands[x].dims, 1.f / 256, -128)
                      : type == T::TANH   ? q8(m.operands[x].dims, 1.f / 128, 0)
                                          : q8(m.operands[x].dims, 0.0264f, -114);
  const uint32_t y = m.add_operand(out);
  m.add_operation(type, {x}, {y});
  return y;
}

// Runs `m` on the reference kernels and on the CPU delegate (every int8 form, 1 and 2
// threads, the switch on and off): every byte equal. `conv_op` is expected to run `table_op`
// where `fused` and the switch is on.
void check(const std::shared_ptr<Model>& m, const std::string& name, uint32_t conv_op, uint32_t table,
           bool fused) {
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << name;
  const std::vector<std::vector<int8_t>> x = nn_test::random_int8_inputs(*m, name);
  const nn_test::Int8Outcome expected = nn_test::run_int8(m, x, "reference", {}, 1);
  ASSERT_FALSE(expected.outputs.empty()) << name;
  for (const nn_test::Int8Mode& mode : nn_test::int8_modes())
    for (int threads : {1, 2})
      for (bool on : {true, false}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
        cpu.avx512 = mode.avx512;
        cpu.avx_vnni = mode.avx_vnni;
        cpu.int8_conv_table = on;
        const nn_test::Int8Outcome got = nn_test::run_int8(m, x, "cpu", cpu, threads);
        const std::string where =
            name + " (" + mode.name + ", " + std::to_string(threads) + " threads" + (on ? "" : ", switch off") + ")";
        const StepTiming* head = entry_of(got.kernels, conv_op);
        const StepTiming* lookup = entry_of(got.kernels, table);
        ASSERT_TRUE(head && lookup) << where;
        ASSERT_EQ(head->kernel.rfind("native int8 ", 0), 0u) << where << ": the conv ran on " << head->kernel;
        // LOGISTIC is native (a table) with AVX-512 VBMI only; else XNNPACK's, no table to fuse.
        const bool native_table = m->operations[table].type != T::LOGISTIC || (mode.avx512 && nn_test::has_avx512_vbmi());
        const bool fuses = fused && on && native_table;
        EXPECT_EQ(head == lookup, fuses) << where << ": " << head->kernel << " / " << lookup->kernel;
        EXPECT_EQ(head->kernel.find(" table") != std::string::npos && head->kernel.find("+ADD") == std::string::npos,
                  fuses)
            << where << ": " << head->kernel;
        ASSERT_EQ(got.outputs.size(), expected.outputs.size()) << where;
        // XNNPACK's LOGISTIC rounds its own way: within one step.
        const int tolerance = lookup->kernel == "xnnpack" ? 1 : 0;
        for (size_t o = 0; o < got.outputs.size(); ++o) {
          size_t differ = 0;
          for (size_t i = 0; i < got.outputs[o].size(); ++i)
            differ += std::abs(got.outputs[o][i] - expected.outputs[o][i]) > tolerance;
          EXPECT_EQ(differ, 0u) << where << ": " << differ << " of " << got.outputs[o].size() << " bytes of output "
                                << o << " differ";
        }
      }
}

constexpr uint32_t kChannels[] = {1, 13, 16, 24, 37};

// A 1x1 conv, a 3x3 stride-2 conv and an RGB stem (a window conv) into each table op.
TEST(NativeInt8ConvTable, ConvThenTableEqualsTheReference) {
  uint32_t seed = 1;
  for (uint32_t c : kChannels)
    for (T type : {T::HARD_SWISH, T::LOGISTIC, T::TANH})
      for (uint32_t kernel : {1u, 3u}) {
        auto m = std::make_shared<Model>();
        const uint32_t x = m->add_operand(q8({2, 7, 9, kernel == 3 ? 3u : 2 * c + 3}, 0.05f, -17, Lifetime::MODEL_INPUT));
        const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, kernel, kernel == 3 ? 2 : 1, 0, seed++, 0.11f, 5);
        const uint32_t z = table_op(*m, y, type);
        m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
        m->inputs = {x};
        m->outputs = {z};
        check(m, std::to_string(kernel) + "x" + std::to_string(kernel) + " conv x" + std::to_string(c) + " + " +
                     std::string(operation_type_name(type)),
              0, 1, true);
      }
}

// 3x3 and 5x5 depthwise convs (stride 1: the paired rows; stride 2) into HARD_SWISH, odd
// heights (a pair's lone last row).
TEST(NativeInt8ConvTable, DepthwiseThenHardSwishEqualsTheReference) {
  uint32_t seed = 100;
  for (uint32_t c : kChannels)
    for (uint32_t kernel : {3u, 5u})
      for (uint32_t stride : {1u, 2u}) {
        auto m = std::make_shared<Model>();
        const uint32_t x = m->add_operand(q8({1, 9, 13, c}, 0.05f, -17, Lifetime::MODEL_INPUT));
        const uint32_t y = int8_conv(*m, x, T::DEPTHWISE_CONV_2D, c, kernel, stride, 0, seed++, 0.06f, 12);
        const uint32_t z = table_op(*m, y, T::HARD_SWISH);
        m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
        m->inputs = {x};
        m->outputs = {z};
        check(m,
              std::to_string(kernel) + "x" + std::to_string(kernel) + "/" + std::to_string(stride) + " depthwise x" +
                  std::to_string(c) + " + HARD_SWISH",
              0, 1, true);
      }
}

// The conv's output read by the table op and also a model output: no fusion.
TEST(NativeInt8ConvTable, NotWhereTheConvOutputIsReadElsewhere) {
  for (uint32_t c : {13u, 16u}) {
    auto m = std::make_shared<Model>();
    const uint32_t x = m->add_operand(q8({1, 7, 9, 11}, 0.05f, -17, Lifetime::MODEL_INPUT));
    const uint32_t y = int8_conv(*m, x, T::CONV_2D, c, 1, 1, 0, 300 + c, 0.11f, 5);
    const uint32_t z = table_op(*m, y, T::HARD_SWISH);
    m->operands[z].lifetime = Lifetime::MODEL_OUTPUT;
    m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
    m->inputs = {x};
    m->outputs = {z, y};
    check(m, "1x1 conv x" + std::to_string(c) + " read twice", 0, 1, false);
  }
}

// NN_NO_INT8_CONV_TABLE=1 turns it off for tools and bench.
TEST(NativeInt8ConvTable, EnvironmentTurnsItOff) {
  nn_test::expect_env_turns_off("NN_NO_INT8_CONV_TABLE", &CpuOptions::int8_conv_table);
}

}  // namespace
}  // namespace nn
