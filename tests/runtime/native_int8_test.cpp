// The CPU delegate's native int8 kernels (delegates/cpu/native_int8.h) against the reference
// kernels (NNAPI's integer arithmetic), one op at a time: every output byte equal, at 1, 13,
// 16, 64 and 127 channels (vector tails and full vectors), on 1 and 2 threads, on the AVX-512
// and the AVX2 forms (and the convs AMX takes, with CpuOptions::amx on and off where the CPU
// has it); each case also checks which kernel ran, and that with
// CpuOptions::native_int8 off the op goes back to XNNPACK or the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "ops/quant_math.h"

namespace nn {
namespace {

using T = OperationType;

using nn_test::has_avx2;
using nn_test::has_avx512_int8;
using nn_test::has_avx512_vbmi;
using nn_test::has_avx512_vnni;
using nn_test::has_avx_vnni;
using nn_test::q8;

// The AVX2 int8 forms to run: AVX-VNNI off (vpmaddubsw), and on where the CPU has it.
std::vector<CpuOptions> avx2_int8_options() {
  std::vector<CpuOptions> v;
  for (bool avx_vnni : {false, true}) {
    if (avx_vnni && !has_avx_vnni()) continue;
    CpuOptions cpu;
    cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
    cpu.avx512 = false;
    cpu.avx_vnni = avx_vnni;
    v.push_back(cpu);
  }
  return v;
}

// One input of `bytes` int8 values at the ends of the range, in a pattern set by a, b, seed.
std::vector<std::vector<int8_t>> input_at_the_ends(size_t bytes, size_t a, size_t b, uint32_t seed) {
  const int8_t ends[] = {-128, -128, 127, -127, 0, -128};
  std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(bytes));
  for (size_t i = 0; i < bytes; ++i) x[0][i] = ends[(i / a + i % b + seed) % 6];
  return x;
}

using nn_test::run;

// AMX-INT8 on this CPU and the OS lets this process use it.
bool amx_here() { return has_avx512_vnni() && cpu::amx_int8_usable(); }

// Whether op 0 of `m`, where AMX is on, is a CONV_2D whose GEMM takes the AMX form.
bool amx_takes(const Model& m) {
  if (!amx_here() || m.operations[0].type != T::CONV_2D) return false;
  const Dims& f = m.operands[m.operations[0].inputs[1]].dims;  // [n][kh][kw][in_c]
  const Dims& y = m.operands[m.operations[0].outputs[0]].dims;
  return cpu::amx_int8_conv_pays(size_t(f[1]) * f[2] * f[3], f[0], size_t(y[0]) * y[1] * y[2]);
}

// Runs the one-op model `m` on seeded random int8 inputs: reference vs cpu with the native
// int8 kernels (AVX-512 where the CPU has it, then AVX2 with AVX-VNNI where it has that, then
// plain AVX2; 1 and 2 threads), byte for byte, and with the switch off (`off_kernel`: the
// kernel that must run then).
void check(const std::shared_ptr<Model>& m, const std::string& name, const std::string& native_kind,
           const std::string& off_kernel, bool native = true, const CpuOptions& base = {},
           int native_avx2 = -1) {
  const Status valid = m->validate_and_infer_shapes();
  ASSERT_TRUE(valid.is_ok()) << name << ": " << valid.to_string();
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  std::vector<std::vector<int8_t>> x;
  for (uint32_t i : m->inputs) {
    x.emplace_back(num_elements(m->operands[i].dims));
    for (int8_t& v : x.back()) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  }
  const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
  ASSERT_FALSE(expected.empty()) << name;
  struct Mode {
    bool avx512, avx_vnni, amx;
  };
  // Where the CPU has AMX, the AVX-512 mode runs with it off too, so the VNNI GEMM stays
  // covered on the shapes AMX takes.
  std::vector<Mode> modes = {{true, true, true}, {false, false, false}};
  if (amx_here()) modes.push_back({true, true, false});
  if (has_avx_vnni()) modes.push_back({false, true, false});
  for (const Mode mode : modes) {
    const bool avx512 = mode.avx512;
    for (int threads : {1, 2}) {
      CpuOptions cpu = base;
      cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
      cpu.avx512 = avx512;
      cpu.avx_vnni = mode.avx_vnni;
      cpu.amx = base.amx && mode.amx;
      std::string kernel;
      const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
      // The GEMM's and the depthwise conv's AVX-512 forms are VNNI's, else their AVX2 ones
      // (`native_avx2`: whether the op has one, -1 as `native`; else XNNPACK's: the same bytes
      // are still required).
      const bool gemm = native_kind == "depthwise" || native_kind == "deconv" || native_kind.rfind("conv", 0) == 0;
      const bool wide = avx512 && has_avx512_int8() && (!gemm || has_avx512_vnni());
      const std::string isa = wide && cpu.amx && amx_takes(*m)            ? " AMX"
                              : wide                                      ? " AVX-512"
                              : gemm && mode.avx_vnni && has_avx_vnni() ? " AVX-VNNI"
                              : has_avx2()                              ? " AVX2"
                                                                        : "";
      // LOGISTIC has an XNNPACK kernel as fast as a byte-wise table: native with AVX-512 VBMI
      // only. The global pool is native with AVX-512 or AVX2.
      const T type = m->operations[0].type;
      const bool takes = type == T::LOGISTIC          ? avx512 && has_avx512_int8() && has_avx512_vbmi()
                         : type == T::AVERAGE_POOL_2D ? (avx512 && has_avx512_int8()) || has_avx2()
                                                      : true;
      // With AVX-512 but no VNNI, convs and depthwise convs are XNNPACK's (AVX-512) ones.
      const bool avx512_no_vnni = avx512 && has_avx512_int8() && !has_avx512_vnni() && native_kind != "deconv";
      const bool native_here =
          gemm && !wide ? !avx512_no_vnni && (native_avx2 >= 0 ? native_avx2 != 0 : native) : native;
      if (!native_here || !takes)
        EXPECT_EQ(kernel, off_kernel) << name << " without VNNI";
      else
        EXPECT_EQ(kernel.rfind("native int8 " + native_kind + (native_kind == "table" ? "" : isa), 0), 0u)
            << name << ": ran on " << kernel;
      size_t differ = 0;
      int worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        differ += got[i] != expected[i];
        worst = std::max(worst, std::abs(got[i] - expected[i]));
      }
      if (kernel == "xnnpack")  // XNNPACK requantizes in fp32: within one step (xnn_int8.h)
        EXPECT_LE(worst, 1) << name << " on XNNPACK";
      else
        EXPECT_EQ(differ, 0u) << name << " (" << kernel << ", " << threads << " threads): " << differ
                              << " of " << got.size() << " bytes differ from the reference";
    }
  }
  // The fp32 requantization of the convs and of a per-channel gate MUL
  // (CpuOptions::int8_fp32_requant): within one step of NNAPI's fixed point, and equal on
  // most bytes (each form rounds the exact value down or up; they part only near halves).
  const bool gemm = native_kind == "depthwise" || native_kind == "deconv" || native_kind.rfind("conv", 0) == 0;
  const Operation& op0 = m->operations[0];
  const bool gate = op0.type == T::MUL && (num_elements(m->operands[op0.inputs[0]].dims) == m->operands[op0.outputs[0]].dims.back() ||
                                           num_elements(m->operands[op0.inputs[1]].dims) == m->operands[op0.outputs[0]].dims.back());
  if (gemm || gate)
    for (const Mode mode : modes) {
      CpuOptions cpu = base;
      cpu.int8_fp32_requant = true;
      cpu.avx512 = mode.avx512;
      cpu.avx_vnni = mode.avx_vnni;
      cpu.amx = base.amx && mode.amx;
      std::string kernel;
      const std::vector<int8_t> got = run(m, x, "cpu", cpu, 1, &kernel);
      if (kernel.rfind("native int8", 0) != 0) continue;  // this form runs on XNNPACK here
      EXPECT_NE(kernel.find(", fp32 requant"), std::string::npos) << name << ": " << kernel;
      size_t differ = 0;
      int worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        differ += got[i] != expected[i];
        worst = std::max(worst, std::abs(got[i] - expected[i]));
      }
      EXPECT_LE(worst, 1) << name << " (" << kernel << ")";
      // A gate's products often land on halves exactly (NNAPI rounds those away from zero,
      // fp32 to even): the every-pair test checks that only those differ.
      EXPECT_LE(differ * (gate ? 8 : 20), std::max<size_t>(got.size(), 40))
          << name << " (" << kernel << "): " << differ << " of " << got.size() << " bytes differ";
    }
  CpuOptions off = base;
  off.native_int8 = false;
  std::string kernel;
  run(m, x, "cpu", off, 1, &kernel);
  EXPECT_EQ(kernel, off_kernel) << name << " with native_int8 off";
}

