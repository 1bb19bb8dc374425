// The IR -> ONNX exporter, checked against another runtime: every exported graph is run by
// OpenCV DNN 4.6 (its own ONNX reader and kernels) and compared with the IR run by our
// reference kernels on the same input. Real models (both MediaPipe selfie models from
// TFLite, MobileNetV2 round-tripped from ONNX) and small synthetic graphs for the ops the
// real models do not use.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "nn/export/onnx_export.h"
#include "nn/import/import.h"
#include "nn/ops/registry.h"
#include "npy.h"
#include "test_support.h"

namespace {

using nn::Dims;
using nn::Model;
using nn::OperandType;
using nn::OperationType;

constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;

std::vector<float> nhwc_to_nchw(const std::vector<float>& v, const Dims& d) {
  std::vector<float> out(v.size());
  const size_t n = d[0], h = d[1], w = d[2], c = d[3];
  for (size_t a = 0; a < n; ++a)
    for (size_t y = 0; y < h; ++y)
      for (size_t x = 0; x < w; ++x)
        for (size_t ch = 0; ch < c; ++ch)
          out[((a * c + ch) * h + y) * w + x] = v[((a * h + y) * w + x) * c + ch];
  return out;
}

bool is_nchw(const std::vector<std::string>& layouts, size_t i, const Dims& d) {
  return d.size() == 4 && i < layouts.size() && layouts[i] == "NCHW";
}

struct Exported {
  std::vector<uint8_t> bytes;
  onnx::ModelProto proto;
};

Exported export_or_fail(const Model& model) {
  Exported e;
  auto bytes = nn::export_onnx_buffer(model);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes.is_ok()) return e;
  e.bytes = std::move(bytes.value());
  EXPECT_TRUE(e.proto.ParseFromArray(e.bytes.data(), static_cast<int>(e.bytes.size())));
  return e;
}

// Runs `model` with the reference kernels and its ONNX export with OpenCV DNN on the same
// inputs (from `inputs`, or seeded uniform [lo, hi)); returns the worst relative error.
double opencv_vs_reference(const Model& model, const Exported& exported, uint32_t seed,
                           std::vector<std::vector<float>> inputs = {}, float lo = 0.f, float hi = 1.f,
                           std::vector<float>* reference_output0 = nullptr,
                           double* reference_noise = nullptr) {
  const auto& md = model.metadata;
  for (size_t i = inputs.size(); i < model.inputs.size(); ++i)
    inputs.push_back(nn_test::random_floats(nn::num_elements(model.operands[model.inputs[i]].dims),
                                            seed + static_cast<uint32_t>(i), lo, hi));
  std::vector<std::vector<float>> expected;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (auto& v : inputs) in_ptrs.push_back(v.data());
  for (uint32_t o : model.outputs) expected.emplace_back(nn::num_elements(model.operands[o].dims));
  for (auto& v : expected) out_ptrs.push_back(v.data());
  nn::Status s = nn::run_reference(model, in_ptrs, out_ptrs);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return 1e9;
  if (reference_output0) *reference_output0 = expected[0];
  if (reference_noise) {
    // How far the reference itself moves when every input element moves by one ulp: the
    // floor of what any other float32 runtime (another summation order) can agree to.
    std::vector<std::vector<float>> nudged = inputs, moved = expected;
    std::mt19937 rng(seed);
    for (auto& v : nudged)
      for (float& x : v)
        x = std::nextafter(x, (rng() & 1) ? 2.f * std::abs(x) + 1.f : -2.f * std::abs(x) - 1.f);
    std::vector<const void*> nin;
    std::vector<void*> nout;
    for (auto& v : nudged) nin.push_back(v.data());
    for (auto& v : moved) nout.push_back(v.data());
    EXPECT_TRUE(nn::run_reference(model, nin, nout).is_ok());
    *reference_noise = 0;
    for (size_t j = 0; j < moved.size(); ++j)
      *reference_noise =
          std::max(*reference_noise,
                   nn_test::max_relative_error(moved[j].data(), expected[j].data(), expected[j].size()));
  }

  cv::dnn::Net net;
  try {
    net =
        cv::dnn::readNetFromONNX(reinterpret_cast<const char*>(exported.bytes.data()), exported.bytes.size());
  } catch (const cv::Exception& e) {
    ADD_FAILURE() << "OpenCV cannot read the export: " << e.what();
    return 1e9;
  }
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  const auto& graph = exported.proto.graph();
  EXPECT_EQ(graph.input_size(), static_cast<int>(model.inputs.size()));
  std::vector<cv::Mat> blobs;  // kept alive while OpenCV runs
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const Dims& d = model.operands[model.inputs[i]].dims;
    std::vector<float> data = is_nchw(md.input_source_layouts, i, d) ? nhwc_to_nchw(inputs[i], d) : inputs[i];
    std::vector<int> sizes;
    for (const auto& dim : graph.input(static_cast<int>(i)).type().tensor_type().shape().dim())
      sizes.push_back(static_cast<int>(dim.dim_value()));
    blobs.push_back(cv::Mat(static_cast<int>(sizes.size()), sizes.data(), CV_32F, data.data()).clone());
    net.setInput(blobs.back(), graph.input(static_cast<int>(i)).name());
  }
  std::vector<cv::String> names;
  for (const auto& o : graph.output()) names.push_back(o.name());
  std::vector<cv::Mat> results;
  try {
    net.forward(results, names);
  } catch (const cv::Exception& e) {
    ADD_FAILURE() << "OpenCV cannot run the export: " << e.what();
    return 1e9;
  }
  double worst = 0;
  for (size_t j = 0; j < model.outputs.size(); ++j) {
    const Dims& d = model.operands[model.outputs[j]].dims;
    std::vector<float> want =
        is_nchw(md.output_source_layouts, j, d) ? nhwc_to_nchw(expected[j], d) : expected[j];
    const cv::Mat& got = results[j];
    EXPECT_EQ(got.total(), want.size()) << "output " << j;
    if (got.total() != want.size() || !got.isContinuous() || got.type() != CV_32F) return 1e9;
    worst = std::max(worst, nn_test::max_relative_error(got.ptr<float>(), want.data(), want.size()));
  }
  return worst;
}

