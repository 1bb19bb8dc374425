// An int8 TFLite model built in the test with TFLite's conventions (activations asymmetric
// int8, weights symmetric int8 per channel along the output channel, int32 bias with scale
// input_scale x weight_scale[c]): QUANTIZE -> CONV_2D (relu) -> DEPTHWISE_CONV_2D -> ADD ->
// AVERAGE_POOL_2D -> DEQUANTIZE. It must import as quantized IR ops (not dequantized to
// float), and its output must match a float computation of the same graph done here with
// the dequantized weights, within the steps the intermediate roundings can add.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "import/tflite/tflite_importer.h"
#include "nn/import/import.h"
#include "nn/ir/model.h"
#include "nn/ops/registry.h"
#include "test_support.h"
#include "tflite_builder.h"

namespace {

using nn::OperandType;
using tflite_test::TinyModel;

constexpr int H = 9, W = 7, CIN = 5, COUT = 11, OH = 5, OW = 4;  // conv 3x3 stride 2 SAME

// Symmetric per-channel int8 weights of a float tensor whose channel is `axis` of `dims`.
std::vector<int8_t> quantize_per_channel(const std::vector<float>& w, const std::vector<int>& dims, int axis,
                                         std::vector<float>* scales) {
  size_t inner = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int channels = dims[axis];
  scales->assign(channels, 0.f);
  for (size_t i = 0; i < w.size(); ++i) {
    float& s = (*scales)[(i / inner) % channels];
    s = std::max(s, std::fabs(w[i]) / 127.f);
  }
  std::vector<int8_t> q(w.size());
  for (size_t i = 0; i < w.size(); ++i) q[i] = int8_t(std::lround(w[i] / (*scales)[(i / inner) % channels]));
  return q;
}

TEST(TfliteInt8, PerChannelModelImportsAsQuantizedOpsAndRuns) {
  std::mt19937 rng(18);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wc(COUT * 3 * 3 * CIN), wd(1 * 3 * 3 * COUT), bc(COUT), bd(COUT);
  for (float& v : wc) v = u(rng) * 0.4f;
  for (float& v : wd) v = u(rng) * 0.6f;
  for (float& v : bc) v = u(rng) * 0.2f;
  for (float& v : bd) v = u(rng) * 0.2f;
  std::vector<float> sc, sd;
  const std::vector<int8_t> qc = quantize_per_channel(wc, {COUT, 3, 3, CIN}, 0, &sc);
  const std::vector<int8_t> qd = quantize_per_channel(wd, {1, 3, 3, COUT}, 3, &sd);
  const float s_in = 2.f / 255, s1 = 0.02f, s2 = 0.03f, s3 = 0.035f;
  const int64_t zp_in = -1, zp1 = -128, zp2 = 5, zp3 = -3;
  std::vector<int32_t> qbc(COUT), qbd(COUT);
  for (int c = 0; c < COUT; ++c) {
    qbc[c] = int32_t(std::lround(bc[c] / (s_in * sc[c])));
    qbd[c] = int32_t(std::lround(bd[c] / (s1 * sd[c])));
  }
  std::vector<float> sbc(COUT), sbd(COUT);
  for (int c = 0; c < COUT; ++c) sbc[c] = s_in * sc[c], sbd[c] = s1 * sd[c];

  TinyModel t;
  const auto I8 = tflite::TensorType_INT8;
  const int x = t.tensor({1, H, W, CIN}, tflite::TensorType_FLOAT32, "x");
  const int xq = t.tensor({1, H, W, CIN}, I8, "xq", nullptr, 0, {s_in}, 0, {zp_in});
  const int wct = t.tensor({COUT, 3, 3, CIN}, I8, "conv_w", qc.data(), qc.size(), sc, 0);
  const int bct = t.tensor({COUT}, tflite::TensorType_INT32, "conv_b", qbc.data(), qbc.size() * 4, sbc, 0);
  const int y1 = t.tensor({1, OH, OW, COUT}, I8, "y1", nullptr, 0, {s1}, 0, {zp1});
  const int wdt = t.tensor({1, 3, 3, COUT}, I8, "dw_w", qd.data(), qd.size(), sd, 3);
  const int bdt = t.tensor({COUT}, tflite::TensorType_INT32, "dw_b", qbd.data(), qbd.size() * 4, sbd, 0);
  const int y2 = t.tensor({1, OH, OW, COUT}, I8, "y2", nullptr, 0, {s2}, 0, {zp2});
  const int y3 = t.tensor({1, OH, OW, COUT}, I8, "y3", nullptr, 0, {s3}, 0, {zp3});
  const int y4 = t.tensor({1, 2, 2, COUT}, I8, "y4", nullptr, 0, {s3}, 0, {zp3});
  const int y = t.tensor({1, 2, 2, COUT}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_QUANTIZE), {x}, {xq});
  t.op(t.opcode(tflite::BuiltinOperator_CONV_2D), {xq, wct, bct}, {y1}, tflite::BuiltinOptions_Conv2DOptions,
       tflite::CreateConv2DOptions(t.fbb(), tflite::Padding_SAME, 2, 2, tflite::ActivationFunctionType_RELU).Union());
  t.op(t.opcode(tflite::BuiltinOperator_DEPTHWISE_CONV_2D), {y1, wdt, bdt}, {y2},
       tflite::BuiltinOptions_DepthwiseConv2DOptions,
       tflite::CreateDepthwiseConv2DOptions(t.fbb(), tflite::Padding_SAME, 1, 1, 1).Union());
  t.op(t.opcode(tflite::BuiltinOperator_ADD), {y1, y2}, {y3}, tflite::BuiltinOptions_AddOptions,
       tflite::CreateAddOptions(t.fbb()).Union());
  t.op(t.opcode(tflite::BuiltinOperator_AVERAGE_POOL_2D), {y3}, {y4}, tflite::BuiltinOptions_Pool2DOptions,
       tflite::CreatePool2DOptions(t.fbb(), tflite::Padding_VALID, 2, 2, 2, 2).Union());
  t.op(t.opcode(tflite::BuiltinOperator_DEQUANTIZE), {y4}, {y});
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "int8.tflite", {});
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  nn::Model& m = **result;
  EXPECT_EQ(m.op_summary(),
            "QUANTIZE x 1, CONV_2D x 1, DEPTHWISE_CONV_2D x 1, ADD x 1, AVERAGE_POOL_2D x 1, DEQUANTIZE x 1");
  // Quantized all the way: int8 activations, per-channel weights on the right dims, int32 bias.
  const nn::Operation& conv = m.operations[1];
  EXPECT_EQ(m.operands[conv.inputs[0]].type, OperandType::TENSOR_QUANT8_ASYMM_SIGNED);
  EXPECT_EQ(m.operands[conv.inputs[1]].type, OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL);
  EXPECT_EQ(m.operands[conv.inputs[1]].channel_quant.channel_dim, 0u);
  EXPECT_EQ(m.operands[conv.inputs[2]].type, OperandType::TENSOR_INT32);
  EXPECT_EQ(m.operands[conv.outputs[0]].zero_point, zp1);
  EXPECT_EQ(m.operands[m.operations[2].inputs[1]].channel_quant.channel_dim, 3u);
  ASSERT_TRUE(m.validate_and_infer_shapes().is_ok());

  std::vector<float> in(H * W * CIN);
  for (float& v : in) v = u(rng);
  std::vector<float> out(2 * 2 * COUT);
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  const nn::Status ran = nn::run_reference(m, ins, outs);
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();

  // The same graph in float with the dequantized weights, input rounded as QUANTIZE does.
  auto deq_c = [&](int co, int kh, int kw, int ci) { return qc[((co * 3 + kh) * 3 + kw) * CIN + ci] * sc[co]; };
  std::vector<double> a1(OH * OW * COUT), a2(OH * OW * COUT);
  for (int oh = 0; oh < OH; ++oh)
    for (int ow = 0; ow < OW; ++ow)
      for (int co = 0; co < COUT; ++co) {
        double s = qbc[co] * double(s_in) * sc[co];
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            const int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;  // SAME: one pixel of padding each side
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            for (int ci = 0; ci < CIN; ++ci) {
              const float xr = std::clamp(std::round(in[(ih * W + iw) * CIN + ci] / s_in) + zp_in, -128.f, 127.f);
              s += (xr - zp_in) * s_in * deq_c(co, kh, kw, ci);
            }
          }
        a1[(oh * OW + ow) * COUT + co] = std::max(s, 0.0);
      }
  for (int oh = 0; oh < OH; ++oh)
    for (int ow = 0; ow < OW; ++ow)
      for (int c = 0; c < COUT; ++c) {
        double s = qbd[c] * double(s1) * sd[c];
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            const int ih = oh - 1 + kh, iw = ow - 1 + kw;
            if (ih < 0 || ih >= OH || iw < 0 || iw >= OW) continue;
            s += a1[(ih * OW + iw) * COUT + c] * qd[(kh * 3 + kw) * COUT + c] * sd[c];
          }
        a2[(oh * OW + ow) * COUT + c] = s;
      }
  double worst = 0, peak = 0;
  for (size_t i = 0; i < a1.size(); ++i) peak = std::max({peak, a1[i] / s1, std::fabs(a2[i]) / s2});
  ASSERT_LT(peak, 120.0) << "the test's scales must not saturate (steps from the zero point)";
  for (int ph = 0; ph < 2; ++ph)
    for (int pw = 0; pw < 2; ++pw)
      for (int c = 0; c < COUT; ++c) {
        double s = 0;
        for (int dh = 0; dh < 2; ++dh)
          for (int dw = 0; dw < 2; ++dw) {
            const size_t i = ((ph * 2 + dh) * OW + pw * 2 + dw) * COUT + c;
            s += a1[i] + a2[i];
          }
        worst = std::max(worst, std::fabs(s / 4 - out[(ph * 2 + pw) * COUT + c]) / s3);
      }
  // Roundings at y1 (s1, carried through the depthwise and the add), y2 and y3: a few steps of s3.
  EXPECT_LE(worst, 3.0) << "max error in output steps";
  std::printf("int8 TFLite graph vs float: max error %.2f output steps\n", worst);
}

}  // namespace
