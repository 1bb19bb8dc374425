// The CPU delegate's fusions for ConvNeXt / transformer blocks, each on a model where only
// it can act, against the reference kernels on the same inputs:
//   GELU (erf and tanh forms) in a native FULLY_CONNECTED / 1x1 conv's epilogue (fuse_epilogues, gelu_after)
//   a per-channel MUL (layer scale) folded into the filter and bias (channel_scale_of)
//   LayerNorm over the last axis as one native op (fuse_layer_norm, native_layer_norm.cpp)
// and the erf they share (native_epilogue.h) against std::erf.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "delegates/cpu/native_epilogue.h"
#include "delegates/cpu/native_kernels.h"
#include "runtime_test_util.h"
#include "test_model.h"

namespace {

using T = nn::OperationType;
using Built = nn_test::TestModel;
// Against the reference kernels: as the other fusion tests (cpu_fusion_passes_test.cpp).
constexpr double kTolerance = 1e-4;
// Fused against the same model with the fusion switched off, as max |fused - unfused| over
// max |unfused|: the fused ops compute the IR's ops in another order (d * (1 / s) for
// d / s, x * (1 / sqrt 2) for x / sqrt 2, (gamma W) x for gamma (W x), sums over other
// lanes): a few float roundings of the output's scale.
constexpr double kFusedTolerance = 2e-6;

bool has_native() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
bool has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// `floor`: errors are relative to max(floor, 1% of the output's range) (compare_with_reference).
nn_test::Comparison profiled_cpu(Built& b, float lo, float hi, const nn::CpuOptions& cpu = {},
                                 double tolerance = kTolerance, double floor = 1e-2) {
  nn::Status v = b.model->validate_and_infer_shapes();
  EXPECT_TRUE(v.is_ok()) << v.to_string();
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.profile = true;
  o.cpu = cpu;
  auto c = nn_test::compare_with_reference(b.model, o, lo, hi, 7, floor);
  EXPECT_LE(c.max_rel_error, tolerance) << nn_test::step_labels(c);
  return c;
}

// max |fused - unfused| / max |unfused| over every output, on seeded inputs in [lo, hi].
double fused_vs_unfused(Built& b, const nn::CpuOptions& fused, const nn::CpuOptions& unfused, float lo,
                        float hi) {
  std::vector<std::vector<float>> outs[2];
  const nn::CpuOptions* options[2] = {&fused, &unfused};
  for (int i = 0; i < 2; ++i) {
    nn::SessionOptions o;
    o.delegates = {"cpu"};
    o.cpu = *options[i];
    auto opened = nn::Session::open(b.model, o);
    EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
    if (!opened.is_ok()) return 1;
    auto& session = *opened;
    for (size_t k = 0; k < b.model->inputs.size(); ++k) {
      auto x = nn_test::random_floats(nn::num_elements(b.model->operands[b.model->inputs[k]].dims),
                                      uint32_t(77 + k), lo, hi);
      EXPECT_TRUE(session->set_input(k, x.data(), x.size() * sizeof(float)).is_ok());
    }
    EXPECT_TRUE(session->run().is_ok());
    for (size_t k = 0; k < b.model->outputs.size(); ++k) {
      const float* y = session->output_f32(k);
      outs[i].emplace_back(y, y + nn::num_elements(session->output_desc(k).dims));
    }
  }
  double diff = 0, scale = 0;
  for (size_t k = 0; k < outs[0].size(); ++k)
    for (size_t j = 0; j < outs[0][k].size(); ++j) {
      diff = std::max(diff, std::fabs(double(outs[0][k][j]) - outs[1][k][j]));
      scale = std::max(scale, std::fabs(double(outs[1][k][j])));
    }
  return diff / std::max(scale, 1e-30);
}

uint32_t scalar(Built& b, float v) {
  const float value[1] = {v};
  return b.model->add_constant_f32({1}, value);
}

// FULLY_CONNECTED of [1, h, w, k] rows to n units, then RESHAPE back to [1, h, w, n]
// (what the ONNX importer writes for a Linear over channels-last pixels).
uint32_t linear(Built& b, uint32_t x, uint32_t h, uint32_t w, uint32_t k, uint32_t n, uint32_t seed,
                int32_t fuse = 0) {
  uint32_t fc = b.op(T::FULLY_CONNECTED, {x, b.constant({n, k}, seed, -0.5f, 0.5f), b.constant({n}, seed + 1),
                                          b.i32(fuse)});
  return b.op(T::RESHAPE, {fc, b.ints({1, int32_t(h), int32_t(w), int32_t(n)})});
}

// out * (1 + erf(out / sqrt 2)) * 0.5 as torch's ONNX exporter writes it; `half_first`:
// (out * 0.5) * (1 + erf(..)), `mul_inv`: out * (1 / sqrt 2) instead of the DIV.
uint32_t gelu(Built& b, uint32_t y, bool half_first = false, bool mul_inv = false, float sqrt2 = 1.41421356f) {
  uint32_t scaled = mul_inv ? b.op(T::MUL, {y, scalar(b, 1.f / sqrt2), b.i32(0)})
                            : b.op(T::DIV, {y, scalar(b, sqrt2), b.i32(0)});
  uint32_t p = b.op(T::ADD, {b.op(T::NNPIPE_ERF, {scaled}), scalar(b, 1.f), b.i32(0)});
  if (half_first) return b.op(T::MUL, {b.op(T::MUL, {y, scalar(b, 0.5f), b.i32(0)}), p, b.i32(0)});
  return b.op(T::MUL, {b.op(T::MUL, {y, p, b.i32(0)}), scalar(b, 0.5f), b.i32(0)});
}

// 0.5 out (1 + tanh(sqrt(2 / pi) (out + 0.044715 out^3))) as transformers' exporters write it.
uint32_t gelu_tanh(Built& b, uint32_t y, bool half_first = true, float cubic = 0.044715f) {
  uint32_t cube = b.op(T::POW, {y, scalar(b, 3.f)});
  uint32_t inner = b.op(T::ADD, {y, b.op(T::MUL, {scalar(b, cubic), cube, b.i32(0)}), b.i32(0)});
  uint32_t t = b.op(T::TANH, {b.op(T::MUL, {scalar(b, 0.7978845608f), inner, b.i32(0)})});
  uint32_t p = b.op(T::ADD, {scalar(b, 1.f), t, b.i32(0)});
  if (half_first) return b.op(T::MUL, {b.op(T::MUL, {scalar(b, 0.5f), y, b.i32(0)}), p, b.i32(0)});
  return b.op(T::MUL, {b.op(T::MUL, {y, p, b.i32(0)}), scalar(b, 0.5f), b.i32(0)});
}

// The ops of a fused chain run in one step labelled by their head: none of `op` is left.
int steps_running(const nn_test::Comparison& c, const std::string& op) {
  int n = 0;
  for (const auto& s : c.steps)
    if (s.label.find(op) != std::string::npos) ++n;
  return n;
}

TEST(ErfApproximation, WithinItsStatedErrorOfStdErfOverTheFloatRange) {
  // Every 211th float from 0 to +inf, both signs: the rational's whole domain, the clamp
  // beyond 4, the denormals and the exact zero.
  double worst_abs = 0, worst_rel = 0;
  for (uint64_t bits = 0; bits < 0x7F800000u; bits += 211)
    for (float sign : {1.f, -1.f}) {
      float x;
      const uint32_t b32 = uint32_t(bits);
      std::memcpy(&x, &b32, 4);
      x *= sign;
      const double want = std::erf(double(x)), got = nn::cpu::erf_approx(x);
      const double err = std::fabs(got - want);
      worst_abs = std::max(worst_abs, err);
      if (std::fabs(want) >= 1e-30) worst_rel = std::max(worst_rel, err / std::fabs(want));
    }
  EXPECT_LE(worst_abs, 3.8e-7);
  EXPECT_LE(worst_rel, 3.8e-7);
  EXPECT_EQ(nn::cpu::erf_approx(std::numeric_limits<float>::infinity()), 1.f);
  EXPECT_EQ(nn::cpu::erf_approx(-std::numeric_limits<float>::infinity()), -1.f);
  EXPECT_EQ(nn::cpu::erf_approx(0.f), 0.f);
}

// The vector GELU (AVX-512 and AVX2, odd lengths for the tails, a row stride) equals the
// scalar one, which is within 1.9e-7 |x| (+ roundings) of the exact GELU; its tanh form is
// within the sigmoid's ~3e-6 (logistic16) of the exact tanh formula.
TEST(ErfApproximation, VectorGeluEqualsScalarOnEveryIsaAndTail) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  for (bool avx512 : {false, true}) {
    if (avx512 && !has_avx512()) continue;
    for (size_t n : {1u, 7u, 13u, 16u, 127u}) {
      const size_t rows = 3, stride = n + 5;
      std::vector<float> x = nn_test::random_floats(rows * stride, uint32_t(n), -6.f, 6.f), y = x, tanh_y = x;
      nn::cpu::gelu_inplace(y.data(), rows, n, stride, avx512);
      nn::cpu::gelu_inplace(tanh_y.data(), rows, n, stride, avx512, true);
      for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < stride; ++i) {
          const float v = x[r * stride + i], got = y[r * stride + i];
          if (i >= n) {
            EXPECT_EQ(got, v) << "wrote past the row at " << i;
            EXPECT_EQ(tanh_y[r * stride + i], v) << "wrote past the row at " << i;
            continue;
          }
          EXPECT_NEAR(got, nn::cpu::gelu_approx(v), 1e-7 * std::max(1.f, std::fabs(v))) << v << " avx512 " << avx512;
          const double exact = 0.5 * double(v) * (1 + std::erf(double(v) / std::sqrt(2.0)));
          EXPECT_NEAR(got, exact, 1.9e-7 * std::fabs(v) + 2.4e-7 * std::fabs(exact)) << v;
          const double u = std::sqrt(2 / M_PI) * (double(v) + 0.044715 * double(v) * v * v);
          const double exact_tanh = 0.5 * double(v) * (1 + std::tanh(u));
          EXPECT_NEAR(tanh_y[r * stride + i], exact_tanh, 4e-6 * std::fabs(v) + 2.4e-7) << v;
        }
    }
  }
}

