// Helpers shared by the int8 tests: an int8 operand, and which x86 features the CPU has (the
// native int8 kernels' forms a test can expect to run).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <utility>

#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn_test {

// A TENSOR_QUANT8_ASYMM_SIGNED operand.
inline nn::Operand q8(nn::Dims d, float scale, int32_t zp, nn::Lifetime life = nn::Lifetime::TEMPORARY) {
  nn::Operand o;
  o.type = nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  o.dims = std::move(d);
  o.scale = scale;
  o.zero_point = zp;
  o.lifetime = life;
  return o;
}

// A CONV_2D (kernel x kernel, SAME, stride) or a DEPTHWISE_CONV_2D (multiplier 1) of x with
// random per-channel weights (every one `every_weight` when nonzero) and bias; returns its
// int8 output operand.
inline uint32_t int8_conv(nn::Model& m, uint32_t x, nn::OperationType type, uint32_t out_c, uint32_t kernel,
                          uint32_t stride, int32_t fuse, uint32_t seed, float out_scale, int32_t out_zp,
                          int8_t every_weight = 0) {
  using nn::Dims;
  const Dims in = m.operands[x].dims;  // a copy: adding operands moves them
  const uint32_t in_c = in[3];
  const bool dw = type == nn::OperationType::DEPTHWISE_CONV_2D;
  if (dw) out_c = in_c;
  std::mt19937 rng(seed);
  const Dims fdims = dw ? Dims{1, kernel, kernel, in_c} : Dims{out_c, kernel, kernel, in_c};
  std::vector<int8_t> w(nn::num_elements(fdims));
  for (int8_t& v : w) v = every_weight ? every_weight : static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  const uint32_t f = m.add_constant(nn::OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL, fdims, w.data(), w.size());
  m.operands[f].channel_quant.channel_dim = dw ? 3 : 0;
  for (uint32_t o = 0; o < out_c; ++o)
    m.operands[f].channel_quant.scales.push_back(0.002f * (1.f + 0.31f * float(o % 7)));
  std::vector<int32_t> bias(out_c);
  for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 8001) - 4000;
  const uint32_t b = m.add_constant_i32({out_c}, bias);
  m.operands[b].scale = 0.f;
  const Dims out{in[0], (in[1] + stride - 1) / stride, (in[2] + stride - 1) / stride, out_c};
  const uint32_t y = m.add_operand(q8(out, out_scale, out_zp));
  std::vector<uint32_t> ins = {x, f, b, m.add_scalar_i32(1), m.add_scalar_i32(int32_t(stride)),
                               m.add_scalar_i32(int32_t(stride))};
  if (dw) ins.push_back(m.add_scalar_i32(1));
  ins.push_back(m.add_scalar_i32(fuse));
  m.add_operation(type, ins, {y});
  return y;
}

// ADD(a, b) with fuse code `fuse` into an int8 operand of a's shape.
inline uint32_t int8_add(nn::Model& m, uint32_t a, uint32_t b, int32_t fuse, float scale, int32_t zp) {
  const uint32_t z = m.add_operand(q8(m.operands[a].dims, scale, zp));
  m.add_operation(nn::OperationType::ADD, {a, b, m.add_scalar_i32(fuse)}, {z});
  return z;
}

#if defined(__x86_64__) || defined(__i386__)
#define NN_TEST_CPU_HAS(feature) __builtin_cpu_supports(feature)
#else
#define NN_TEST_CPU_HAS(feature) false
#endif
// AVX2 with FMA: the native kernels' AVX2 forms.
inline bool has_avx2() { return NN_TEST_CPU_HAS("avx2") && NN_TEST_CPU_HAS("fma"); }
// AVX2's 256-bit VNNI (AVX-VNNI).
inline bool has_avx_vnni() { return NN_TEST_CPU_HAS("avx2") && NN_TEST_CPU_HAS("avxvnni"); }
// AVX-512 F, BW and VL: the native int8 kernels' AVX-512 forms.
inline bool has_avx512_int8() {
  return NN_TEST_CPU_HAS("avx512f") && NN_TEST_CPU_HAS("avx512bw") && NN_TEST_CPU_HAS("avx512vl");
}
// The AVX-512 int8 forms plus AVX-512 VNNI (the native int8 GEMMs' and depthwise convs').
inline bool has_avx512_vnni() { return has_avx512_int8() && NN_TEST_CPU_HAS("avx512vnni"); }
inline bool has_avx512_vbmi() { return NN_TEST_CPU_HAS("avx512vbmi"); }