std::shared_ptr<Model> one_op(T type, std::vector<Operand> inputs, std::vector<uint32_t> params, Operand out,
                              const std::function<void(Model&, std::vector<uint32_t>&)>& add_params = {}) {
  auto m = std::make_shared<Model>();
  std::vector<uint32_t> ins;
  for (Operand& o : inputs) {
    o.lifetime = Lifetime::MODEL_INPUT;
    ins.push_back(m->add_operand(o));
  }
  m->inputs = ins;
  for (uint32_t p : params) ins.push_back(m->add_scalar_i32(static_cast<int32_t>(p)));
  if (add_params) add_params(*m, ins);
  out.lifetime = Lifetime::MODEL_OUTPUT;
  const uint32_t y = m->add_operand(out);
  m->add_operation(type, ins, {y});
  m->outputs = {y};
  return m;
}

constexpr uint32_t kChannels[] = {1, 13, 16, 64, 127};

TEST(NativeInt8, MulByAPerChannelGateOrASameShapedTensorEqualsTheReference) {
  for (uint32_t c : kChannels) {
    // The squeeze-and-excitation gate: a LOGISTIC output (1/256, -128) per channel, with ReLU.
    check(one_op(T::MUL, {q8({1, 7, 9, c}, 0.105f, -124), q8({1, 1, 1, c}, 1.f / 256, -128)}, {1},
                 q8({1, 7, 9, c}, 0.053f, -122)),
          "gate MUL x" + std::to_string(c), "mul", "xnnpack");
    // The gate first, as [C]; no activation.
    check(one_op(T::MUL, {q8({c}, 0.03f, 11), q8({2, 3, 5, c}, 0.05f, -7)}, {0}, q8({2, 3, 5, c}, 0.07f, 2)),
          "gate-first MUL x" + std::to_string(c), "mul", "xnnpack");
    // Same shapes; a multiplier above 1 (a left shift of 5) with RELU6.
    check(one_op(T::MUL, {q8({1, 5, 3, c}, 0.5f, 3), q8({1, 5, 3, c}, 0.5f, -9)}, {3},
                 q8({1, 5, 3, c}, 0.01f, -20)),
          "same-shape MUL x" + std::to_string(c), "mul", "xnnpack");
  }
}

// Every pair of an input byte and a gate byte: a [1, 256, 1, 256] tensor whose pixel p holds
// p - 128 in every channel, a gate whose channel c holds c - 128. Multipliers with right
// shifts 0 to 12, and exactly 2^-3 (the multiplier 2^30, left to the general form). NNAPI's
// fixed point exactly, and the fp32 form within one step.
TEST(NativeInt8, GateMulEqualsTheReferenceOnEveryPair) {
  std::vector<std::vector<int8_t>> x(2);
  for (int p = 0; p < 256; ++p)
    for (int c = 0; c < 256; ++c) x[0].push_back(static_cast<int8_t>(p - 128));
  for (int c = 0; c < 256; ++c) x[1].push_back(static_cast<int8_t>(c - 128));
  struct Scales {
    float a, b, out;
    int32_t za, zb, zo, fuse;
  };
  std::mt19937 rng(11);
  std::vector<Scales> cases = {{0.105f, 1.f / 256, 0.053f, -124, -128, -122, 1},  // selfie's gate, ReLU
                               {0.5f, 0.25f, 1.f, 3, -9, 0, 0},                   // 2^-3 exactly
                               {0.9f, 0.9f, 1.f, 0, 0, 0, 0},                      // 0.81: no right shift
                               {0.03f, 0.05f, 0.07f, 11, -7, 2, 3}};
  for (int i = 0; i < 12; ++i) {
    auto r = [&rng](float lo, float hi) { return lo + (hi - lo) * float(rng() % 100000) / 100000.f; };
    cases.push_back({r(0.001f, 0.3f), r(0.001f, 0.3f), r(0.0005f, 0.2f), int32_t(rng() % 256) - 128,
                     int32_t(rng() % 256) - 128, int32_t(rng() % 256) - 128, 0});
  }
  for (const Scales& sc : cases) {
    auto m = one_op(T::MUL, {q8({1, 256, 1, 256}, sc.a, sc.za), q8({1, 1, 1, 256}, sc.b, sc.zb)}, {uint32_t(sc.fuse)},
                    q8({1, 256, 1, 256}, sc.out, sc.zo));
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
    for (bool avx512 : {true, false})
      for (bool fp32 : {false, true}) {
        CpuOptions cpu;
        cpu.int8_fp32_requant = fp32;  // off: NNAPI's fixed point, the reference's bytes
        cpu.avx512 = avx512;
        std::string kernel;
        const std::vector<int8_t> got = run(m, x, "cpu", cpu, 2, &kernel);
        size_t differ = 0;
        int worst = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          differ += got[i] != expected[i];
          worst = std::max(worst, std::abs(got[i] - expected[i]));
        }
        EXPECT_EQ(kernel.rfind("native int8 mul", 0), 0u) << kernel;
        if (!fp32) {
          EXPECT_EQ(differ, 0u) << sc.a << " x " << sc.b << " -> " << sc.out << " on " << kernel;
        } else {
          // One FMA in float, rounded once: within one step of NNAPI's fixed point (which
          // rounds twice), and the exact value (a - za)(g - zg) sa sb / so + zo rounded to
          // nearest even and clamped, but where that value is within float error of a half.
          EXPECT_NE(kernel.find("gate, fp32 requant"), std::string::npos) << kernel;
          EXPECT_LE(worst, 1) << sc.a << " x " << sc.b << " -> " << sc.out << " on " << kernel;
          const double real = double(sc.a) * sc.b / sc.out;
          const int lo = sc.fuse == 1 || sc.fuse == 3 ? std::max(-128, sc.zo) : -128;
          const int hi = sc.fuse == 3 ? std::min(127, sc.zo + int(std::round(6.0 / sc.out))) : 127;
          size_t wrong = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double v = real * (int(x[0][i]) - sc.za) * (int(x[1][i % 256]) - sc.zb) + sc.zo;
            if (std::abs(v - std::floor(v) - 0.5) < 1e-4) continue;
            wrong += got[i] != std::clamp(int(std::nearbyint(v)), lo, hi);
          }
          EXPECT_EQ(wrong, 0u) << sc.a << " x " << sc.b << " -> " << sc.out << " on " << kernel << ": " << wrong
                               << " bytes are not the exact value rounded";
        }
      }
  }
}