int count_nodes(const onnx::GraphProto& g, const std::string& type) {
  return static_cast<int>(std::count_if(g.node().begin(), g.node().end(),
                                        [&](const onnx::NodeProto& n) { return n.op_type() == type; }));
}

std::vector<int64_t> dims_of(const onnx::ValueInfoProto& vi) {
  std::vector<int64_t> d;
  for (const auto& dim : vi.type().tensor_type().shape().dim()) d.push_back(dim.dim_value());
  return d;
}

// Layout changes only at the graph boundary: every Transpose reads a graph input or writes
// a graph output.
void expect_transposes_only_at_boundary(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (n.op_type() != "Transpose") continue;
    bool at_input = false, at_output = false;
    for (const auto& in : g.input()) at_input |= n.input(0) == in.name();
    for (const auto& out : g.output()) at_output |= n.output(0) == out.name();
    EXPECT_TRUE(at_input || at_output) << "Transpose '" << n.name() << "' inside the graph";
  }
}

// ------------------------------------------------------------------------------------------
// Real models

struct RealCase {
  const char* asset;
  std::vector<int64_t> input_dims, output_dims;
  bool photo;  // feed messi5.jpg (RGB / 255, as the selfie models' metadata says), else noise
};

// The photo at the model's NHWC input size, RGB in [0, 1].
std::vector<float> photo_input(const Dims& d) {
  cv::Mat bgr = cv::imread(nn_test::asset("media/messi5.jpg"));
  EXPECT_FALSE(bgr.empty());
  if (bgr.empty()) return std::vector<float>(nn::num_elements(d), 0.f);
  cv::Mat rgb, resized, f;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  cv::resize(rgb, resized, cv::Size(static_cast<int>(d[2]), static_cast<int>(d[1])), 0, 0, cv::INTER_AREA);
  resized.convertTo(f, CV_32FC3, 1.0 / 255.0);
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.total() * 3);
}

class ExportRealModel : public ::testing::TestWithParam<RealCase> {};

