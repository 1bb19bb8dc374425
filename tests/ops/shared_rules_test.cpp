// The rules that used to be written in several places, now one function each, pinned
// against the rule as published and against everyone who applies it:
// - SAME padding (TensorFlow's, NNAPI's PaddingCode 1): the decoded pads of every window op,
//   what the reference kernels' prepare() makes of them, and the delegates' view.
// - The fused activations' clamp (FuseCode -> range): the reference ops, the quantized range,
//   and the CPU and Vulkan delegates applying it to the same inputs.
// - Bilinear taps: the delegates sample the reference kernel's neighbours (tests/vulkan and
//   tests/runtime compare outputs; here the taps themselves against the published rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "nn/runtime/session.h"
#include "ops/activation.h"
#include "ops/op_params.h"
#include "ops/quant_math.h"
#include "ops/resize_taps.h"
#include "runtime/delegate.h"
#include "test_model.h"

namespace {

using nn::OperationType;
using T = OperationType;

// TensorFlow's SAME padding, written out from its documentation: the output is
// ceil(in / stride); the padding needed for that is split with the odd pixel after.
struct Same {
  int64_t out, before, after;
};
Same tensorflow_same(int64_t in, int64_t k, int64_t stride, int64_t dilation) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t needed = std::max<int64_t>((out - 1) * stride + (k - 1) * dilation + 1 - in, 0);
  return {out, needed / 2, needed - needed / 2};
}

TEST(SamePadding, EveryWindowOpDecodesTensorFlowsPadsAndOutputSize) {
  size_t checked = 0;
  for (uint32_t in = 1; in <= 13; in += 2)
    for (uint32_t k = 1; k <= 5; ++k)
      for (int32_t stride = 1; stride <= 3; ++stride)
        for (int32_t dilation = 1; dilation <= 3; ++dilation)
          for (T type : {T::CONV_2D, T::DEPTHWISE_CONV_2D, T::AVERAGE_POOL_2D, T::MAX_POOL_2D}) {
            const bool pool = type == T::AVERAGE_POOL_2D || type == T::MAX_POOL_2D;
            if (pool && dilation > 1) continue;
            SCOPED_TRACE(std::string(nn::operation_type_name(type)) + " in " + std::to_string(in) + "x" +
                         std::to_string(in + 1) + " k " + std::to_string(k) + " stride " + std::to_string(stride) +
                         " dilation " + std::to_string(dilation));
            nn_test::TestModel b;
            const uint32_t x = b.input({1, in, in + 1, 3});
            uint32_t y = 0;
            if (type == T::CONV_2D)
              y = b.op(type, {x, b.constant({2, k, k + 1, 3}, 1), b.constant({2}, 2), b.i32(1), b.i32(stride),
                              b.i32(stride), b.i32(0), b.boolean(false), b.i32(dilation), b.i32(dilation)});
            else if (type == T::DEPTHWISE_CONV_2D)
              y = b.op(type, {x, b.constant({1, k, k + 1, 3}, 1), b.constant({3}, 2), b.i32(1), b.i32(stride),
                              b.i32(stride), b.i32(1), b.i32(0), b.boolean(false), b.i32(dilation),
                              b.i32(dilation)});
            else
              y = b.op(type, {x, b.i32(1), b.i32(stride), b.i32(stride), b.i32(int32_t(k + 1)), b.i32(int32_t(k)),
                              b.i32(0)});
            b.output(y);
            nn::Status s = b.model->validate_and_infer_shapes();
            ASSERT_TRUE(s.is_ok()) << s.to_string();
            const Same h = tensorflow_same(in, k, stride, dilation);
            const Same w = tensorflow_same(in + 1, k + 1, stride, dilation);
            const nn::Dims& out = b.model->operands[y].dims;
            EXPECT_EQ(out[1], h.out);
            EXPECT_EQ(out[2], w.out);
            std::string why;
            const auto p = nn::parse_window_op(*b.model, b.model->operations[0], &why);
            ASSERT_TRUE(p.has_value()) << why;
            EXPECT_EQ(p->pad_top, h.before);
            EXPECT_EQ(p->pad_bottom, h.after);
            EXPECT_EQ(p->pad_left, w.before);
            EXPECT_EQ(p->pad_right, w.after);
            ++checked;
          }
  EXPECT_GT(checked, 500u);
}