TEST(NativeInt8, HardSwishAndTanhTablesEqualTheReference) {
  for (uint32_t c : kChannels) {
    check(one_op(T::HARD_SWISH, {q8({1, 5, 7, c}, 0.0367f, -46)}, {}, q8({1, 5, 7, c}, 0.0264f, -114)),
          "HARD_SWISH x" + std::to_string(c), "table", "reference");
    check(one_op(T::TANH, {q8({1, 3, 11, c}, 0.031f, 5)}, {}, q8({1, 3, 11, c}, 1.f / 128, 0)),
          "TANH x" + std::to_string(c), "table", "reference");
  }
}

// Every int8 value through the AVX2 table (32 bytes a step, its 16 rows of 16 entries), at
// a length with a byte-wise tail, 1 and 2 threads: the reference's bytes.
TEST(NativeInt8, AvxTwoTableLooksUpEveryValueAsTheReference) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  auto m = one_op(T::HARD_SWISH, {q8({1, 3, 97, 1}, 0.0367f, -46)}, {}, q8({1, 3, 97, 1}, 0.0264f, -114));
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(3 * 97));
  for (size_t i = 0; i < x[0].size(); ++i) x[0][i] = static_cast<int8_t>(int(i * 7 % 256) - 128);
  const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
  for (int threads : {1, 2}) {
    CpuOptions cpu;
    cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
    cpu.avx512 = false;
    std::string kernel;
    EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), expected) << threads << " threads on " << kernel;
    EXPECT_EQ(kernel, "native int8 table AVX2");
    cpu.native_int8_table_avx2 = false;
    EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), expected) << threads << " threads, switch off";
    EXPECT_EQ(kernel, "native int8 table");
  }
}

TEST(NativeInt8, SameShapedAddEqualsTheReference) {
  // The arithmetic kernel (Int8Add); the byte tables are native_int8_add_table_test's, and
  // the every-pair trials below run them too where they take the scales.
  CpuOptions add;
  add.native_int8_add = true;
  add.native_int8_add_table = false;
  for (uint32_t c : kChannels) {
    // A residual: the larger scale first, then second; ReLU; an output scale above both.
    check(one_op(T::ADD, {q8({1, 7, 9, c}, 0.105f, -124), q8({1, 7, 9, c}, 0.031f, 9)}, {1},
                 q8({1, 7, 9, c}, 0.12f, -100)),
          "ADD x" + std::to_string(c), "add", "xnnpack", true, add);
    check(one_op(T::ADD, {q8({2, 3, 5, c}, 0.0173f, 3), q8({2, 3, 5, c}, 0.05f, -7)}, {0},
                 q8({2, 3, 5, c}, 0.011f, 2)),
          "ADD smaller-first x" + std::to_string(c), "add", "xnnpack", true, add);
    // Equal input scales (multipliers of exactly 1/2: no rounding shift), RELU6.
    check(one_op(T::ADD, {q8({1, 5, 3, c}, 0.02f, -128), q8({1, 5, 3, c}, 0.02f, 127)}, {3},
                 q8({1, 5, 3, c}, 0.04f, -20)),
          "ADD equal scales x" + std::to_string(c), "add", "xnnpack", true, add);
  }
  // Every pair of input bytes, at scale ratios whose rounding steps fall in many places.
  std::vector<std::vector<int8_t>> pairs(2, std::vector<int8_t>(65536));
  for (size_t i = 0; i < 65536; ++i) {
    pairs[0][i] = static_cast<int8_t>(i & 255);
    pairs[1][i] = static_cast<int8_t>(i >> 8);
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 24; ++trial) {
    auto scale = [&rng] { return 0.001f + 0.2f * float(rng() % 10000) / 10000.f; };
    const float sa = scale(), sb = trial % 3 == 0 ? sa : scale(), so = scale();
    const int32_t za = int32_t(rng() % 256) - 128, zb = int32_t(rng() % 256) - 128, zo = int32_t(rng() % 256) - 128;
    auto m = one_op(T::ADD, {q8({1, 256, 256, 1}, sa, za), q8({1, 256, 256, 1}, sb, zb)}, {0},
                    q8({1, 256, 256, 1}, so, zo));
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
    const std::vector<int8_t> expected = run(m, pairs, "reference", {}, 1, nullptr);
    for (bool avx512 : {true, false}) {
      CpuOptions cpu = add;
      cpu.avx512 = avx512;
      std::string kernel;
      const std::vector<int8_t> got = run(m, pairs, "cpu", cpu, 1, &kernel);
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
      EXPECT_EQ(differ, 0u) << "every pair, scales " << sa << " " << sb << " -> " << so << " on " << kernel;
    }
    // The defaults: the byte tables where they take the scales, else XNNPACK (not exact).
    std::string kernel;
    const std::vector<int8_t> got = run(m, pairs, "cpu", {}, 1, &kernel);
    if (kernel.find("table") == std::string::npos) continue;
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
    EXPECT_EQ(differ, 0u) << "every pair, scales " << sa << " " << sb << " -> " << so << " on " << kernel;
  }
  // The arithmetic kernel is off by default (XNNPACK's add is faster); a broadcast ADD is not taken.
  std::string kernel;
  auto m = one_op(T::ADD, {q8({1, 4, 4, 16}, 0.1f, 0), q8({1, 4, 4, 16}, 0.2f, 0)}, {0}, q8({1, 4, 4, 16}, 0.3f, 0));
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  std::vector<std::vector<int8_t>> x(2, std::vector<int8_t>(256, 1));
  CpuOptions no_table;
  no_table.native_int8_add_table = false;
  run(m, x, "cpu", no_table, 1, &kernel);
  EXPECT_EQ(kernel, "xnnpack");
  auto b = one_op(T::ADD, {q8({1, 4, 4, 16}, 0.1f, 0), q8({1, 1, 1, 16}, 0.2f, 0)}, {0}, q8({1, 4, 4, 16}, 0.3f, 0));
  ASSERT_TRUE(b->validate_and_infer_shapes().is_ok());
  x[1].resize(16);
  run(b, x, "cpu", add, 1, &kernel);
  EXPECT_EQ(kernel, "xnnpack");
}

TEST(NativeInt8, LogisticTableEqualsTheReference) {
  for (uint32_t c : kChannels)
    check(one_op(T::LOGISTIC, {q8({1, 5, 7, c}, 0.0611f, 17)}, {}, q8({1, 5, 7, c}, 1.f / 256, -128)),
          "LOGISTIC x" + std::to_string(c), "table", "xnnpack");
  CpuOptions off;
  off.native_int8_logistic = false;
  std::string kernel;
  auto m = one_op(T::LOGISTIC, {q8({1, 5, 7, 16}, 0.0611f, 17)}, {}, q8({1, 5, 7, 16}, 1.f / 256, -128));
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  run(m, {std::vector<int8_t>(5 * 7 * 16, 3)}, "cpu", off, 1, &kernel);
  EXPECT_EQ(kernel, "xnnpack");
}