TEST_P(ExportRealModel, OpenCvMatchesReference) {
  const RealCase& c = GetParam();
  ASSERT_TRUE(nn_test::require_asset(c.asset));
  auto model = nn::load_model(nn_test::asset(c.asset));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Exported e = export_or_fail(**model);
  ASSERT_FALSE(e.bytes.empty());
  const auto& g = e.proto.graph();
  ASSERT_EQ(e.proto.opset_import_size(), 1);
  EXPECT_EQ(e.proto.opset_import(0).version(), nn::kOnnxExportOpset);
  ASSERT_EQ(g.input_size(), 1);
  ASSERT_EQ(g.output_size(), 1);
  EXPECT_EQ(dims_of(g.input(0)), c.input_dims);  // the source model's layout at the boundary
  EXPECT_EQ(dims_of(g.output(0)), c.output_dims);
  expect_transposes_only_at_boundary(g);
  std::vector<std::vector<float>> inputs;
  if (c.photo) inputs.push_back(photo_input((*model)->operands[(*model)->inputs[0]].dims));
  std::vector<float> reference;
  double noise = 0;
  const double err = opencv_vs_reference(**model, e, 7, inputs, 0.f, 1.f, &reference, &noise);
  ASSERT_FALSE(reference.empty());
  const auto [lo, hi] = std::minmax_element(reference.begin(), reference.end());
  std::printf(
      "%s: %d ONNX nodes, output range [%.4g, %.4g]; max relative error OpenCV vs reference %.3g, reference "
      "vs "
      "itself with the input moved 1 ulp %.3g\n",
      c.asset, g.node_size(), *lo, *hi, err, noise);
  if (c.photo) {
    EXPECT_GT(*hi - *lo, 0.5f) << "a degenerate mask proves little";
  }
  // 1e-4, unless the model itself amplifies float32 rounding past that (the selfie models
  // do: a 1-ulp input change moves their mask by ~6e-4); a wrong op is off by far more.
  EXPECT_LE(err, std::max(1e-4, 4 * noise));
}

INSTANTIATE_TEST_SUITE_P(
    Models, ExportRealModel,
    ::testing::Values(
        RealCase{"models/selfie_segmentation.tflite", {1, 256, 256, 3}, {1, 256, 256, 1}, true},
        RealCase{"models/selfie_segmentation_landscape.tflite", {1, 144, 256, 3}, {1, 144, 256, 1}, true},
        RealCase{"models/mobilenet_v2.onnx", {1, 3, 224, 224}, {1, 1000}, false}),
    [](const auto& info) {
      std::string s = std::filesystem::path(info.param.asset).stem().string();
      return s;
    });

TEST(ExportOnnx, SelfieIsNchwInside) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  auto model = nn::load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Exported e = export_or_fail(**model);
  const auto& g = e.proto.graph();
  // One Transpose NHWC -> NCHW after the input; the [1,1,256,256] mask goes back with a Reshape.
  EXPECT_EQ(count_nodes(g, "Transpose"), 1);
  ASSERT_GT(g.node_size(), 0);
  EXPECT_EQ(g.node(0).op_type(), "Transpose");
  EXPECT_EQ(g.node(0).input(0), g.input(0).name());
  EXPECT_EQ(count_nodes(g, "Conv"), 43 + 11);
  EXPECT_EQ(count_nodes(g, "ConvTranspose"), 1);
  EXPECT_EQ(count_nodes(g, "HardSwish"), 11);
  EXPECT_EQ(count_nodes(g, "Resize"), 3);
  EXPECT_EQ(count_nodes(g, "GlobalAveragePool"), 10);  // 64x64 pools over 64x64 maps etc.
}

TEST(ExportOnnx, MobileNetRoundTripMatchesPyTorchGolden) {
  ASSERT_TRUE(nn_test::require_asset("models/mobilenet_v2.onnx"));
  ASSERT_TRUE(nn_test::require_asset("golden/mobilenet_v2/input_0.npy"));
  auto model = nn::load_model(nn_test::asset("models/mobilenet_v2.onnx"));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Exported e = export_or_fail(**model);
  EXPECT_EQ(count_nodes(e.proto.graph(), "Transpose"), 0);  // NCHW in, NCHW all the way
  auto in = nn::tools::read_npy(nn_test::asset("golden/mobilenet_v2/input_0.npy"));
  auto out = nn::tools::read_npy(nn_test::asset("golden/mobilenet_v2/output_0.npy"));
  ASSERT_TRUE(in.is_ok() && out.is_ok());
  std::vector<float> x = in->to_f32(), want = out->to_f32();
  std::vector<int> sizes(in->shape.begin(), in->shape.end());
  cv::dnn::Net net = cv::dnn::readNetFromONNX(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size());
  net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  net.setInput(cv::Mat(static_cast<int>(sizes.size()), sizes.data(), CV_32F, x.data()));
  cv::Mat y = net.forward();
  ASSERT_EQ(y.total(), want.size());
  const double err = nn_test::max_relative_error(y.ptr<float>(), want.data(), want.size());
  std::printf("mobilenet_v2 export via OpenCV vs PyTorch golden: max relative error %.3g\n", err);
  // Twice the model's own float32 error in this measure (PyTorch float32 vs float64: 1.44e-3;
  // its batch-norm statistics come from photos, scripts/make_reference_models.py).
  EXPECT_LE(err, 3e-3);
}

