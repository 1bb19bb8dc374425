// The AMX form of the native int8 conv GEMM (delegates/cpu/native_int8_conv.cpp, rows_amx)
// against the reference kernels: every output byte equal, on shapes that reach each of its
// edges (rows not a multiple of 16 or 32, k not a multiple of 64 or of 4, n not a multiple of
// 16 or 32, input zero points other than 0, -128 in x and w, RELU / RELU6 ranges), 1 and 2
// threads, a task's short last block read in place and through a zero-padded copy
// (CpuOptions::amx_in_place_tail); the kernel text says AMX where NativeIsa::amx and the
// shape rule (amx_int8_conv_pays) choose it, and CpuOptions::amx off gives the VNNI form.
// Skips where the CPU or the OS give no AMX.
#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "int8_test_util.h"

namespace nn {
namespace {

using T = OperationType;
constexpr int32_t kNone = 0, kRelu = 1, kRelu6 = 3;

Operand int8_operand(Dims d, float scale, int32_t zp, Lifetime life) {
  Operand o;
  o.type = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  o.dims = std::move(d);
  o.scale = scale;
  o.zero_point = zp;
  o.lifetime = life;
  return o;
}

bool amx_here() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && cpu::amx_int8_usable();
#else
  return false;
#endif
}

struct Shape {
  uint32_t h, w, in_c, out_c, kernel, stride;
  int32_t zx, fuse;
  bool per_channel;
};

std::string describe(const Shape& s) {
  return std::to_string(s.h) + "x" + std::to_string(s.w) + "x" + std::to_string(s.in_c) + " -> " +
         std::to_string(s.out_c) + ", " + std::to_string(s.kernel) + "x" + std::to_string(s.kernel) + "/" +
         std::to_string(s.stride) + ", zx " + std::to_string(s.zx) + ", fuse " + std::to_string(s.fuse) +
         (s.per_channel ? ", per channel" : ", per tensor");
}

// CONV_2D, SAME padding, weights over all of int8 (-128 too) and a random bias.
std::shared_ptr<Model> conv_model(const Shape& s, uint32_t seed) {
  auto m = std::make_shared<Model>();
  const float in_scale = 0.045f;
  const uint32_t x =
      m->add_operand(int8_operand({1, s.h, s.w, s.in_c}, in_scale, s.zx, Lifetime::MODEL_INPUT));
  std::mt19937 rng(seed);
  std::vector<int8_t> w(size_t(s.out_c) * s.kernel * s.kernel * s.in_c);
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  const uint32_t f = m->add_constant(
      s.per_channel ? OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL : OperandType::TENSOR_QUANT8_ASYMM_SIGNED,
      {s.out_c, s.kernel, s.kernel, s.in_c}, w.data(), w.size());
  std::vector<float> scales(s.out_c);
  for (uint32_t o = 0; o < s.out_c; ++o) scales[o] = 0.0007f * (1.f + 0.41f * float(o % 9));
  if (s.per_channel) {
    m->operands[f].channel_quant.channel_dim = 0;
    m->operands[f].channel_quant.scales = scales;
  } else {
    m->operands[f].scale = scales[0];
  }
  std::vector<int32_t> bias(s.out_c);
  for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 40001) - 20000;
  const uint32_t b = m->add_constant_i32({s.out_c}, bias);
  m->operands[b].scale = s.per_channel ? 0.f : in_scale * scales[0];
  const Dims out_dims{1, (s.h + s.stride - 1) / s.stride, (s.w + s.stride - 1) / s.stride, s.out_c};
  const uint32_t y = m->add_operand(int8_operand(out_dims, 0.12f, -9, Lifetime::MODEL_OUTPUT));
  m->add_operation(T::CONV_2D,
                   {x, f, b, m->add_scalar_i32(1), m->add_scalar_i32(int32_t(s.stride)),
                    m->add_scalar_i32(int32_t(s.stride)), m->add_scalar_i32(s.fuse)},
                   {y});
  m->inputs = {x};
  m->outputs = {y};
  return m;
}

std::vector<int8_t> run(const std::shared_ptr<Model>& m, const std::vector<int8_t>& x, const char* delegate,
                        const CpuOptions& cpu, int threads, std::string* kernel) {
  return nn_test::run(m, {x}, delegate, cpu, threads, kernel);
}

// Inputs over all of int8, a fifth of them at its ends.
std::vector<int8_t> input(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> x(n);
  for (int8_t& v : x) v = int8_t(rng() % 5 == 0 ? (rng() % 2 ? 127 : -128) : int(rng() % 256) - 128);
  return x;
}