// AVERAGE_POOL_2D with implicit padding (1 SAME, 2 VALID), stride 1, a filter of fw x fh.
std::shared_ptr<Model> pool_model(Dims in, Dims out, int32_t padding, int32_t fw, int32_t fh, int32_t fuse) {
  return one_op(T::AVERAGE_POOL_2D, {q8(in, 0.031f, -5)}, {}, q8(out, 0.031f, -5),
                [=](Model& m, std::vector<uint32_t>& ins) {
                  for (int32_t v : {padding, 1, 1, fw, fh, fuse}) ins.push_back(m.add_scalar_i32(v));
                });
}

TEST(NativeInt8, GlobalAveragePoolEqualsTheReference) {
  // 1, 2, 4, 8, 16 channels take several pixels per step; 7 x 77 pixels leave a partial step;
  // 8200 pixels cross the int16 partial sums' flush (every 255 steps) at every channel count.
  for (uint32_t c : {1u, 2u, 4u, 8u, 13u, 16u, 64u, 127u}) {
    check(pool_model({2, 7, 77, c}, {2, 1, 1, c}, 2, 77, 7, 0), "global AVERAGE_POOL_2D x" + std::to_string(c),
          "average pool", "xnnpack");
    check(pool_model({1, 1, 8200, c}, {1, 1, 1, c}, 2, 8200, 1, 1),
          "global AVERAGE_POOL_2D 8200 pixels, RELU x" + std::to_string(c), "average pool", "xnnpack");
  }
  // Every value -128 or 127: the largest partial sums an int16 lane holds.
  for (int8_t v : {int8_t(-128), int8_t(127)})
    for (uint32_t c : {4u, 16u, 64u}) {
      auto m = pool_model({1, 40, 205, c}, {1, 1, 1, c}, 2, 205, 40, 0);
      ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
      const std::vector<std::vector<int8_t>> x{std::vector<int8_t>(40 * 205 * c, v)};
      std::string kernel;
      EXPECT_EQ(run(m, x, "cpu", {}, 1, &kernel), run(m, x, "reference", {}, 1, nullptr)) << int(v) << " x" << c;
      if (has_avx512_int8()) {
        EXPECT_EQ(kernel.rfind("native int8 average pool", 0), 0u) << kernel;
      }
    }
  // A VALID window the size of the image.
  check(pool_model({1, 5, 6, 16}, {1, 1, 1, 16}, 2, 6, 5, 0), "VALID 6x5 on 5x6", "average pool", "xnnpack");
  // Not global: not the native kernel (XNNPACK's or the reference's).
  std::string kernel;
  auto m = pool_model({1, 6, 6, 16}, {1, 6, 6, 16}, 1, 3, 3, 0);
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  run(m, {std::vector<int8_t>(6 * 6 * 16, 3)}, "cpu", {}, 1, &kernel);
  EXPECT_NE(kernel.rfind("native int8", 0), 0u) << kernel;
  CpuOptions off;
  off.native_int8_pool = false;
  auto g = pool_model({1, 6, 6, 16}, {1, 1, 1, 16}, 2, 6, 6, 0);
  ASSERT_TRUE(g->validate_and_infer_shapes().is_ok());
  run(g, {std::vector<int8_t>(6 * 6 * 16, 3)}, "cpu", off, 1, &kernel);
  EXPECT_EQ(kernel, "xnnpack");
}

TEST(NativeInt8, MeanOverHeightAndWidthEqualsTheReference) {
  for (uint32_t c : kChannels)
    for (int keep : {1, 0}) {
      auto axes = [keep](Model& m, std::vector<uint32_t>& ins) {
        const int32_t hw[] = {2, 1};
        ins.push_back(m.add_constant_i32({2}, hw));
        ins.push_back(m.add_scalar_i32(keep));
      };
      check(one_op(T::MEAN, {q8({2, 7, 5, c}, 0.02f, -3)}, {},
                   q8(keep ? Dims{2, 1, 1, c} : Dims{2, c}, 0.011f, 7), axes),
            "MEAN keep_dims " + std::to_string(keep) + " x" + std::to_string(c), "mean", "reference");
    }
}

// The width-doubling row (each input pixel loaded once for its two output neighbours): a 2x
// width with half-pixel centres takes it, any other width the per-pixel taps; the switch
// off gives the per-pixel row. The reference's bytes at odd sizes, 1 and 2 threads.
TEST(NativeInt8, WidthDoublingResizeEqualsTheReference) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  // Scales: the decoder's kind; outputs past the int8 range (left to the saturating stores);
  // 255 si / so >= 2^30 (clamped in float first).
  struct Scales {
    float in, out;
  };
  for (Scales sc : {Scales{0.0173f, 0.031f}, Scales{0.0173f, 0.004f}, Scales{1.f, 1e-7f}})
    for (bool avx512 : {true, false})
      for (uint32_t c : {1u, 8u, 13u, 16u, 24u})
        for (uint32_t out_w : {18u, 17u}) {
          auto sizes = [out_w](Model& m, std::vector<uint32_t>& ins) {
            ins.push_back(m.add_scalar_i32(int32_t(out_w)));  // width
            ins.push_back(m.add_scalar_i32(13));              // height
            ins.push_back(m.add_scalar_bool(false));
            ins.push_back(m.add_scalar_bool(false));
            ins.push_back(m.add_scalar_bool(true));
          };
          auto m = one_op(T::RESIZE_BILINEAR, {q8({1, 7, 9, c}, sc.in, -128)}, {}, q8({1, 13, out_w, c}, sc.out, 9),
                          sizes);
          ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
          std::mt19937 rng(c * 100 + out_w);
          std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(7 * 9 * c));
          for (int8_t& v : x[0]) v = static_cast<int8_t>(int(rng() % 256) - 128);
          const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
          for (bool twice : {true, false})
            for (int threads : {1, 2}) {
              CpuOptions cpu;
              cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
              cpu.native_int8_resize_twice_w = twice;
              // Its AVX-512 refinements (native_int8_resize_quarters_test) off: the row itself.
              cpu.native_int8_resize_quarters = false;
              cpu.native_int8_resize_reciprocal = false;
              cpu.avx512 = avx512;
              std::string kernel;
              const std::string what = "scales " + std::to_string(sc.in) + " -> " + std::to_string(sc.out) + ", " +
                                       std::to_string(c) + " channels, width " + std::to_string(out_w) + ", " +
                                       std::to_string(threads) + " threads";
              EXPECT_EQ(run(m, x, "cpu", cpu, threads, &kernel), expected) << what << " on " << kernel;
              const std::string isa = avx512 && has_avx512_int8() ? "native int8 resize AVX-512" : "native int8 resize AVX2";
              EXPECT_EQ(kernel, twice && out_w == 18 ? isa + ", width doubled" : isa) << what;
            }
        }
}