// ------------------------------------------------------------------------------------------
// Synthetic graphs: ops and parameters the real models do not exercise

struct Builder {
  Model m;
  uint32_t input(Dims d) {
    uint32_t i = m.add_tensor(kF32, std::move(d), "x" + std::to_string(m.inputs.size()));
    m.inputs.push_back(i);
    return i;
  }
  uint32_t tensor() { return m.add_tensor(kF32, {}); }
  uint32_t weights(Dims d, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    auto v = nn_test::random_floats(nn::num_elements(d), seed, lo, hi);
    return m.add_constant_f32(std::move(d), v);
  }
  uint32_t i32(int32_t v) { return m.add_scalar_i32(v); }
  uint32_t op(OperationType t, std::vector<uint32_t> in) {
    uint32_t y = tensor();
    m.add_operation(t, std::move(in), {y});
    return y;
  }
  Model finish(std::vector<uint32_t> outputs) {
    m.outputs = std::move(outputs);
    nn::Status s = m.validate_and_infer_shapes();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return std::move(m);
  }
};

void expect_exported_matches(const Model& model, double tol = 1e-4, float lo = -1.f, float hi = 1.f) {
  Exported e = export_or_fail(model);
  ASSERT_FALSE(e.bytes.empty());
  // NNPIPE_EXPORT_DUMP=DIR keeps each export for a look with other tools.
  if (const char* dir = std::getenv("NNPIPE_EXPORT_DUMP")) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string path = std::string(dir) + "/" + info->name() + ".onnx";
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      std::fwrite(e.bytes.data(), 1, e.bytes.size(), f);
      std::fclose(f);
    }
  }
  EXPECT_LE(opencv_vs_reference(model, e, 11, {}, lo, hi), tol);
}

TEST(ExportOnnxOps, ConvSamePaddingAsymmetricStrideDilationRelu6) {
  Builder b;
  uint32_t x = b.input({1, 10, 9, 3});
  // 3x3 stride 2 SAME on 10x9: TF pads 0 before, 1 after on H; 1 and 1 on W.
  uint32_t c1 = b.op(OperationType::CONV_2D, {x, b.weights({5, 3, 3, 3}, 1), b.weights({5}, 2), b.i32(1),
                                              b.i32(2), b.i32(2), b.i32(3)});
  // Dilated SAME conv, relu1-free, then explicit padding with RELU.
  uint32_t c2 =
      b.op(OperationType::CONV_2D, {c1, b.weights({4, 3, 3, 5}, 3), b.weights({4}, 4), b.i32(1), b.i32(1),
                                    b.i32(1), b.i32(0), b.m.add_scalar_bool(false), b.i32(2), b.i32(2)});
  uint32_t c3 = b.op(OperationType::CONV_2D, {c2, b.weights({6, 2, 3, 4}, 5), b.weights({6}, 6), b.i32(0),
                                              b.i32(2), b.i32(1), b.i32(0), b.i32(1), b.i32(1), b.i32(1)});
  expect_exported_matches(b.finish({c3}), 1e-4, -3.f, 3.f);
}

TEST(ExportOnnxOps, DepthwiseMultiplierGroupedAndTransposeConv) {
  Builder b;
  uint32_t x = b.input({1, 7, 8, 4});
  uint32_t d = b.op(OperationType::DEPTHWISE_CONV_2D, {x, b.weights({1, 3, 3, 8}, 1), b.weights({8}, 2),
                                                       b.i32(1), b.i32(2), b.i32(2), b.i32(2), b.i32(0)});
  uint32_t g = b.op(OperationType::GROUPED_CONV_2D,
                    {d, b.weights({6, 1, 1, 4}, 3), b.weights({6}, 4), b.i32(2), b.i32(1), b.i32(1), b.i32(2),
                     b.i32(1), b.m.add_scalar_bool(false)});
  const int32_t shape[4] = {1, 8, 8, 3};
  uint32_t t = b.op(OperationType::TRANSPOSE_CONV_2D,
                    {g, b.weights({3, 3, 3, 6}, 5), b.weights({3}, 6), b.m.add_constant_i32({4}, shape),
                     b.i32(1), b.i32(2), b.i32(2), b.i32(0), b.m.add_scalar_bool(false)});
  expect_exported_matches(b.finish({t}));
}

