// Post-training quantization (engine/quantize): the int8 model's form by NNAPI's rules, its
// round trip through the .nnapi file, and its accuracy on the selfie model with Megamind
// frames (calibration frames apart from the test frames, as bench/int8.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <cmath>
#include <filesystem>
#include <random>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "int8_test_util.h"
#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"
#include "nn/ops/registry.h"
#include "nn/quantize/quantize.h"
#include "nn/runtime/session.h"
#include "quantize/rewrite.h"
#include "tensor_io.h"
#include "test_support.h"

namespace nn {
namespace {

// conv 3x3 SAME (8 -> 12, ReLU) -> depthwise 3x3 VALID stride 2 -> FULLY_CONNECTED 5: input [1,9,7,8].
std::shared_ptr<Model> small_float_model() {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 9, 7, 8}, "x");
  auto w1 = nn_test::random_floats(12 * 3 * 3 * 8, 1, -0.5f, 0.5f);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] *= 1.f + static_cast<float>(i / 72);  // channels' ranges differ
  const uint32_t f1 = m->add_constant_f32({12, 3, 3, 8}, w1, "w1");
  const uint32_t b1 = m->add_constant_f32({12}, nn_test::random_floats(12, 2, -0.2f, 0.2f), "b1");
  const uint32_t c1 = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "conv");
  const uint32_t r1 = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "relu");
  m->add_operation(OperationType::CONV_2D,
                   {x, f1, b1, m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(0)},
                   {c1});
  m->add_operation(OperationType::RELU, {c1}, {r1});
  const uint32_t f2 = m->add_constant_f32({1, 3, 3, 12}, nn_test::random_floats(108, 3, -0.7f, 0.7f), "w2");
  const uint32_t b2 = m->add_constant_f32({12}, nn_test::random_floats(12, 4, -0.1f, 0.1f), "b2");
  const uint32_t d2 = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "dw");
  m->add_operation(OperationType::DEPTHWISE_CONV_2D,
                   {r1, f2, b2, m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(2),
                    m->add_scalar_i32(1), m->add_scalar_i32(0)},
                   {d2});
  const uint32_t w3 = m->add_constant_f32({5, 4 * 3 * 12}, nn_test::random_floats(5 * 144, 5, -0.1f, 0.1f), "w3");
  const uint32_t b3 = m->add_constant_f32({5}, nn_test::random_floats(5, 6), "b3");
  const uint32_t y = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  m->add_operation(OperationType::FULLY_CONNECTED, {d2, w3, b3, m->add_scalar_i32(0)}, {y});
  m->inputs = {x};
  m->outputs = {y};
  m->operands[x].lifetime = Lifetime::MODEL_INPUT;
  m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
  EXPECT_TRUE(m->validate_and_infer_shapes().is_ok());
  return m;
}

quantize::InputProvider random_inputs() {
  return [](size_t i, std::vector<Tensor>& in) {
    auto v = nn_test::random_floats(in[0].size(), 100 + static_cast<uint32_t>(i), -1.f, 1.f);
    std::copy(v.begin(), v.end(), in[0].f32());
    return Status::ok();
  };
}

std::vector<float> run(const std::shared_ptr<const Model>& m, const std::vector<float>& x, const char* delegate) {
  SessionOptions so;
  so.delegates = {delegate};
  auto s = Session::open(m, so);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_TRUE((*s)->set_input(0, x.data(), x.size() * 4).is_ok());
  EXPECT_TRUE((*s)->run().is_ok());
  const float* y = (*s)->output_f32(0);
  return std::vector<float>(y, y + num_elements((*s)->output_desc(0).dims));
}