TEST(NativeInt8, BilinearResizeEqualsTheReference) {
  struct Mode {
    const char* name;
    bool align_corners, half_pixel;
  };
  for (uint32_t c : kChannels)
    for (Mode mode : {Mode{"half-pixel", false, true}, Mode{"align-corners", true, false},
                      Mode{"legacy", false, false}}) {
      auto sizes = [mode](Model& m, std::vector<uint32_t>& ins) {
        ins.push_back(m.add_scalar_i32(14));  // width
        ins.push_back(m.add_scalar_i32(11));  // height
        ins.push_back(m.add_scalar_bool(false));
        ins.push_back(m.add_scalar_bool(mode.align_corners));
        ins.push_back(m.add_scalar_bool(mode.half_pixel));
      };
      // The selfie decoder's form (same scale in and out) and a requantizing one.
      for (float out_scale : {0.0173f, 0.031f})
        check(one_op(T::RESIZE_BILINEAR, {q8({1, 5, 7, c}, 0.0173f, -128)}, {},
                     q8({1, 11, 14, c}, out_scale, out_scale == 0.0173f ? -128 : 9), sizes),
              std::string("RESIZE_BILINEAR ") + mode.name + " x" + std::to_string(c) + " out scale " +
                  std::to_string(out_scale),
              "resize", out_scale == 0.0173f ? "xnnpack" : "reference");
    }
}

// A CONV_2D 1x1 or a TRANSPOSE_CONV_2D (kernel == stride 2) with a constant filter, per channel
// or per tensor, and an int32 bias (random, or zeros).
// CONV_2D: `kernel` x `kernel`, SAME padding, `stride`, `dilation`.
std::shared_ptr<Model> conv_model(T type, Dims in_dims, uint32_t out_c, bool per_channel, bool with_bias,
                                  int32_t fuse, uint32_t seed, uint32_t kernel = 1, uint32_t stride = 1,
                                  uint32_t dilation = 1, const std::vector<int8_t>& weights = {}) {
  const uint32_t in_c = in_dims[3], k = type == T::CONV_2D ? kernel : 2;
  auto m = std::make_shared<Model>();
  const float in_scale = 0.05f;
  const uint32_t x = m->add_operand(q8(in_dims, in_scale, -17, Lifetime::MODEL_INPUT));
  std::mt19937 rng(seed);
  std::vector<int8_t> w(size_t(out_c) * k * k * in_c);
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  if (!weights.empty()) w = weights;
  const uint32_t f = m->add_constant(
      per_channel ? OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL : OperandType::TENSOR_QUANT8_ASYMM_SIGNED,
      {out_c, k, k, in_c}, w.data(), w.size());
  std::vector<float> scales(out_c);
  for (uint32_t o = 0; o < out_c; ++o) scales[o] = 0.002f * (1.f + 0.37f * float(o % 7));
  if (per_channel) {
    m->operands[f].channel_quant.channel_dim = 0;
    m->operands[f].channel_quant.scales = scales;
  } else {
    m->operands[f].scale = scales[0];
  }
  std::vector<int32_t> bias(out_c, 0);
  if (with_bias)
    for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 20001) - 10000;
  const uint32_t b = m->add_constant_i32({out_c}, bias);
  m->operands[b].scale = per_channel ? 0.f : in_scale * scales[0];
  const Dims out_dims = type == T::CONV_2D ? Dims{in_dims[0], (in_dims[1] + stride - 1) / stride,
                                                  (in_dims[2] + stride - 1) / stride, out_c}
                                           : Dims{in_dims[0], in_dims[1] * 2, in_dims[2] * 2, out_c};
  const uint32_t y = m->add_operand(q8(out_dims, 0.11f, 5, Lifetime::MODEL_OUTPUT));
  if (type == T::CONV_2D)  // implicit SAME padding (VALID for 1x1 is the same), NHWC, dilation
    m->add_operation(T::CONV_2D,
                     {x, f, b, m->add_scalar_i32(1), m->add_scalar_i32(int32_t(stride)),
                      m->add_scalar_i32(int32_t(stride)), m->add_scalar_i32(fuse), m->add_scalar_bool(false),
                      m->add_scalar_i32(int32_t(dilation)), m->add_scalar_i32(int32_t(dilation))},
                     {y});
  else  // output shape, implicit VALID padding, stride 2
    m->add_operation(
        T::TRANSPOSE_CONV_2D,
        {x, f, b,
         m->add_constant_i32({4}, std::vector<int32_t>{int32_t(out_dims[0]), int32_t(out_dims[1]),
                                                       int32_t(out_dims[2]), int32_t(out_dims[3])}),
         m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(fuse),
         m->add_scalar_bool(false)},
        {y});
  m->inputs = {x};
  m->outputs = {y};
  return m;
}

TEST(NativeInt8, PointwiseConvAndTiledTransposeConvEqualTheReference) {
  uint32_t seed = 1;
  for (uint32_t in_c : kChannels)
    for (uint32_t out_c : {1u, 13u, 16u, 127u}) {
      const bool per_channel = (in_c + out_c) % 2 == 0;
      const bool with_bias = out_c != 13;
      const int32_t fuse = out_c == 16 ? 3 : out_c == 127 ? 1 : 0;  // RELU6, RELU, none
      const std::string shape = " " + std::to_string(in_c) + "->" + std::to_string(out_c) +
                                (per_channel ? " per-channel" : " per-tensor") +
                                (with_bias ? "" : " zero bias");
      check(conv_model(T::CONV_2D, {1, 5, 7, in_c}, out_c, per_channel, with_bias, fuse, seed++),
            "CONV_2D 1x1" + shape, "conv 1x1", "xnnpack");
      check(conv_model(T::CONV_2D, {1, 9, 7, in_c}, out_c, per_channel, with_bias, fuse, seed++, 3, 2),
            "CONV_2D 3x3/2 SAME" + shape, "conv", "xnnpack");
      check(conv_model(T::CONV_2D, {2, 6, 5, in_c}, out_c, !per_channel, with_bias, fuse, seed++, 3, 1, 2),
            "CONV_2D 3x3 dilation 2 SAME" + shape, "conv", "xnnpack");
      check(conv_model(T::TRANSPOSE_CONV_2D, {1, 3, 5, in_c}, out_c, per_channel, with_bias, fuse, seed++),
            "TRANSPOSE_CONV_2D 2x2/2" + shape, "deconv", "reference");
    }
  // An RGB stem (3 input channels: 27-byte windows, 9 bytes a tap row), odd sizes (rows of
  // in-image windows not a multiple of the 4 pixels a pass), batch 2, 1-3 column blocks.
  for (uint32_t out_c : {16u, 20u, 32u, 48u})
    for (uint32_t width : {19u, 25u})
      check(conv_model(T::CONV_2D, {2, 17, width, 3}, out_c, true, true, 3, seed++, 3, 2),
            "CONV_2D 3x3/2 SAME 3->" + std::to_string(out_c) + " width " + std::to_string(width), "conv", "xnnpack");
}

