// A native int8 table op (LOGISTIC, HARD_SWISH, TANH) whose output a DEQUANTIZE to float alone
// reads writes the floats itself (CpuPartition::fuse_int8_table_dequantize,
// CpuOptions::int8_table_dequantize): the output equals the reference kernels' table then
// DEQUANTIZE bit for bit, on the AVX-512 and AVX2 forms, 1 and 2 threads, sizes with partial
// vectors and several chunks; the kernel text says "+DEQUANTIZE" and the DEQUANTIZE is one of
// the table op's entry's ops. Where it must not apply (the table's output read by another op
// too, the switch off) the DEQUANTIZE stays an op of its own.
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

namespace nn {
namespace {

using T = OperationType;
using nn_test::has_avx2;
using nn_test::has_avx512_int8;
using nn_test::has_avx512_vbmi;
using nn_test::entry_of;
using nn_test::q8;

struct Outcome {
  std::vector<std::vector<uint8_t>> outputs;  // each output's bytes
  std::vector<StepTiming> kernels;
};

Outcome run(const std::shared_ptr<Model>& m, const std::vector<int8_t>& x, const char* delegate,
            const CpuOptions& cpu, int threads) {
  SessionOptions so;
  so.delegates = {delegate};
  so.cpu = cpu;
  so.threads = threads;
  Outcome r;
  auto s = Session::open(m, so);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return r;
  EXPECT_TRUE((*s)->set_input(0, x.data(), x.size()).is_ok());
  EXPECT_TRUE((*s)->run().is_ok());
  for (size_t i = 0; i < m->outputs.size(); ++i) {
    const auto* o = static_cast<const uint8_t*>((*s)->output_data(i));
    r.outputs.emplace_back(o, o + m->operands[m->outputs[i]].byte_size());
  }
  r.kernels = (*s)->kernels();
  return r;
}


struct Net {
  std::shared_ptr<Model> model;
  uint32_t table_op = 0, dequantize_op = 0;
};

// int8 x (dims) -> `type` (output scale, zero point) -> DEQUANTIZE -> float output; with
// `also_read`, a second DEQUANTIZE reads the table's output too.
Net table_then_dequantize(T type, Dims dims, float in_scale, int32_t in_zp, float out_scale, int32_t out_zp,
                          bool also_read) {
  Net n;
  n.model = std::make_shared<Model>();
  Model& m = *n.model;
  const uint32_t x = m.add_operand(q8(dims, in_scale, in_zp, Lifetime::MODEL_INPUT));
  const uint32_t y = m.add_operand(q8(dims, out_scale, out_zp));
  n.table_op = static_cast<uint32_t>(m.operations.size());
  m.add_operation(type, {x}, {y});
  Operand f;
  f.type = OperandType::TENSOR_FLOAT32;
  f.dims = dims;
  f.lifetime = Lifetime::MODEL_OUTPUT;
  const uint32_t z = m.add_operand(f);
  n.dequantize_op = static_cast<uint32_t>(m.operations.size());
  m.add_operation(T::DEQUANTIZE, {y}, {z});
  m.inputs = {x};
  m.outputs = {z};
  if (also_read) {  // a second DEQUANTIZE of the table's output
    m.add_operation(T::DEQUANTIZE, {y}, {m.add_operand(f)});
    m.outputs.push_back(static_cast<uint32_t>(m.operands.size() - 1));
  }
  return n;
}

struct Mode {
  const char* name;
  bool avx512;
};
std::vector<Mode> modes() {
  std::vector<Mode> v;
  if (has_avx512_int8()) v.push_back({"AVX-512", true});
  if (has_avx2()) v.push_back({"AVX2", false});
  return v;
}

// Every output bit equal to the reference's; `fused`: the DEQUANTIZE runs in the table op's
// entry ("+DEQUANTIZE") with the switch on wherever the table op is native, else never.
void check(const Net& n, const std::string& name, bool fused) {
  ASSERT_TRUE(n.model->validate_and_infer_shapes().is_ok()) << name;
  const Operand& in = n.model->operands[n.model->inputs[0]];
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  std::vector<int8_t> x(num_elements(in.dims));
  for (size_t i = 0; i < x.size(); ++i)  // every byte value, then random ones
    x[i] = static_cast<int8_t>(i < 256 ? int(i) - 128 : int(rng() % 256) - 128);
  const Outcome expected = run(n.model, x, "reference", {}, 1);
  ASSERT_EQ(expected.outputs.size(), n.model->outputs.size()) << name;
  for (const Mode& mode : modes())
    for (int threads : {1, 2}) {
      bool native_off = false;  // the table op ran on a native table with the switch off
      for (bool on : {false, true}) {
        CpuOptions cpu;
        cpu.avx512 = mode.avx512;
        cpu.int8_table_dequantize = on;
        const Outcome got = run(n.model, x, "cpu", cpu, threads);
        const std::string where = name + " (" + mode.name + ", " + std::to_string(threads) + " threads" +
                                  (on ? "" : ", switch off") + ")";
        ASSERT_EQ(got.outputs.size(), expected.outputs.size()) << where;
        for (size_t o = 0; o < got.outputs.size(); ++o)
          ASSERT_EQ(0, std::memcmp(got.outputs[o].data(), expected.outputs[o].data(), got.outputs[o].size()))
              << where << ": output " << o << " differs from the reference";
        const StepTiming* table = entry_of(got.kernels, n.table_op);
        const StepTiming* dq = entry_of(got.kernels, n.dequantize_op);
        ASSERT_TRUE(table && dq) << where;
        const bool one_entry = table == dq;
        EXPECT_EQ(one_entry, table->kernel.find("+DEQUANTIZE") != std::string::npos)
            << where << ": " << table->kernel;
        if (!on) {
          native_off = table->kernel.rfind("native int8 table", 0) == 0;
          EXPECT_FALSE(one_entry) << where << ": the DEQUANTIZE was fused into " << table->kernel;
        } else if (fused) {  // wherever the table op is native (LOGISTIC: AVX-512 VBMI only)
          EXPECT_EQ(one_entry, native_off) << where << ": " << table->kernel << " / " << dq->kernel;
        } else {
          EXPECT_FALSE(one_entry) << where << ": the DEQUANTIZE was fused into " << table->kernel;
        }
        // Not vacuous: the AVX-512 VBMI and AVX2 tables both run here where the CPU has them.
        const bool logistic = n.model->operations[n.table_op].type == T::LOGISTIC;
        if (fused && ((mode.avx512 && has_avx512_vbmi()) || (!mode.avx512 && !logistic))) {
          EXPECT_TRUE(native_off) << where << ": the table op ran on " << table->kernel;
        }
      }
    }
}

TEST(NativeInt8TableDequantize, LogisticHeadEqualsTheReference) {
  // selfie's head: a sigmoid (scale 1/256, zero point -128) then its float output.
  check(table_then_dequantize(T::LOGISTIC, {1, 64, 64, 1}, 0.07f, 5, 1.f / 256, -128, false), "logistic 64x64x1",
        true);
  // Partial vectors and blocks: 13 * 17 * 3 = 663 values.
  check(table_then_dequantize(T::LOGISTIC, {1, 13, 17, 3}, 0.031f, -9, 1.f / 256, -128, false),
        "logistic 13x17x3", true);
}

TEST(NativeInt8TableDequantize, HardSwishAndTanhEqualTheReference) {
  check(table_then_dequantize(T::HARD_SWISH, {1, 40, 33, 16}, 0.05f, 3, 0.047f, -20, false), "hard swish 40x33x16",
        true);
  check(table_then_dequantize(T::TANH, {1, 7, 9, 5}, 0.02f, 0, 1.f / 128, 0, false), "tanh 7x9x5", true);
}

TEST(NativeInt8TableDequantize, NotWhereTheTableOutputIsReadElsewhere) {
  check(table_then_dequantize(T::LOGISTIC, {1, 13, 17, 3}, 0.031f, -9, 1.f / 256, -128, true),
        "logistic read twice", false);
  check(table_then_dequantize(T::HARD_SWISH, {1, 8, 8, 16}, 0.05f, 3, 0.047f, -20, true), "hard swish read twice",
        false);
}

}  // namespace
}  // namespace nn