TEST(Quantize, IntModelFollowsNnapiRulesAndRoundTripsThroughTheFile) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;  // every op int8 (random weights: the output error is not the point here)
  quantize::QuantizeReport report;
  auto q = quantize::quantize_model(*f, 16, random_inputs(), opt, &report);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(report.quantized_ops(), 3u) << report.to_string();  // RELU folded into the conv
  // Float at the edges, int8 between: QUANTIZE, CONV, DEPTHWISE, FC, DEQUANTIZE and nothing else.
  std::vector<OperationType> types;
  for (const Operation& op : q->operations) types.push_back(op.type);
  EXPECT_EQ(types, (std::vector<OperationType>{OperationType::QUANTIZE, OperationType::CONV_2D,
                                               OperationType::DEPTHWISE_CONV_2D, OperationType::FULLY_CONNECTED,
                                               OperationType::DEQUANTIZE}));
  const Operation& conv = q->operations[1];
  const Operand& filter = q->operands[conv.inputs[1]];
  ASSERT_EQ(filter.type, OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL);
  EXPECT_EQ(filter.channel_quant.channel_dim, 0u);
  ASSERT_EQ(filter.channel_quant.scales.size(), 12u);
  EXPECT_GT(filter.channel_quant.scales[11], 5 * filter.channel_quant.scales[0]);  // per channel, not one scale
  EXPECT_EQ(q->operands[conv.inputs[2]].type, OperandType::TENSOR_INT32);
  EXPECT_EQ(q->scalar_i32(conv.inputs[6]), 1);  // the RELU, as the conv's fuse code
  EXPECT_EQ(q->operands[conv.outputs[0]].type, OperandType::TENSOR_QUANT8_ASYMM_SIGNED);
  EXPECT_EQ(q->operands[conv.outputs[0]].zero_point, -128);  // ReLU output: [0, hi]
  const Operand& dw = q->operands[q->operations[2].inputs[1]];
  EXPECT_EQ(dw.channel_quant.channel_dim, 3u);
  EXPECT_EQ(q->operands[q->operations[3].inputs[1]].type, OperandType::TENSOR_QUANT8_ASYMM_SIGNED);  // FC: per tensor

  const std::string path = (std::filesystem::temp_directory_path() / "nn_quantize_roundtrip.nnapi").string();
  ASSERT_TRUE(save_nnapi_file(*q, path).is_ok());
  auto loaded = load_nnapi_file(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const Operand& lf = (*loaded)->operands[(*loaded)->operations[1].inputs[1]];
  EXPECT_EQ(lf.type, OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL);
  EXPECT_EQ(lf.channel_quant.scales, filter.channel_quant.scales);
  EXPECT_EQ(lf.channel_quant.channel_dim, 0u);
  std::filesystem::remove(path);

  // Same numbers from the file as in memory, and close to the float model.
  const auto x = nn_test::random_floats(9 * 7 * 8, 999, -1.f, 1.f);
  auto qm = std::make_shared<Model>(std::move(*q));
  const auto yq = run(qm, x, "reference");
  const auto yl = run(*loaded, x, "reference");
  const auto yf = run(f, x, "reference");
  EXPECT_EQ(yq, yl);
  double err = 0, ref = 0;
  for (size_t i = 0; i < yf.size(); ++i) {
    err += (yq[i] - yf[i]) * (yq[i] - yf[i]);
    ref += yf[i] * yf[i];
  }
  EXPECT_LT(std::sqrt(err / ref), 0.05);
}

// nnconvert's latency line: both models timed on the CPU delegate, alternating, and the
// int8 model's ops counted as int8, float (kept by the limits) and converts; the line says
// when int8 does not pay. Bad arguments and a failing input provider are errors, not crashes.
TEST(Quantize, LatencyComparisonTimesBothModelsAndCountsTheirOps) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;  // every op int8
  auto all = quantize::quantize_model(*f, 4, random_inputs(), opt);
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  auto c = quantize::compare_latency(f, std::make_shared<Model>(std::move(*all)), random_inputs(), 5);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_GT(c->float_ms, 0);
  EXPECT_GT(c->int8_ms, 0);
  EXPECT_EQ(c->runs, 5u);
  EXPECT_EQ(c->int8_ops, 3u);  // conv (its RELU folded), depthwise, FC
  EXPECT_EQ(c->float_ops, 0u);
  EXPECT_EQ(c->converts, 2u);  // QUANTIZE in, DEQUANTIZE out
  EXPECT_NE(c->to_string().find("latency here"), std::string::npos) << c->to_string();

  opt.keep_float = {1};  // the depthwise (op 1 once the RELU is folded) stays float
  auto some = quantize::quantize_model(*f, 4, random_inputs(), opt);
  ASSERT_TRUE(some.is_ok()) << some.status().to_string();
  c = quantize::compare_latency(f, std::make_shared<Model>(std::move(*some)), random_inputs(), 3);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->int8_ops, 2u);
  EXPECT_EQ(c->float_ops, 1u);
  EXPECT_EQ(c->converts, 4u);  // around the float depthwise too

  quantize::LatencyComparison slower;
  slower.float_ms = 1, slower.int8_ms = 1.2, slower.runs = 3, slower.float_ops = 4, slower.int8_ops = 6,
  slower.converts = 5;
  EXPECT_NE(slower.to_string().find("int8 is not faster here: 4 of 10 ops stay float"), std::string::npos)
      << slower.to_string();
  quantize::LatencyComparison faster = slower;
  faster.int8_ms = 0.5;
  EXPECT_EQ(faster.to_string().find("not faster"), std::string::npos) << faster.to_string();

  EXPECT_FALSE(quantize::compare_latency(f, f, random_inputs(), 0).is_ok());
  auto failing = [](size_t, std::vector<Tensor>&) {
    return Status(StatusCode::kInvalidArgument, "no sample");
  };
  auto bad = quantize::compare_latency(f, f, failing, 3);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("no sample"), std::string::npos);
}