// A CpuOptions switch's environment variable (CpuOptions::from_environment, the one place
// the environment is read): unset, the switch is on; `env`=1 turns it off.
inline void expect_env_turns_off(const char* env, bool nn::CpuOptions::*on) {
  unsetenv(env);
  EXPECT_TRUE(nn::CpuOptions::from_environment().*on) << env << " unset";
  setenv(env, "1", 1);
  EXPECT_FALSE(nn::CpuOptions::from_environment().*on) << env << "=1";
  unsetenv(env);
}
#undef NN_TEST_CPU_HAS


// What one run gives: each output's int8 values, and the session's steps with their kernels.
struct Int8Outcome {
  std::vector<std::vector<int8_t>> outputs;
  std::vector<nn::StepTiming> kernels;
};

// Runs `m` once on one delegate with inputs x (one per model input).
inline Int8Outcome run_int8(const std::shared_ptr<nn::Model>& m, const std::vector<std::vector<int8_t>>& x,
                            const char* delegate, const nn::CpuOptions& cpu, int threads) {
  nn::SessionOptions so;
  so.delegates = {delegate};
  so.cpu = cpu;
  so.threads = threads;
  Int8Outcome r;
  auto s = nn::Session::open(m, so);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return r;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE((*s)->set_input(i, x[i].data(), x[i].size()).is_ok());
  EXPECT_TRUE((*s)->run().is_ok());
  for (size_t i = 0; i < m->outputs.size(); ++i) {
    const auto* o = static_cast<const int8_t*>((*s)->output_data(i));
    r.outputs.emplace_back(o, o + nn::num_elements(m->operands[m->outputs[i]].dims));
  }
  r.kernels = (*s)->kernels();
  return r;
}

// The native int8 kernels' ISA forms this CPU can run (CpuOptions' avx512 / avx_vnni).
struct Int8Mode {
  const char* name;
  bool avx512, avx_vnni;
};
inline std::vector<Int8Mode> int8_modes() {
  std::vector<Int8Mode> v;
  if (has_avx512_vnni()) v.push_back({"AVX-512", true, true});
  if (has_avx2()) v.push_back({"AVX2", false, false});
  if (has_avx_vnni()) v.push_back({"AVX2 + AVX-VNNI", false, true});
  return v;
}

// Runs `m` once on one delegate with inputs x; its output 0, and the first step's kernel.
inline std::vector<int8_t> run(const std::shared_ptr<nn::Model>& m, const std::vector<std::vector<int8_t>>& x,
                        const char* delegate, const nn::CpuOptions& cpu, int threads, std::string* kernel) {
  nn::SessionOptions so;
  so.delegates = {delegate};
  so.cpu = cpu;
  so.threads = threads;
  auto s = nn::Session::open(m, so);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE((*s)->set_input(i, x[i].data(), x[i].size()).is_ok());
  EXPECT_TRUE((*s)->run().is_ok());
  const auto* o = static_cast<const int8_t*>((*s)->output_data(0));
  if (kernel) *kernel = (*s)->kernels().empty() ? "" : (*s)->kernels().at(0).kernel;
  return std::vector<int8_t>(o, o + nn::num_elements(m->operands[m->outputs[0]].dims));
}

// One random int8 vector per model input (uniform over all 256 values), seeded by `name` so
// a failing case reproduces.
inline std::vector<std::vector<int8_t>> random_int8_inputs(const nn::Model& m, const std::string& name) {
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  std::vector<std::vector<int8_t>> x;
  for (uint32_t i : m.inputs) {
    x.emplace_back(nn::num_elements(m.operands[i].dims));
    for (int8_t& v : x.back()) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  }
  return x;
}

// The kernel entry (a session's step) whose ops include op k, or null.
inline const nn::StepTiming* entry_of(const std::vector<nn::StepTiming>& kernels, uint32_t k) {
  for (const nn::StepTiming& e : kernels)
    for (uint32_t o : e.ops)
      if (o == k) return &e;
  return nullptr;
}

}  // namespace nn_test