// Convs with narrow tap rows (kernel_w * in_c <= 16 bytes: RGB stems and the like) with VNNI
// read each pixel's taps from its output row's window rows laid out once, padded and flipped
// (CpuOptions::native_int8_direct_windows), 9 tap groups with their weights in registers and
// any other count from memory; off, each window is gathered into a GEMM row. Both give the
// reference's bytes: SAME padding on both sides or only past the end (even sizes at stride
// 2), kernels 3 / 5 / 7, strides 1 and 2, 1-3 column blocks (the last one partial), batch 2,
// inputs at both ends of int8 and random ones, 1 and 2 threads; in fp32 requantization the
// two forms give the same bytes. Wider tap rows and dilated columns keep the gathered rows.
TEST(NativeInt8, NarrowWindowConvsDirectAndGatheredEqualTheReference) {
  if (!has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI";
  struct Shape {
    uint32_t in_c, kernel, stride, width, out_c, dilation;
  };
  const Shape shapes[] = {{3, 3, 2, 25, 16, 1}, {3, 3, 2, 24, 32, 1}, {3, 3, 1, 13, 40, 1},
                          {4, 3, 2, 19, 16, 1}, {1, 3, 2, 20, 16, 1}, {2, 3, 1, 11, 24, 1},
                          {5, 3, 2, 17, 32, 1}, {3, 5, 2, 21, 16, 1}, {2, 7, 2, 23, 48, 1},
                          {1, 5, 1, 9, 8, 1},   {6, 3, 2, 17, 16, 1}, {3, 3, 1, 15, 16, 2}};
  uint32_t seed = 900;
  for (const Shape& sh : shapes)
    for (bool ends : {false, true}) {
      const int32_t fuse = seed % 3 == 0 ? 3 : seed % 3 == 1 ? 1 : 0;  // RELU6, RELU, none
      auto m = conv_model(T::CONV_2D, {2, 15, sh.width, sh.in_c}, sh.out_c, true, true, fuse, seed++,
                          sh.kernel, sh.stride, sh.dilation);
      ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
      const size_t bytes = size_t(2) * 15 * sh.width * sh.in_c;
      std::vector<std::vector<int8_t>> x = input_at_the_ends(bytes, 7, 5, seed);
      if (!ends) {
        std::mt19937 rng(seed);
        for (int8_t& v : x[0]) v = int8_t(int(rng() % 256) - 128);
      }
      const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
      const bool narrow = sh.kernel * sh.in_c <= 16 && sh.dilation == 1;
      const std::string shape = std::to_string(sh.in_c) + "->" + std::to_string(sh.out_c) + " " +
                                std::to_string(sh.kernel) + "x" + std::to_string(sh.kernel) + "/" +
                                std::to_string(sh.stride) + " width " + std::to_string(sh.width) +
                                (sh.dilation > 1 ? " dilated" : "") + (ends ? " ends" : " random");
      for (bool fp32 : {false, true}) {
        std::vector<int8_t> gathered_fp32;
        for (bool direct : {false, true})
          for (int threads : {1, 2}) {
            CpuOptions cpu;
            cpu.int8_fp32_requant = fp32;
            cpu.native_int8_direct_windows = direct;
            std::string kernel;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
            const std::string name = shape + (direct ? ", direct" : ", gathered") +
                                     (fp32 ? ", fp32, " : ", ") + std::to_string(threads) + " threads";
            EXPECT_EQ(kernel.rfind("native int8 conv AVX-512 VNNI", 0), 0u) << name << ": " << kernel;
            EXPECT_EQ(kernel.find(", direct windows") != std::string::npos, direct && narrow)
                << name << ": " << kernel;
            if (!fp32) {
              size_t differ = 0;
              for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
              EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << got.size() << " bytes differ";
            } else if (!direct) {
              gathered_fp32 = got;
            } else {
              EXPECT_EQ(got, gathered_fp32) << name << ": the direct form differs from the gathered rows";
            }
          }
      }
    }
}

// The narrow 1x1 convs of a segmentation net (8-24 channels) on the VNNI GEMM, its rows read
// in place (k % 4 == 0, each broadcast flipped in its register) and through the flipped copy
// (the switch off, and k = 13 always): the reference's bytes, odd sizes, 1 and 2 threads
// (143 pixels: 17 tiles of 8 and 7 single rows over 3 tasks), inputs at both ends of int8.
TEST(NativeInt8, NarrowPointwiseConvReadInPlaceEqualsTheReference) {
  if (!has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI";
  uint32_t seed = 500;
  for (uint32_t in_c : {8u, 13u, 16u, 24u})
    for (uint32_t out_c : {1u, 8u, 13u, 16u, 24u}) {
      auto m = conv_model(T::CONV_2D, {1, 13, 11, in_c}, out_c, true, true, out_c % 2 ? 1 : 0, seed++);
      ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
      std::mt19937 rng(seed);
      std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(size_t(13) * 11 * in_c));
      for (int8_t& v : x[0]) v = int8_t(rng() % 5 == 0 ? (rng() % 2 ? 127 : -128) : int(rng() % 256) - 128);
      const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
      for (bool in_place : {true, false})
        for (int threads : {1, 2}) {
          CpuOptions cpu;
          cpu.int8_fp32_requant = false;  // NNAPI's fixed point: the reference's bytes
          cpu.native_int8_in_place_tiles = in_place;
          std::string kernel;
          const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
          const std::string name = std::to_string(in_c) + "->" + std::to_string(out_c) +
                                   (in_place ? " in place, " : " copied, ") + std::to_string(threads) + " threads";
          EXPECT_EQ(kernel, "native int8 conv 1x1 AVX-512 VNNI") << name;
          size_t differ = 0;
          for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
          EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << got.size() << " bytes differ";
        }
    }
}

// The AVX2 GEMM at the ends of int8: vpmaddubsw's int16 pair sums reach 2 * 128 * 127 with
// inputs -128 and weights +-127 of one sign (no saturation allowed), and a weight -128 (whose
// sign flip would overflow) sends the op to the vpmaddwd form. With AVX-VNNI, vpdpbusd on
// x + 128 takes every weight (its int32 sums of four products cannot saturate). Byte-equal to
// the reference.
TEST(NativeInt8, AvxTwoGemmAtTheEndsOfInt8EqualsTheReference) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 300;
  for (uint32_t in_c : {13u, 24u, 127u})
    for (uint32_t out_c : {1u, 16u, 24u})
      for (bool minus_128 : {false, true}) {
        std::mt19937 rng(seed);
        std::vector<int8_t> w(size_t(out_c) * in_c);
        for (size_t i = 0; i < w.size(); ++i)  // pairs of one sign per column, some mixed
          w[i] = int8_t((i / in_c + i / 4) % 3 == 2 ? (i % 2 ? 127 : -127) : ((i / in_c) % 2 ? 127 : -127));
        if (minus_128) w[rng() % w.size()] = -128;
        auto m = conv_model(T::CONV_2D, {1, 7, 9, in_c}, out_c, true, true, 0, seed++, 1, 1, 1, w);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        const auto x = input_at_the_ends(size_t(7) * 9 * in_c, 5, 3, seed);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        for (int threads : {1, 2})
          for (const CpuOptions& cpu : avx2_int8_options()) {
            const bool avx_vnni = cpu.avx_vnni;
            std::string kernel;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
            const std::string name = std::to_string(in_c) + "->" + std::to_string(out_c) +
                                     (minus_128 ? " with a weight -128" : "") + ", " + kernel;
            EXPECT_EQ(kernel, avx_vnni    ? "native int8 conv 1x1 AVX-VNNI"
                              : minus_128 ? "native int8 conv 1x1 AVX2"
                                          : "native int8 conv 1x1 AVX2 vpmaddubsw")
                << name;
            size_t differ = 0;
            for (size_t i = 0; i < got.size(); ++i) differ += got[i] != expected[i];
            EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << got.size() << " bytes differ";
          }
      }
}