TEST(Quantize, AnOpOverTheErrorLimitStaysFloat) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_error = 1e-6;  // nothing int8 is that close
  quantize::QuantizeReport report;
  auto q = quantize::quantize_model(*f, 4, random_inputs(), opt, &report);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_EQ(report.quantized_ops(), 0u);
  for (const Operation& op : q->operations) EXPECT_NE(op.type, OperationType::QUANTIZE);
}

// The selfie model quantized on Megamind frames 0-87, its mask against the float model's on
// frames 90-267 (every 30th here; bench/int8.py takes every 3rd).
TEST(Quantize, SelfieInt8MaskMatchesFloatOnMegamindFrames) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  auto f = load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(f.is_ok());
  const Model& model = **f;
  cv::VideoCapture cap(nn_test::asset("media/Megamind.avi"));
  ASSERT_TRUE(cap.isOpened());
  std::vector<std::string> calib, test_frames;
  const std::string dir = (std::filesystem::temp_directory_path() / "nn_quantize_frames").string();
  std::filesystem::create_directories(dir);
  cv::Mat frame;
  for (int i = 0; cap.read(frame) && i < 270; ++i) {
    if (i < 90 && i % 3 == 0) calib.push_back(dir + "/c" + std::to_string(i) + ".png");
    else if (i >= 90 && i % 30 == 0) test_frames.push_back(dir + "/t" + std::to_string(i) + ".png");
    else continue;
    cv::imwrite(i < 90 ? calib.back() : test_frames.back(), frame);
  }
  ASSERT_EQ(calib.size(), 30u);
  ASSERT_EQ(test_frames.size(), 6u);
  quantize::QuantizeOptions opt;
  auto provider = [&](size_t i, std::vector<Tensor>& in) {
    return tools::image_to_input(calib[i], model, 0, in[0].data());
  };
  auto q = quantize::quantize_model(model, calib.size(), provider, opt);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  auto qm = std::make_shared<Model>(std::move(*q));
  std::vector<double> ious;
  for (const std::string& path : test_frames) {
    std::vector<float> x(num_elements(model.operands[model.inputs[0]].dims));
    ASSERT_TRUE(tools::image_to_input(path, model, 0, x.data()).is_ok());
    const auto yf = run(*f, x, "cpu");
    const auto yq = run(qm, x, "cpu");
    size_t inter = 0, uni = 0;
    for (size_t i = 0; i < yf.size(); ++i) {
      inter += yf[i] > 0.5f && yq[i] > 0.5f;
      uni += yf[i] > 0.5f || yq[i] > 0.5f;
    }
    ious.push_back(uni ? static_cast<double>(inter) / uni : 1.0);
  }
  std::filesystem::remove_all(dir);
  std::sort(ious.begin(), ious.end());
  // Measured on these frames: median ~0.96 (bench/README.md, int8); a broken scale or
  // zero point drops it far below.
  EXPECT_GT(ious[ious.size() / 2], 0.9);
  EXPECT_GT(ious.front(), 0.7);
}

}  // namespace
}  // namespace nn