// A Linear then GELU, in each form an exporter writes, runs as one native step; on both
// ISAs, with a ragged channel count (the last panel partial).
TEST(GeluEpilogue, FusesIntoNativeFullyConnectedInEachForm) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  for (int form = 0; form < 3; ++form)
    for (bool avx512 : {false, true}) {
      Built b;
      uint32_t x = b.input({1, 5, 7, 24});
      b.output(gelu(b, linear(b, x, 5, 7, 24, 37, 11), form == 1, form == 2));
      nn::CpuOptions o;
      o.avx512 = avx512;
      auto c = profiled_cpu(b, -2.f, 2.f, o);
      EXPECT_EQ(c.steps.size(), 1u) << "form " << form << "\n" << nn_test::step_labels(c);
      EXPECT_EQ(nn_test::count_steps(c, "op 0 FULLY_CONNECTED [native]"), 1) << nn_test::step_labels(c);
      nn::CpuOptions off = o;
      off.gelu_epilogue = false;
      EXPECT_LE(fused_vs_unfused(b, o, off, -2.f, 2.f), kFusedTolerance) << "form " << form << " avx512 " << avx512;
    }
  // A 1x1 conv's GELU too.
  Built b;
  uint32_t x = b.input({1, 6, 7, 13});
  uint32_t y = b.op(T::CONV_2D, {x, b.constant({21, 1, 1, 13}, 5), b.constant({21}, 6), b.i32(1), b.i32(1),
                                 b.i32(1), b.i32(0)});
  b.output(gelu(b, y));
  auto c = profiled_cpu(b, -2.f, 2.f);
  EXPECT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
}