// A transpose conv's SAME padding comes from its output (NNAPI): the delegates' form
// (non-negative pads plus an adjustment below the stride) must give back that output.
TEST(SamePadding, TransposeConvDelegateFormReproducesTheOutput) {
  size_t parsed = 0;
  for (uint32_t in = 1; in <= 9; in += 2)
    for (uint32_t k = 1; k <= 5; ++k)
      for (int32_t stride = 1; stride <= 3; ++stride)
        for (int32_t out = 1; out <= 3 * int32_t(in) + 4; ++out) {
          nn_test::TestModel b;
          const uint32_t x = b.input({1, in, in, 2});
          const uint32_t y =
              b.op(T::TRANSPOSE_CONV_2D, {x, b.constant({3, k, k, 2}, 1), b.constant({3}, 2), b.ints({1, out, out, 3}),
                                          b.i32(1), b.i32(stride), b.i32(stride), b.i32(0), b.boolean(false)});
          b.output(y);
          if (!b.model->validate_and_infer_shapes().is_ok()) continue;
          std::string why;
          const auto p = nn::parse_window_op(*b.model, b.model->operations[0], &why);
          if (!p) continue;  // not a deconvolution XNNPACK can express: stays on the reference kernel
          SCOPED_TRACE("in " + std::to_string(in) + " k " + std::to_string(k) + " stride " + std::to_string(stride) +
                       " out " + std::to_string(out));
          const int64_t produced =
              (int64_t(in) - 1) * stride + k - p->pad_top - p->pad_bottom + int64_t(p->adjustment_h);
          EXPECT_EQ(produced, out);
          EXPECT_LT(p->adjustment_h, uint32_t(stride));
          ++parsed;
        }
  EXPECT_GT(parsed, 100u);
}

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FusedActivation, TheRangesAreNnapis) {
  const nn::ActivationRange none = nn::fuse_code_range(0), relu = nn::fuse_code_range(1),
                            relu1 = nn::fuse_code_range(2), relu6 = nn::fuse_code_range(3);
  EXPECT_EQ(none.lo, -kInf);
  EXPECT_EQ(none.hi, kInf);
  EXPECT_EQ(relu.lo, 0.f);
  EXPECT_EQ(relu.hi, kInf);
  EXPECT_EQ(relu1.lo, -1.f);
  EXPECT_EQ(relu1.hi, 1.f);
  EXPECT_EQ(relu6.lo, 0.f);
  EXPECT_EQ(relu6.hi, 6.f);
  EXPECT_EQ(nn::clamp_activation_code(T::RELU), nn::FuseCode::RELU);
  EXPECT_EQ(nn::clamp_activation_code(T::RELU1), nn::FuseCode::RELU1);
  EXPECT_EQ(nn::clamp_activation_code(T::RELU6), nn::FuseCode::RELU6);
  EXPECT_FALSE(nn::clamp_activation_code(T::HARD_SWISH).has_value());
}

// The quantized kernels clamp to the float range quantized with the output's parameters.
TEST(FusedActivation, QuantizedRangeIsTheFloatRangeQuantized) {
  for (nn::OperandType type : {nn::OperandType::TENSOR_QUANT8_ASYMM, nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED})
    for (float scale : {0.01f, 0.05f, 0.1f})
      for (int32_t zero : {-20, 0, 5, 100})
        for (int32_t code = 0; code <= 3; ++code) {
          nn::Operand out;
          out.type = type;
          out.scale = scale;
          out.zero_point = type == nn::OperandType::TENSOR_QUANT8_ASYMM ? zero + 28 : zero;
          const nn::quant::Range stored = nn::quant::type_range(type);
          const nn::ActivationRange f = nn::fuse_code_range(code);
          auto q = [&](float v) {
            if (std::isinf(v)) return v < 0 ? stored.lo : stored.hi;
            return std::clamp(out.zero_point + int32_t(std::round(v / scale)), stored.lo, stored.hi);
          };
          const nn::quant::Range r = nn::quant::activation_range(code, out);
          SCOPED_TRACE("code " + std::to_string(code) + " scale " + std::to_string(scale) + " zero " +
                       std::to_string(out.zero_point));
          EXPECT_EQ(r.lo, q(f.lo));
          EXPECT_EQ(r.hi, q(f.hi));
        }
}