// Tasks of 64 rows here. Rows: 143 = 64 + 64 + 15 (a last block of one tile row), 81 = 64 +
// 17 (two tile rows, the second of one pixel), 90 = 64 + 26, 72 = 64 + 8, 128 (whole
// blocks); tasks of 32-63 rows, whose last short block is the task's last 32 rows read in
// place: 49 = 32 + 17 (1x1 and 3x3 windows), 36 = 32 + 4. k: 72, 200 (64-byte steps and a
// tail of 8), 64 (no tail), 216 and 360 (3x3 windows: tails of 24 and 40), 160 and 96 (tails
// of 32), 13 (below the rule: VNNI). n: 40 and 48 (two tiles and a lone one), 17 and 33 (a
// tile of one column), 64, 96, 160, 32.
const Shape kShapes[] = {
    {13, 11, 72, 40, 1, 1, 37, kNone, true},  {9, 9, 200, 17, 1, 1, -128, kRelu, true},
    {16, 8, 64, 64, 1, 1, 0, kRelu6, false},  {13, 11, 13, 24, 1, 1, 101, kNone, true},
    {19, 17, 24, 96, 3, 2, -5, kRelu6, true}, {11, 13, 160, 48, 1, 1, -17, kNone, false},
    {9, 8, 96, 160, 1, 1, 12, kRelu, true},   {9, 8, 40, 32, 3, 1, 127, kRelu6, true},
    {7, 7, 160, 40, 1, 1, 5, kRelu6, true},   {6, 6, 200, 33, 1, 1, -9, kNone, false},
    {7, 7, 24, 64, 3, 1, -128, kRelu, true},
};

TEST(NativeInt8Amx, ConvGemmOnAmxEqualsTheReference) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-INT8 on this CPU, or the OS does not allow it";
  uint32_t seed = 900;
  size_t on_amx = 0;
  for (const Shape& s : kShapes) {
    auto m = conv_model(s, seed++);
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << describe(s);
    const std::vector<int8_t> x = input(size_t(s.h) * s.w * s.in_c, seed++);
    const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
    ASSERT_FALSE(expected.empty()) << describe(s);
    const size_t rows = size_t((s.h + s.stride - 1) / s.stride) * ((s.w + s.stride - 1) / s.stride);
    const bool amx = cpu::amx_int8_conv_pays(size_t(s.kernel) * s.kernel * s.in_c, s.out_c, rows);
    on_amx += amx;
    const std::string base = s.kernel == 1 ? "native int8 conv 1x1 " : "native int8 conv ";
    for (int form : {0, 1, 2})  // AMX (short last blocks in place), AMX (copied), VNNI
      for (int threads : {1, 2}) {
        const bool amx_on = form < 2;
        CpuOptions cpu;
        cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
        cpu.amx = amx_on;
        cpu.amx_in_place_tail = form == 0;
        std::string kernel;
        const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
        const std::string what = describe(s) + ", " + std::to_string(threads) + " threads, " + kernel +
                                 (form == 1 ? ", short blocks copied" : "");
        EXPECT_EQ(kernel, base + (amx && amx_on ? "AMX" : "AVX-512 VNNI")) << what;
        ASSERT_EQ(got.size(), expected.size()) << what;
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
        EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << got.size() << " bytes differ";
      }
  }
  // The shapes are chosen to reach the AMX form's edges: most must take it.
  EXPECT_EQ(on_amx, std::size(kShapes) - 1);
}

// The switch and the ISA: CpuOptions::amx off, or AVX-512 off, leave AMX out.
TEST(NativeInt8Amx, SwitchesChooseTheKernel) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-INT8 on this CPU, or the OS does not allow it";
  const Shape s{16, 16, 128, 128, 1, 1, 3, kNone, true};
  ASSERT_TRUE(cpu::amx_int8_conv_pays(128, 128, 256));
  auto m = conv_model(s, 7);
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  const std::vector<int8_t> x = input(size_t(16) * 16 * 128, 8);
  const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
  struct Case {
    bool amx, avx512;
    const char* kernel;
  };
  for (const Case c : {Case{true, true, "native int8 conv 1x1 AMX"},
                       Case{false, true, "native int8 conv 1x1 AVX-512 VNNI"}, Case{true, false, nullptr}}) {
    CpuOptions cpu;
    cpu.amx = c.amx;
    cpu.avx512 = c.avx512;
    std::string kernel;
    EXPECT_EQ(run(m, x, "cpu", cpu, 1, &kernel), expected) << kernel;
    if (c.kernel)
      EXPECT_EQ(kernel, c.kernel);
    else
      EXPECT_EQ(kernel.find("AMX"), std::string::npos) << kernel;
  }
}

}  // namespace
}  // namespace nn