// The tanh form (as x * sigmoid(2u)): both tail orders, both ISAs; another constant stays apart.
TEST(GeluEpilogue, TanhFormFusesAndStaysApartOnOtherConstants) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  for (bool half_first : {true, false})
    for (bool avx512 : {false, true}) {
      Built b;
      b.output(gelu_tanh(b, linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 37, 51), half_first));
      nn::CpuOptions o;
      o.avx512 = avx512;
      auto c = profiled_cpu(b, -3.f, 3.f, o);
      EXPECT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
      nn::CpuOptions off = o;
      off.gelu_epilogue = false;
      // the sigmoid's ~3e-6 relative error (logistic16) against XNNPACK's tanh
      EXPECT_LE(fused_vs_unfused(b, o, off, -3.f, 3.f), 5 * kFusedTolerance) << half_first << avx512;
    }
  Built b;
  b.output(gelu_tanh(b, linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 37, 53), true, 0.044f));
  auto c = profiled_cpu(b, -3.f, 3.f);
  EXPECT_EQ(steps_running(c, "TANH"), 1) << nn_test::step_labels(c);
}

// Where the chain is not exactly GELU, or a middle tensor is read elsewhere, or the switch
// is off, the ops keep steps of their own (and the numbers still match).
TEST(GeluEpilogue, StaysApartWhereItMustNot) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  {  // another constant: x / 2
    Built b;
    b.output(gelu(b, linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 32, 13), false, false, 2.f));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "NNPIPE_ERF"), 1) << nn_test::step_labels(c);
    EXPECT_GT(c.steps.size(), 1u) << nn_test::step_labels(c);
  }
  {  // erf's output also read outside
    Built b;
    uint32_t y = linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 32, 15);
    uint32_t e = b.op(T::NNPIPE_ERF, {b.op(T::DIV, {y, scalar(b, 1.41421356f), b.i32(0)})});
    uint32_t p = b.op(T::ADD, {e, scalar(b, 1.f), b.i32(0)});
    b.output(b.op(T::MUL, {b.op(T::MUL, {y, p, b.i32(0)}), scalar(b, 0.5f), b.i32(0)}));
    b.output(e);
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "NNPIPE_ERF"), 1) << nn_test::step_labels(c);
  }
  {  // the input's clamp (RELU6 fuse code) is kept before the GELU, which still fuses
    Built b;
    b.output(gelu(b, linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 32, 17, 3)));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
  }
  {  // switch off
    Built b;
    b.output(gelu(b, linear(b, b.input({1, 5, 7, 24}), 5, 7, 24, 32, 19)));
    nn::CpuOptions o;
    o.gelu_epilogue = false;
    auto c = profiled_cpu(b, -2.f, 2.f, o);
    EXPECT_EQ(steps_running(c, "NNPIPE_ERF"), 1) << nn_test::step_labels(c);
  }
}