// ADD with each fuse code, then each clamp op on its own, on every delegate here: the
// outputs are exactly the sum clamped to fuse_code_range (inputs span [-9, 9]).
TEST(FusedActivation, EveryDelegateClampsToTheSameRange) {
  std::vector<std::string> delegates = {"reference", "cpu"};
  if (nn::make_delegate("vulkan")->available().is_ok()) delegates.push_back("vulkan");
  const size_t n = 2 * 5 * 13 * 7;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = -9.f + 18.f * float(i) / float(n - 1);
    b[i] = 0.25f * float(int(i % 5) - 2);
  }
  for (int32_t code = 0; code <= 3; ++code)
    for (bool standalone : {false, true}) {
      const T clamp_op = code == 1 ? T::RELU : code == 2 ? T::RELU1 : T::RELU6;
      if (standalone && code == 0) continue;
      nn_test::TestModel m;
      const uint32_t x = m.input({2, 5, 13, 7}), y = m.input({2, 5, 13, 7});
      const uint32_t sum = m.op(T::ADD, {x, y, m.i32(standalone ? 0 : code)});
      m.output(standalone ? m.op(clamp_op, {sum}) : sum);
      ASSERT_TRUE(m.model->validate_and_infer_shapes().is_ok());
      const nn::ActivationRange r = nn::fuse_code_range(code);
      for (const std::string& d : delegates) {
        SCOPED_TRACE(d + " code " + std::to_string(code) + (standalone ? " as an op" : " fused"));
        nn::SessionOptions o;
        o.delegates = {d};
        auto s = nn::Session::open(m.model, o);
        ASSERT_TRUE(s.is_ok()) << s.status().to_string();
        ASSERT_TRUE((*s)->set_input(0, a.data(), n * sizeof(float)).is_ok());
        ASSERT_TRUE((*s)->set_input(1, b.data(), n * sizeof(float)).is_ok());
        ASSERT_TRUE((*s)->run().is_ok());
        for (const auto& p : (*s)->report().partitions) EXPECT_EQ(p.delegate, d);
        const float* got = (*s)->output_f32(0);
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) wrong += got[i] != std::clamp(a[i] + b[i], r.lo, r.hi);
        EXPECT_EQ(wrong, 0u);
      }
    }
}

// Bilinear taps by TFLite's coordinate rules, computed here from the published formulas
// (half-pixel: src = (dst + 0.5) * in / out - 0.5; align corners: dst * (in - 1) / (out - 1)).
TEST(BilinearTaps, FollowTfLitesCoordinateRules) {
  for (uint32_t in : {1u, 2u, 5u, 13u})
    for (uint32_t out : {1u, 3u, 8u, 27u})
      for (int mode = 0; mode < 3; ++mode) {
        const bool align = mode == 1, half = mode == 2;
        const std::vector<nn::BilinearTap> taps = nn::bilinear_taps(in, out, align, half);
        ASSERT_EQ(taps.size(), out);
        for (uint32_t d = 0; d < out; ++d) {
          const double scale = align && out > 1 ? double(in - 1) / double(out - 1) : double(in) / double(out);
          const double src = half ? (d + 0.5) * scale - 0.5 : d * scale;
          const int64_t lo = std::max<int64_t>(int64_t(std::floor(src)), 0);
          const int64_t hi = std::min<int64_t>(int64_t(std::ceil(src)), int64_t(in) - 1);
          SCOPED_TRACE("in " + std::to_string(in) + " out " + std::to_string(out) + " mode " + std::to_string(mode) +
                       " dst " + std::to_string(d));
          EXPECT_EQ(taps[d].lo, uint32_t(lo));
          EXPECT_EQ(taps[d].hi, uint32_t(hi));
          EXPECT_NEAR(taps[d].frac, src - double(lo), 1e-5);
        }
      }
}

}  // namespace