// DEPTHWISE_CONV_2D, multiplier 1: `kernel` x `kernel`, SAME padding, `stride`, `dilation`.
std::shared_ptr<Model> depthwise_model(Dims in_dims, bool per_channel, int32_t fuse, uint32_t seed,
                                       uint32_t kernel, uint32_t stride, uint32_t dilation,
                                       const std::vector<int8_t>& weights = {}) {
  const uint32_t c = in_dims[3];
  auto m = std::make_shared<Model>();
  const float in_scale = 0.04f;
  const uint32_t x = m->add_operand(q8(in_dims, in_scale, 23, Lifetime::MODEL_INPUT));
  std::mt19937 rng(seed);
  std::vector<int8_t> w(size_t(kernel) * kernel * c);
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  if (!weights.empty()) w = weights;
  const uint32_t f = m->add_constant(
      per_channel ? OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL : OperandType::TENSOR_QUANT8_ASYMM_SIGNED,
      {1, kernel, kernel, c}, w.data(), w.size());
  std::vector<float> scales(c);
  for (uint32_t o = 0; o < c; ++o) scales[o] = 0.003f * (1.f + 0.29f * float(o % 5));
  if (per_channel) {
    m->operands[f].channel_quant.channel_dim = 3;
    m->operands[f].channel_quant.scales = scales;
  } else {
    m->operands[f].scale = scales[0];
  }
  std::vector<int32_t> bias(c);
  for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 4001) - 2000;
  const uint32_t b = m->add_constant_i32({c}, bias);
  m->operands[b].scale = per_channel ? 0.f : in_scale * scales[0];
  const Dims out_dims{in_dims[0], (in_dims[1] + stride - 1) / stride, (in_dims[2] + stride - 1) / stride, c};
  const uint32_t y = m->add_operand(q8(out_dims, 0.09f, -3, Lifetime::MODEL_OUTPUT));
  m->add_operation(
      T::DEPTHWISE_CONV_2D,
      {x, f, b, m->add_scalar_i32(1), m->add_scalar_i32(int32_t(stride)), m->add_scalar_i32(int32_t(stride)),
       m->add_scalar_i32(1), m->add_scalar_i32(fuse), m->add_scalar_bool(false),
       m->add_scalar_i32(int32_t(dilation)), m->add_scalar_i32(int32_t(dilation))},
      {y});
  m->inputs = {x};
  m->outputs = {y};
  return m;
}

// The AVX2 depthwise form at the ends of int8, as the GEMM's test: inputs -128, tap weights
// +-127 of one sign per pair; a weight -128 leaves the op to XNNPACK (within one step). With
// AVX-VNNI the interleave holds x + 128 for vpdpbusd, which takes any weight.
TEST(NativeInt8, AvxTwoDepthwiseAtTheEndsOfInt8EqualsTheReference) {
  if (!has_avx2()) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 400;
  for (uint32_t c : {1u, 13u, 16u, 24u})
    for (uint32_t kernel : {3u, 5u})
      for (bool minus_128 : {false, true}) {
        std::vector<int8_t> w(size_t(kernel) * kernel * c);
        for (size_t i = 0; i < w.size(); ++i) w[i] = int8_t((i / c / 2 + i % c) % 3 == 2 ? -127 : 127);
        if (minus_128) w[seed % w.size()] = -128;
        auto m = depthwise_model({1, 8, 9, c}, true, 0, seed++, kernel, kernel == 3 ? 1 : 2, 1, w);
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        const auto x = input_at_the_ends(size_t(8) * 9 * c, 3, 5, seed);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        for (int threads : {1, 2})
          for (const CpuOptions& cpu : avx2_int8_options()) {
            const bool avx_vnni = cpu.avx_vnni;
            std::string kernel_name;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel_name);
            const std::string name = std::to_string(kernel) + "x" + std::to_string(kernel) + " x" +
                                     std::to_string(c) + (minus_128 ? " with a weight -128" : "") + ", " +
                                     kernel_name;
            EXPECT_EQ(kernel_name, avx_vnni    ? "native int8 depthwise AVX-VNNI"
                                   : minus_128 ? "xnnpack"
                                               : "native int8 depthwise AVX2 vpmaddubsw")
                << name;
            int worst = 0;
            for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
            EXPECT_LE(worst, minus_128 && !avx_vnni ? 1 : 0) << name;
          }
      }
}

TEST(NativeInt8, DepthwiseConvEqualsTheReference) {
  struct Form {
    uint32_t kernel, stride, dilation;
  };
  uint32_t seed = 100;
  for (uint32_t c : kChannels)
    for (Form f : {Form{3, 1, 1}, Form{3, 2, 1}, Form{5, 1, 1}, Form{5, 2, 1}, Form{3, 1, 2}})
      for (bool per_channel : {true, false}) {
        const int32_t fuse = f.kernel == 5 ? 3 : int32_t(c % 2);  // RELU6 / RELU / none
        check(depthwise_model({1, 9, 11, c}, per_channel, fuse, seed++, f.kernel, f.stride, f.dilation),
              "DEPTHWISE_CONV_2D " + std::to_string(f.kernel) + "x" + std::to_string(f.kernel) + "/" +
                  std::to_string(f.stride) + " dilation " + std::to_string(f.dilation) + " x" +
                  std::to_string(c) + (per_channel ? " per-channel" : " per-tensor"),
              "depthwise", "xnnpack",
              // wide 3x3: XNNPACK's unless the VNNI 3x3 form runs it (VBMI, dilation 1)
              c <= 32 || f.kernel == 5 || (has_avx512_vbmi() && f.dilation == 1), {}, f.dilation == 1);
      }
}