// ConvNeXt's block tail: Linear, RESHAPE, layer scale (one constant per channel), residual
// ADD: one native step. A scale that is not per channel, or after a clamp, stays a MUL.
TEST(ChannelScaleFold, LayerScaleAndResidualFuseIntoTheProjection) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  {
    Built b;
    uint32_t x = b.input({1, 5, 7, 24}), skip = b.input({1, 5, 7, 19});
    uint32_t y = b.op(T::MUL, {linear(b, x, 5, 7, 24, 19, 21), b.constant({19}, 22, 0.01f, 2.f), b.i32(0)});
    b.output(b.op(T::ADD, {skip, y, b.i32(0)}));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(c.steps.size(), 1u) << nn_test::step_labels(c);
    nn::CpuOptions o;
    o.channel_scale_fold = false;
    EXPECT_LE(fused_vs_unfused(b, {}, o, -2.f, 2.f), kFusedTolerance);
    auto off = profiled_cpu(b, -2.f, 2.f, o);
    EXPECT_EQ(steps_running(off, "MUL"), 1) << nn_test::step_labels(off);
  }
  {  // a scale per pixel and channel: no fold
    Built b;
    uint32_t x = b.input({1, 5, 7, 24});
    b.output(b.op(T::MUL, {linear(b, x, 5, 7, 24, 19, 23), b.constant({1, 1, 7, 19}, 24), b.i32(0)}));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "MUL"), 1) << nn_test::step_labels(c);
  }
  {  // after the FC's own RELU: scaling does not commute with the clamp (negative gamma)
    Built b;
    uint32_t x = b.input({1, 5, 7, 24});
    b.output(b.op(T::MUL, {linear(b, x, 5, 7, 24, 19, 25, 1), b.constant({19}, 26), b.i32(0)}));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "MUL"), 1) << nn_test::step_labels(c);
  }
}