TEST(ExportOnnxOps, PoolsSoftmaxAndMeanOverOneAxis) {
  Builder b;
  uint32_t x = b.input({1, 10, 12, 6});  // SAME 3x3/2: pads 0,1 on both axes
  uint32_t mp =
      b.op(OperationType::MAX_POOL_2D, {x, b.i32(1), b.i32(2), b.i32(2), b.i32(3), b.i32(3), b.i32(0)});
  uint32_t ap =
      b.op(OperationType::AVERAGE_POOL_2D, {mp, b.i32(1), b.i32(1), b.i32(1), b.i32(3), b.i32(3), b.i32(0)});
  uint32_t sm = b.op(OperationType::SOFTMAX, {ap, b.m.add_scalar_f32(1.f)});
  const int32_t axes[1] = {1};
  uint32_t mean = b.op(OperationType::MEAN, {sm, b.m.add_constant_i32({1}, axes), b.i32(0)});
  expect_exported_matches(b.finish({mean}), 1e-4, -2.f, 2.f);
}

TEST(ExportOnnxOps, ResizeModes) {
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    Builder b;
    uint32_t x = b.input({1, 5, 7, 3});
    const bool align = mode == 1, half = mode == 2;
    uint32_t y =
        b.op(OperationType::RESIZE_BILINEAR, {x, b.i32(13), b.i32(9), b.m.add_scalar_bool(false),
                                              b.m.add_scalar_bool(align), b.m.add_scalar_bool(half)});
    expect_exported_matches(b.finish({y}));
  }
}

TEST(ExportOnnxOps, BroadcastConstantsConcatPadAndFullyConnected) {
  Builder b;
  uint32_t x = b.input({1, 4, 5, 3});
  uint32_t add = b.op(OperationType::ADD, {x, b.weights({3}, 1), b.i32(0)});       // per channel
  uint32_t mul = b.op(OperationType::MUL, {add, b.weights({5, 3}, 2), b.i32(1)});  // per (W, C), RELU
  uint32_t cat = b.op(OperationType::CONCATENATION, {add, mul, b.i32(3)});
  const int32_t pads[8] = {0, 0, 1, 2, 0, 1, 0, 0};
  uint32_t pad = b.op(OperationType::PAD, {cat, b.m.add_constant_i32({4, 2}, pads)});
  // [1,7,6,6] -> FC over the NHWC element order.
  uint32_t fc =
      b.op(OperationType::FULLY_CONNECTED, {pad, b.weights({10, 252}, 3), b.weights({10}, 4), b.i32(0)});
  expect_exported_matches(b.finish({fc}), 1e-4, -1.f, 1.f);
}

// ------------------------------------------------------------------------------------------
// Refusals

TEST(ExportOnnx, RefusesUnsupportedOpByName) {
  Builder b;
  uint32_t x = b.input({2, 6});
  uint32_t y0 = b.tensor(), y1 = b.tensor();
  b.m.add_operation(OperationType::SPLIT, {x, b.i32(1), b.i32(2)}, {y0, y1});
  Model m = b.finish({y0, y1});
  auto r = nn::export_onnx_buffer(m);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), nn::StatusCode::kUnsupportedOp);
  EXPECT_NE(r.status().message().find("op 0 SPLIT"), std::string::npos) << r.status().message();
}

TEST(ExportOnnx, RefusesNonFloatGraphsNamingTheOp) {
  Builder b;
  uint32_t x = b.input({2, 6});
  uint32_t y = b.m.add_tensor(OperandType::TENSOR_INT32, {});
  b.m.add_operation(OperationType::ARGMAX, {x, b.i32(1)}, {y});
  Model m = b.finish({y});
  auto r = nn::export_onnx_buffer(m);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), nn::StatusCode::kUnsupportedOp);
  EXPECT_NE(r.status().message().find("ARGMAX"), std::string::npos) << r.status().message();
}

TEST(ExportOnnx, UnwritablePathIsAnIoErrorAndLeavesNoFile) {
  Builder b;
  uint32_t x = b.input({1, 4});
  Model m = b.finish({b.op(OperationType::RELU, {x})});
  const std::string path = "/nonexistent_nnpipe_dir/out.onnx";
  nn::Status s = nn::export_onnx(m, path);
  EXPECT_EQ(s.code(), nn::StatusCode::kIoError) << s.to_string();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ExportOnnx, WritesAFileOpenCvReads) {
  Builder b;
  uint32_t x = b.input({1, 3, 4, 2});
  Model m = b.finish({b.op(OperationType::LOGISTIC, {x})});
  const std::string path = (std::filesystem::temp_directory_path() / "nnpipe_export_test.onnx").string();
  NN_ASSERT_OK(nn::export_onnx(m, path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_NO_THROW(cv::dnn::readNetFromONNX(path));
  std::filesystem::remove(path);
}

}  // namespace