// The convs' requantization alone (cpu::requantize_per_channel), short and long forms,
// against quant::multiply_by_quantized_multiplier + zo, clamped: every right shift 0-31,
// multipliers at 2^30 (many exact halves) and near 2^31, accumulators around every output
// value's rounding boundaries and across the bound, zero points and ranges at their ends.
TEST(NativeInt8, RequantizationEqualsNnapisFixedPoint) {
  std::mt19937 rng(7);
  const double mantissas[] = {0.5, 0.5000001, 0.75, 0.6180339, 0.9999999, 0.8660254, 0.5 + 1.0 / (1 << 20)};
  const int32_t zero_points[] = {-128, -7, 0, 5, 127};
  const quant::Range ranges[] = {{-128, 127}, {-3, 60}};
  size_t short_cases = 0;
  for (int s = 0; s <= 31; ++s)
    for (int64_t bound : {int64_t{1} << 24, int64_t{1} << 31})
      for (size_t variant = 0; variant < 2; ++variant) {
        const int32_t zo = zero_points[(size_t(s) + 2 * variant) % 5];
        const quant::Range range = ranges[(size_t(s) + variant) % 2];
        // 21 channels: a full vector of 16 and a tail; every mantissa at this shift.
        std::vector<quant::Multiplier> m(21);
        for (size_t j = 0; j < m.size(); ++j) {
          m[j] = quant::quantize_multiplier(mantissas[j % 7] * std::ldexp(1.0, -s));
          ASSERT_EQ(-m[j].shift, s);
        }
        const int64_t lo = -std::min<int64_t>(bound, int64_t{1} << 31),
                      hi = std::min<int64_t>(bound, (int64_t{1} << 31) - 1);
        // Per channel: around x = k / M for outputs k in [-140, 140] (every boundary), then random.
        const size_t rows = 281 * 5 + 200;
        std::vector<int32_t> acc(rows * m.size());
        for (size_t j = 0; j < m.size(); ++j) {
          const double real = double(m[j].multiplier) * std::ldexp(1.0, m[j].shift - 31);
          size_t r = 0;
          for (int k = -140; k <= 140; ++k)
            for (int d = -2; d <= 2; ++d) {
              const double x = std::floor((k + 0.5) / real) + d;
              acc[r++ * m.size() + j] = int32_t(std::clamp<double>(x, double(lo), double(hi)));
            }
          std::uniform_int_distribution<int64_t> any(lo, hi);
          while (r < rows) acc[r++ * m.size() + j] = int32_t(any(rng));
        }
        acc[0] = -1, acc[1] = 0, acc[2] = 1;  // the x = -1, m = 2^30 case (channel 0's mantissa is 0.5)
        for (bool avx512 : {true, false}) {
          std::vector<int8_t> got(acc.size());
          bool short_form = false;
          cpu::requantize_per_channel(acc.data(), rows, m, zo, range, bound, avx512, got.data(), &short_form);
          if (bound == int64_t{1} << 31) {
            EXPECT_FALSE(short_form) << "shift " << s;
          }
          if (bound == int64_t{1} << 24 && s <= 16) {
            EXPECT_TRUE(short_form) << "shift " << s;
          }
          short_cases += short_form;
          size_t differ = 0;
          for (size_t i = 0; i < acc.size(); ++i) {
            const int32_t v = quant::multiply_by_quantized_multiplier(acc[i], m[i % m.size()]) + zo;
            const int8_t expected = static_cast<int8_t>(std::clamp(v, range.lo, range.hi));
            if (got[i] != expected && differ++ < 3)
              ADD_FAILURE() << "shift " << s << " bound " << bound << (avx512 ? " AVX-512" : " AVX2")
                            << ": acc " << acc[i] << " * " << m[i % m.size()].multiplier << " -> "
                            << int(got[i]) << ", NNAPI " << int(expected);
          }
          EXPECT_EQ(differ, 0u) << "shift " << s << " bound " << bound;
        }
      }
  EXPECT_GT(short_cases, 60u);
}

// The fp32 form (CpuOptions::int8_fp32_requant) on the same accumulators: every output is
// float(acc) * scale + zo in one fused multiply-add, rounded to nearest even, clamped (where
// the accumulator bound keeps |acc * scale| + |zo| below 2^30; else the product clamped to the
// range less zo, rounded, zo added), scale = the multiplier's value as a float; within one
// step of NNAPI's fixed point everywhere, and equal to it on nearly every byte. AVX-512, AVX2
// and scalar alike.
TEST(NativeInt8, Fp32RequantizationIsWithinOneStepOfNnapis) {
  std::mt19937 rng(8);
  const double mantissas[] = {0.5, 0.5000001, 0.75, 0.6180339, 0.9999999, 0.8660254, 0.5 + 1.0 / (1 << 20)};
  const int32_t zero_points[] = {-128, -7, 0, 5, 127};
  const quant::Range ranges[] = {{-128, 127}, {-3, 60}};
  size_t total = 0, differ_nnapi = 0;
  for (int s = 0; s <= 31; ++s)
    for (int64_t bound : {int64_t{1} << 24, int64_t{1} << 31}) {
      const int32_t zo = zero_points[size_t(s) % 5];
      const quant::Range range = ranges[size_t(s) % 2];
      std::vector<quant::Multiplier> m(21);
      for (size_t j = 0; j < m.size(); ++j) m[j] = quant::quantize_multiplier(mantissas[j % 7] * std::ldexp(1.0, -s));
      const int64_t lo = -std::min<int64_t>(bound, int64_t{1} << 31), hi = std::min<int64_t>(bound, (int64_t{1} << 31) - 1);
      const size_t rows = 281 * 5 + 200;
      std::vector<int32_t> acc(rows * m.size());
      std::vector<float> scale(m.size());
      bool bounded = true;
      for (size_t j = 0; j < m.size(); ++j) {
        const double real = double(m[j].multiplier) * std::ldexp(1.0, m[j].shift - 31);
        scale[j] = float(real);
        bounded = bounded && double(bound) * scale[j] + std::abs(zo) < 0x1p30;
        size_t r = 0;
        for (int k = -140; k <= 140; ++k)  // every half between outputs, and either side of it
          for (int d = -2; d <= 2; ++d)
            acc[r++ * m.size() + j] = int32_t(std::clamp<double>(std::floor((k + 0.5) / real) + d, double(lo), double(hi)));
        std::uniform_int_distribution<int64_t> any(lo, hi);
        while (r < rows) acc[r++ * m.size() + j] = int32_t(any(rng));
      }
      for (int form = 0; form < 3; ++form) {  // AVX-512, AVX2, scalar (requantize_per_channel's own loop)
        if (form == 0 && !has_avx512_int8()) continue;
        std::vector<int8_t> got(acc.size());
        bool short_form = false;
        if (form < 2)
          cpu::requantize_per_channel(acc.data(), rows, m, zo, range, bound, form == 0, got.data(), &short_form, true);
        size_t wrong = 0;
        for (size_t i = 0; i < acc.size(); ++i) {
          const size_t j = i % m.size();
          const float x = float(acc[i]);
          const int32_t fp32 =
              bounded ? std::clamp(int32_t(std::nearbyint(std::fma(x, scale[j], float(zo)))), range.lo, range.hi)
                      : int32_t(std::nearbyint(std::clamp(x * scale[j], float(range.lo - zo), float(range.hi - zo)))) + zo;
          const int32_t nnapi = std::clamp(quant::multiply_by_quantized_multiplier(acc[i], m[j]) + zo, range.lo, range.hi);
          EXPECT_LE(std::abs(fp32 - nnapi), 1) << "shift " << s << ": acc " << acc[i];
          if (form == 2) {
            total += 1, differ_nnapi += fp32 != nnapi;
            continue;
          }
          if (got[i] != fp32 && wrong++ < 3)
            ADD_FAILURE() << "shift " << s << " bound " << bound << (form == 0 ? " AVX-512" : " AVX2") << ": acc "
                          << acc[i] << " -> " << int(got[i]) << ", fp32 form " << fp32;
        }
        EXPECT_EQ(wrong, 0u) << "shift " << s << " bound " << bound;
      }
    }
  // Most accumulators here sit next to a half, where the two forms may part; still most agree.
  EXPECT_LT(differ_nnapi * 4, total) << differ_nnapi << " of " << total;
}

// The switch's environment variable (CpuOptions::from_environment, the one place env is read).
TEST(NativeInt8, Fp32RequantizationEnvironmentTurnsItOff) {
  nn_test::expect_env_turns_off("NN_NO_INT8_FP32_REQUANT", &CpuOptions::int8_fp32_requant);
}

}  // namespace
}  // namespace nn