namespace nn {
namespace {

// Each int8 op of the quantized small model alone (int8 in, int8 out) on the CPU delegate
// (XNNPACK's qs8/qc8 nodes) against the reference kernels: within one step (XNNPACK
// requantizes in fp32 rounding to nearest-even, the reference rounds half away from zero;
// xnn_int8.h), and on XNNPACK, not on a reference fallback.
TEST(QuantizeCpu, Int8OpsOnXnnpackMatchTheReferenceWithinOneStep) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;
  auto q = quantize::quantize_model(*f, 16, random_inputs(), opt);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  for (uint32_t k = 1; k <= 3; ++k) {  // CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED
    quantize::Ranges none(q->operands.size()), sub_ranges;
    std::vector<uint32_t> ins;
    auto op = std::make_shared<Model>(quantize::extract_op(*q, k, none, &sub_ranges, &ins));
    ASSERT_TRUE(op->validate_and_infer_shapes().is_ok());
    const std::string name(operation_type_name(op->operations[0].type));
    std::vector<int8_t> x(num_elements(op->operands[op->inputs[0]].dims));
    std::mt19937 rng(k);
    for (int8_t& v : x) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    std::vector<std::vector<int8_t>> y;
    for (const char* d : {"reference", "cpu"}) {
      SessionOptions so;
      so.delegates = {d};
      so.cpu.native_int8 = false;  // XNNPACK's lowering under test (native_int8_test has ours)
      auto s = Session::open(op, so);
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      ASSERT_TRUE((*s)->set_input(0, x.data(), x.size()).is_ok());
      ASSERT_TRUE((*s)->run().is_ok());
      const auto* out = static_cast<const int8_t*>((*s)->output_data(0));
      y.emplace_back(out, out + num_elements((*s)->output_desc(0).dims));
      if (std::string(d) == "cpu") {
        auto kernels = (*s)->kernels();
        ASSERT_FALSE(kernels.empty());
        EXPECT_EQ(kernels[0].kernel, "xnnpack") << name;
      }
    }
    int worst = 0;
    size_t differ = 0;
    for (size_t i = 0; i < y[0].size(); ++i) {
      worst = std::max(worst, std::abs(y[0][i] - y[1][i]));
      differ += y[0][i] != y[1][i];
    }
    EXPECT_LE(worst, 1) << name;
    RecordProperty(name + "_elements_one_step_apart", static_cast<int>(differ));
    std::printf("%s int8: cpu (XNNPACK) vs reference: %zu of %zu elements differ, by at most %d\n", name.c_str(),
                differ, y[0].size(), worst);
  }
}

}  // namespace
}  // namespace nn

namespace nn {
namespace {

// One int8 op [1,7,9,5] -> out on the CPU delegate and the reference kernels.
struct Int8Case {
  std::shared_ptr<Model> model;
  std::string name;
};

Int8Case int8_op(OperationType type, Dims out_dims, float out_scale, int32_t out_zp) {
  auto m = std::make_shared<Model>();
  Operand in;
  in.type = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  in.dims = {1, 7, 9, 5};
  in.scale = 0.05f;
  in.zero_point = -7;
  in.lifetime = Lifetime::MODEL_INPUT;
  const uint32_t x = m->add_operand(in);
  Operand out = in;
  out.dims = out_dims;
  out.scale = out_scale;
  out.zero_point = out_zp;
  out.lifetime = Lifetime::MODEL_OUTPUT;
  const uint32_t y = m->add_operand(out);
  if (type == OperationType::RESIZE_BILINEAR)  // half-pixel centers, as the selfie model's
    m->add_operation(type,
                     {x, m->add_scalar_i32(static_cast<int32_t>(out_dims[2])),
                      m->add_scalar_i32(static_cast<int32_t>(out_dims[1])), m->add_scalar_bool(false),
                      m->add_scalar_bool(false), m->add_scalar_bool(true)},
                     {y});
  else  // a window over the whole image
    m->add_operation(type,
                     {x, m->add_scalar_i32(2), m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(9),
                      m->add_scalar_i32(7), m->add_scalar_i32(0)},
                     {y});
  m->inputs = {x};
  m->outputs = {y};
  EXPECT_TRUE(m->validate_and_infer_shapes().is_ok());
  return {m, std::string(operation_type_name(type))};
}

TEST(QuantizeCpu, Int8ResizeAndGlobalPoolOnXnnpackWithinOneStepOfTheReference) {
  for (const Int8Case& c : {int8_op(OperationType::RESIZE_BILINEAR, {1, 14, 18, 5}, 0.05f, -7),
                            int8_op(OperationType::AVERAGE_POOL_2D, {1, 1, 1, 5}, 0.05f, -7)}) {
    std::vector<int8_t> x(7 * 9 * 5);
    std::mt19937 rng(7);
    for (int8_t& v : x) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    std::vector<std::vector<int8_t>> y;
    for (const char* d : {"reference", "cpu"}) {
      SessionOptions so;
      so.delegates = {d};
      so.cpu.native_int8 = false;  // XNNPACK's lowering under test (native_int8_test has ours)
      auto s = Session::open(c.model, so);
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      ASSERT_TRUE((*s)->set_input(0, x.data(), x.size()).is_ok());
      ASSERT_TRUE((*s)->run().is_ok());
      const auto* out = static_cast<const int8_t*>((*s)->output_data(0));
      y.emplace_back(out, out + num_elements((*s)->output_desc(0).dims));
      if (std::string(d) == "cpu") {
        EXPECT_EQ((*s)->kernels().at(0).kernel, "xnnpack") << c.name;
      }
    }
    int worst = 0;
    size_t differ = 0;
    for (size_t i = 0; i < y[0].size(); ++i) {
      worst = std::max(worst, std::abs(y[0][i] - y[1][i]));
      differ += y[0][i] != y[1][i];
    }
    EXPECT_LE(worst, 1) << c.name;
    std::printf("%s int8: cpu (XNNPACK) vs reference: %zu of %zu elements differ, by at most %d\n", c.name.c_str(),
                differ, y[0].size(), worst);
  }
}

}  // namespace
}  // namespace nn