// LayerNorm over channels as the ONNX importer lowers it.
uint32_t layer_norm(Built& b, uint32_t x, uint32_t c, uint32_t seed, bool pow = true, bool affine = true,
                    int32_t axis = -1, float eps = 1e-6f, uint32_t* deviations = nullptr) {
  uint32_t m = b.op(T::MEAN, {x, b.ints({axis}), b.i32(1)});
  uint32_t d = b.op(T::SUB, {x, m, b.i32(0)});
  if (deviations) *deviations = d;
  uint32_t sq = pow ? b.op(T::POW, {d, scalar(b, 2.f)}) : b.op(T::MUL, {d, d, b.i32(0)});
  uint32_t v = b.op(T::MEAN, {sq, b.ints({axis}), b.i32(1)});
  uint32_t s = b.op(T::SQRT, {b.op(T::ADD, {v, scalar(b, eps), b.i32(0)})});
  uint32_t y = b.op(T::DIV, {d, s, b.i32(0)});
  if (!affine) return y;
  y = b.op(T::MUL, {y, b.constant({c}, seed, 0.5f, 1.5f), b.i32(0)});
  return b.op(T::ADD, {y, b.constant({c}, seed + 1), b.i32(0)});
}

TEST(LayerNormFusion, NineOpsRunAsOneNativeOpOnEveryIsaAndWidth) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  for (uint32_t c : {1u, 13u, 16u, 96u, 127u})
    for (bool avx512 : {false, true})
      for (int variant = 0; variant < 3; ++variant) {
        Built b;
        // An offset input: the variance must come from the deviations (E[x^2] - E[x]^2
        // would lose 3e-5 of it). Any float mean of values near 30 is off by up to
        // ulp(30) / 2 = 9.5e-7, a rounding the reference and ours make differently, 1e-6 of
        // outputs whose scale is ~1.7: judged as absolute errors (floor 1), at 1e-5.
        uint32_t x = b.op(T::ADD, {b.input({1, 3, 5, c}), scalar(b, 30.f), b.i32(0)});
        b.output(layer_norm(b, x, c, 31, variant != 1, variant != 2));
        nn::CpuOptions o;
        o.avx512 = avx512;
        auto c_ = profiled_cpu(b, -2.f, 2.f, o, 1e-5, 1.0);
        EXPECT_EQ(nn_test::count_steps(c_, "op 1 MEAN [native]"), 1)
            << "channels " << c << " variant " << variant << "\n" << nn_test::step_labels(c_);
        nn::CpuOptions off = o;
        off.layer_norm = false;
        EXPECT_LE(fused_vs_unfused(b, o, off, -2.f, 2.f), 5 * kFusedTolerance)
            << "channels " << c << " variant " << variant << " avx512 " << avx512;
        EXPECT_EQ(c_.steps.size(), 2u) << nn_test::step_labels(c_);  // the ADD of 30, the norm
      }
}

TEST(LayerNormFusion, StaysApartWhereItMustNot) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  {  // over another axis
    Built b;
    b.output(layer_norm(b, b.input({1, 3, 5, 8}), 8, 41, true, false, 2));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "SQRT"), 1) << nn_test::step_labels(c);
  }
  {  // the deviations read a third time
    Built b;
    uint32_t x = b.input({1, 3, 5, 8});
    uint32_t d = 0;
    b.output(layer_norm(b, x, 8, 43, true, true, -1, 1e-6f, &d));
    b.output(b.op(T::ABS, {d}));
    auto c = profiled_cpu(b, -2.f, 2.f);
    EXPECT_EQ(steps_running(c, "SQRT"), 1) << nn_test::step_labels(c);
  }
  {  // a cube instead of a square
    Built b;
    uint32_t x = b.input({1, 3, 5, 8});
    uint32_t m = b.op(T::MEAN, {x, b.ints({-1}), b.i32(1)});
    uint32_t d = b.op(T::SUB, {x, m, b.i32(0)});
    uint32_t v = b.op(T::MEAN, {b.op(T::POW, {d, scalar(b, 3.f)}), b.ints({-1}), b.i32(1)});
    b.output(b.op(T::DIV, {d, b.op(T::SQRT, {b.op(T::ADD, {v, scalar(b, 1.f), b.i32(0)})}), b.i32(0)}));
    auto c = profiled_cpu(b, 0.f, 2.f);
    EXPECT_EQ(steps_running(c, "SQRT"), 1) << nn_test::step_labels(c);
  }
  {  // switch off
    Built b;
    b.output(layer_norm(b, b.input({1, 3, 5, 8}), 8, 45));
    nn::CpuOptions o;
    o.layer_norm = false;
    auto c = profiled_cpu(b, -2.f, 2.f, o);
    EXPECT_EQ(steps_running(c, "SQRT"), 1) << nn_test::step_labels(c);
  }
}

}  // namespace