#include <onnx/onnx_pb.h>

#include "nn/export/onnx_export.h"

namespace nn {
namespace {

// nnexport of a quantized model: QDQ, with the IR's int8 weights and scales exactly.
TEST(QuantizeExport, Int8ModelExportsAsQdqWithTheIrWeightsAndScales) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;
  auto q = quantize::quantize_model(*f, 16, random_inputs(), opt);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  auto bytes = export_onnx_buffer(*q);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromArray(bytes->data(), static_cast<int>(bytes->size())));
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : proto.graph().initializer()) inits[t.name()] = &t;
  std::map<std::string, const onnx::NodeProto*> producer;
  std::map<std::string, int> count;
  for (const auto& n : proto.graph().node()) {
    for (const auto& o : n.output()) producer[o] = &n;
    count[n.op_type()]++;
  }
  EXPECT_EQ(count["Conv"], 2);
  EXPECT_EQ(count["Gemm"], 1);
  // The input's QUANTIZE and a Q/DQ pair after each int8 op: 4 QuantizeLinear.
  EXPECT_EQ(count["QuantizeLinear"], 4);

  const Operation& conv = q->operations[1];
  const Operand& filter = q->operands[conv.inputs[1]];
  const onnx::NodeProto* conv_node = nullptr;
  for (const auto& n : proto.graph().node())
    if (n.op_type() == "Conv" && !conv_node) conv_node = &n;
  ASSERT_TRUE(conv_node);
  const onnx::NodeProto* dq = producer[conv_node->input(1)];
  ASSERT_TRUE(dq && dq->op_type() == "DequantizeLinear");
  ASSERT_EQ(dq->attribute_size(), 1);
  EXPECT_EQ(dq->attribute(0).i(), 0);  // per output channel
  const onnx::TensorProto* w = inits[dq->input(0)];
  const onnx::TensorProto* scales = inits[dq->input(1)];
  ASSERT_TRUE(w && scales);
  EXPECT_EQ(w->data_type(), onnx::TensorProto::INT8);
  std::vector<float> s(12);
  ASSERT_EQ(scales->raw_data().size(), 12 * sizeof(float));
  std::memcpy(s.data(), scales->raw_data().data(), 48);
  EXPECT_EQ(s, filter.channel_quant.scales);
  // OIHW in ONNX, OHWI in the IR: the same int8 values.
  const auto* ir = filter.as<int8_t>();
  const auto* ox = reinterpret_cast<const int8_t*>(w->raw_data().data());
  size_t same = 0;
  for (size_t o = 0; o < 12; ++o)
    for (size_t i = 0; i < 8; ++i)
      for (size_t h = 0; h < 3; ++h)
        for (size_t x = 0; x < 3; ++x) same += ox[((o * 8 + i) * 3 + h) * 3 + x] == ir[((o * 3 + h) * 3 + x) * 8 + i];
  EXPECT_EQ(same, 12u * 8 * 3 * 3);
}

}  // namespace
}  // namespace nn

namespace nn {
namespace {

// QUANTIZE / DEQUANTIZE as XNNPACK converts: DEQUANTIZE equal; QUANTIZE rounds exact halves
// to even where the reference (NNAPI) rounds them away from zero: one step apart there only.
TEST(QuantizeCpu, QuantizeAndDequantizeConvertsAgainstTheReference) {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 7, 9, 5}, "x");
  m->operands[x].lifetime = Lifetime::MODEL_INPUT;
  Operand q;
  q.type = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  q.dims = {1, 7, 9, 5};
  q.scale = 0.5f;
  q.zero_point = 3;
  const uint32_t xq = m->add_operand(q);
  const uint32_t y = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 7, 9, 5}, "y");
  m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
  m->add_operation(OperationType::QUANTIZE, {x}, {xq});
  m->add_operation(OperationType::DEQUANTIZE, {xq}, {y});
  m->inputs = {x};
  m->outputs = {y};
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  // Every value a multiple of 0.25: half of them exact halves of the 0.5 step.
  std::vector<float> in(7 * 9 * 5);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.25f * (static_cast<int>(i % 97) - 48);
  std::vector<std::vector<float>> y2;
  for (const char* d : {"reference", "cpu"}) {
    SessionOptions so;
    so.delegates = {d};
    auto s = Session::open(m, so);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    ASSERT_TRUE((*s)->set_input(0, in.data(), in.size() * 4).is_ok());
    ASSERT_TRUE((*s)->run().is_ok());
    y2.emplace_back((*s)->output_f32(0), (*s)->output_f32(0) + in.size());
    if (std::string(d) == "cpu") {
      for (const StepTiming& k : (*s)->kernels()) EXPECT_EQ(k.kernel, "xnnpack");
    }
  }
  size_t halves = 0, differ = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool half = std::fmod(std::fabs(in[i]), 0.5f) == 0.25f;
    halves += half;
    if (y2[0][i] != y2[1][i]) {
      ++differ;
      EXPECT_TRUE(half) << in[i];                          // only exact halves differ
      EXPECT_EQ(std::fabs(y2[0][i] - y2[1][i]), 0.5f);     // by one step
    }
  }
  EXPECT_GT(differ, 0u);  // nearest-even and half-away do differ on this data
  std::printf("QUANTIZE int8: cpu (XNNPACK) vs reference: %zu of %zu elements (all exact halves; %zu halves) one step "
              "apart\n",
              differ, in.size(), halves);
}

}  // namespace
}  // namespace nn

#include "quantize/range_observer.h"

namespace nn {
namespace {

// Uniform [0, 10) with a few outliers at 12: min/max keeps them, the percentile and the
// entropy ranges clip them but keep the uniform body (clipping it would cost every value).
TEST(QuantizeRanges, CalibrationMethodsOnAUniformBodyWithOutliers) {
  quantize::RangeObserver obs;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> body(0.f, 10.f);
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<float> v(20000);
    for (float& x : v) x = body(rng);
    if (batch == 4) v[7] = v[8] = 12.f;
    obs.observe(v.data(), v.size());
  }
  using M = quantize::CalibrationMethod;
  EXPECT_FLOAT_EQ(obs.range(M::kMinMax, 99.99).hi, 12.f);
  const float p = obs.range(M::kPercentile, 99.99).hi;
  EXPECT_GT(p, 9.9f);
  EXPECT_LT(p, 10.1f);
  const float e = obs.range(M::kEntropy, 99.99).hi;
  EXPECT_GT(e, 9.f);
  EXPECT_LT(e, 12.f);
  EXPECT_GE(obs.range(M::kEntropy, 99.99).lo, 0.f);
}

}  // namespace
}  // namespace nn

namespace nn {
namespace {

// int8 ADD / MUL (inputs and output with different scales, MUL broadcasting a per-channel
// gate) and LOGISTIC on XNNPACK against the reference's integer kernels.
TEST(QuantizeCpu, Int8AddMulLogisticOnXnnpackWithinOneStepOfTheReference) {
  using nn_test::q8;
  struct Case {
    OperationType type;
    Dims b_dims;
  };
  for (const Case& c : {Case{OperationType::ADD, {1, 7, 9, 5}}, Case{OperationType::MUL, {1, 1, 1, 5}},
                        Case{OperationType::LOGISTIC, {}}}) {
    auto m = std::make_shared<Model>();
    const uint32_t a = m->add_operand(q8({1, 7, 9, 5}, 0.05f, -7, Lifetime::MODEL_INPUT));
    std::vector<uint32_t> ins = {a};
    if (c.type != OperationType::LOGISTIC) ins.push_back(m->add_operand(q8(c.b_dims, 0.03f, 11, Lifetime::MODEL_INPUT)));
    const bool logistic = c.type == OperationType::LOGISTIC;
    const uint32_t y = m->add_operand(
        q8({1, 7, 9, 5}, logistic ? 1.f / 256 : 0.07f, logistic ? -128 : 2, Lifetime::MODEL_OUTPUT));
    if (!logistic) ins.push_back(m->add_scalar_i32(c.type == OperationType::ADD ? 1 : 0));  // ADD with ReLU
    m->add_operation(c.type, ins, {y});
    m->inputs.assign(ins.begin(), ins.begin() + (logistic ? 1 : 2));
    m->outputs = {y};
    const std::string name(operation_type_name(c.type));
    ASSERT_TRUE(m->validate_and_infer_shapes().is_ok()) << name;
    std::mt19937 rng(11);
    std::vector<std::vector<int8_t>> x;
    for (uint32_t i : m->inputs) {
      x.emplace_back(num_elements(m->operands[i].dims));
      for (int8_t& v : x.back()) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    }
    std::vector<std::vector<int8_t>> out;
    for (const char* d : {"reference", "cpu"}) {
      SessionOptions so;
      so.delegates = {d};
      so.cpu.native_int8 = false;  // XNNPACK's lowering under test (native_int8_test has ours)
      auto s = Session::open(m, so);
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE((*s)->set_input(i, x[i].data(), x[i].size()).is_ok());
      ASSERT_TRUE((*s)->run().is_ok());
      const auto* o = static_cast<const int8_t*>((*s)->output_data(0));
      out.emplace_back(o, o + 7 * 9 * 5);
      if (std::string(d) == "cpu") {
        EXPECT_EQ((*s)->kernels().at(0).kernel, "xnnpack") << name;
      }
    }
    int worst = 0;
    size_t differ = 0;
    for (size_t i = 0; i < out[0].size(); ++i) {
      worst = std::max(worst, std::abs(out[0][i] - out[1][i]));
      differ += out[0][i] != out[1][i];
    }
    EXPECT_LE(worst, 1) << name;
    std::printf("%s int8: cpu (XNNPACK) vs reference: %zu of %zu elements differ, by at most %d\n", name.c_str(),
                differ, out[0].size(), worst);
  }
}

}  // namespace
}  // namespace nn

namespace nn {
namespace {

// The whole-model budget: with every op int8 the small model's output is further from float
// than the budget asks, so ops return to float, the one with the largest own output error
// first, until the model is within it; each step is in the report.
TEST(QuantizeBudget, OpsReturnToFloatUntilTheModelIsWithinTheBudget) {
  auto f = small_float_model();
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;  // every op passes its own limits
  quantize::QuantizeReport all;
  ASSERT_TRUE(quantize::quantize_model(*f, 16, random_inputs(), opt, &all).is_ok());
  ASSERT_EQ(all.quantized_ops(), 3u);
  const double unbudgeted = all.output_errors[0];
  ASSERT_GT(unbudgeted, 0.0);

  opt.max_output_error = unbudgeted * 0.5;
  opt.budget_lookahead = 1;  // strictly by own output error (the order checked below)
  quantize::QuantizeReport report;
  auto q = quantize::quantize_model(*f, 16, random_inputs(), opt, &report);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  std::printf("%s", report.to_string().c_str());
  ASSERT_GE(report.budget_steps.size(), 2u);
  EXPECT_FALSE(report.budget_steps[0].op_index.has_value());
  EXPECT_DOUBLE_EQ(report.budget_steps[0].output_error, unbudgeted);
  EXPECT_TRUE(report.output_errors[0] <= opt.max_output_error || report.quantized_ops() == 0)
      << report.output_errors[0];
  EXPECT_EQ(report.budget_steps.back().quantized_ops, report.quantized_ops());
  EXPECT_DOUBLE_EQ(report.budget_steps.back().output_error, report.output_errors[0]);
  // Returned in order of their own output error, largest first; each is float in the model.
  double last = 1e30;
  for (size_t s = 1; s < report.budget_steps.size(); ++s) {
    const quantize::OpQuantReport& r = report.ops[*report.budget_steps[s].op_index];
    EXPECT_TRUE(r.returned_by_budget);
    EXPECT_FALSE(r.quantized);
    EXPECT_LE(r.output_error, last);
    last = r.output_error;
    EXPECT_NE(r.reason.find("budget"), std::string::npos) << r.reason;
  }
  size_t int8_ops = 0;
  for (const Operation& op : q->operations)
    int8_ops += op.type != OperationType::QUANTIZE && op.type != OperationType::DEQUANTIZE &&
                q->operands[op.outputs[0]].type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  EXPECT_EQ(int8_ops, report.quantized_ops());

  // Looking ahead (each step's candidates tried on the model) also ends within the budget,
  // each step the lowest error its candidates gave.
  opt.budget_lookahead = 4;
  quantize::QuantizeReport ahead;
  ASSERT_TRUE(quantize::quantize_model(*f, 16, random_inputs(), opt, &ahead).is_ok());
  EXPECT_TRUE(ahead.output_errors[0] <= opt.max_output_error || ahead.quantized_ops() == 0);
  ASSERT_GE(ahead.budget_steps.size(), 2u);
  EXPECT_LE(ahead.budget_steps[1].output_error, report.budget_steps[1].output_error + 1e-9);
}

// The automatic range margin: calibration inputs whose amplitude jumps in the last chunk
// (the held-out chunk reaches past the other three) widen the ranges, by at most
// max_auto_margin; a fixed margin widens them by itself.
TEST(QuantizeRanges, AutomaticMarginWidensRangesTheHeldOutChunksOvershoot) {
  auto f = small_float_model();
  auto louder_last_chunk = [](float gain) {
    return [gain](size_t i, std::vector<Tensor>& in) {
      auto v = nn_test::random_floats(in[0].size(), 100 + static_cast<uint32_t>(i), -1.f, 1.f);
      for (size_t k = 0; k < v.size(); ++k) in[0].f32()[k] = v[k] * (i < 12 ? 1.f : gain);  // 16 samples
      return Status::ok();
    };
  };
  auto conv_hi = [&](const quantize::InputProvider& p, std::optional<double> margin) {
    quantize::QuantizeOptions opt;
    opt.delegates = {"reference"};
    opt.method = quantize::CalibrationMethod::kMinMax;
    opt.range_margin = margin;
    quantize::QuantizeReport r;
    EXPECT_TRUE(quantize::quantize_model(*f, 16, p, opt, &r).is_ok());
    return r.ops[0].range_hi;  // the conv (+ ReLU): [0, hi]
  };
  const float none = conv_hi(louder_last_chunk(2.5f), 0.0), automatic = conv_hi(louder_last_chunk(2.5f), std::nullopt);
  const float fixed = conv_hi(louder_last_chunk(2.5f), 0.25);
  std::printf("conv range hi, last chunk 2.5x: no margin %.3f, automatic %.3f, fixed 0.25 %.3f\n", none, automatic,
              fixed);
  EXPECT_NEAR(fixed, none * 1.25f, none * 1e-4f);
  EXPECT_GT(automatic, none * 1.3f);  // the 2.5x chunk reaches well past the others
  const float capped_none = conv_hi(louder_last_chunk(10.f), 0.0);
  const float capped = conv_hi(louder_last_chunk(10.f), std::nullopt);
  std::printf("last chunk 10x: no margin %.3f, automatic %.3f (max_auto_margin 1)\n", capped_none, capped);
  EXPECT_NEAR(capped, capped_none * 2.f, capped_none * 1e-4f);
}

}  // namespace
}  // namespace nn
