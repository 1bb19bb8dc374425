// The TFLite importer on the real MediaPipe selfie models, on corrupt bytes, and on tiny
// models built here with the flatbuffers builder (one mapping per test).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "import/tflite/tflite_importer.h"
#include "nn/import/import.h"
#include "nn/ir/model.h"
#include "nn/ops/registry.h"
#include "test_support.h"
#include "tflite_builder.h"

namespace {

using nn::OperationType;
using nn::StatusCode;
using tflite_test::TinyModel;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

size_t count_ops(const nn::Model& m, OperationType type) {
  size_t n = 0;
  for (const auto& op : m.operations) n += op.type == type;
  return n;
}

// The op list of both selfie models after import: the 110 DEQUANTIZE ops of the FP16
// weights are folded away, the custom transposed conv is a TRANSPOSE_CONV_2D. The
// portrait model pools with AVERAGE_POOL_2D, the landscape one with MEAN.
constexpr const char* kSelfieSummary =
    "CONV_2D x 43, HARD_SWISH x 11, RELU x 22, DEPTHWISE_CONV_2D x 11, AVERAGE_POOL_2D x 10, "
    "LOGISTIC x 11, MUL x 10, ADD x 14, RESIZE_BILINEAR x 3, TRANSPOSE_CONV_2D x 1";
constexpr const char* kLandscapeSummary =
    "CONV_2D x 43, HARD_SWISH x 11, RELU x 22, DEPTHWISE_CONV_2D x 11, MEAN x 10, "
    "LOGISTIC x 11, MUL x 10, ADD x 14, RESIZE_BILINEAR x 3, TRANSPOSE_CONV_2D x 1";

struct SelfieCase {
  const char* file;
  nn::Dims input, output;
  const char* summary;
  const char* sha256;
};

class SelfieImport : public ::testing::TestWithParam<SelfieCase> {};

TEST_P(SelfieImport, ImportsWithShapesOpsAndMetadata) {
  const SelfieCase& c = GetParam();
  const std::string rel = std::string("models/") + c.file;
  if (!nn_test::require_asset(rel)) return;
  auto result = nn::import_tflite_file(nn_test::asset(rel));
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  ASSERT_EQ(m.inputs.size(), 1u);
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.operands[m.inputs[0]].dims, c.input);
  EXPECT_EQ(m.operands[m.outputs[0]].dims, c.output);
  EXPECT_EQ(m.operands[m.inputs[0]].type, nn::OperandType::TENSOR_FLOAT32);
  EXPECT_EQ(m.operands[m.outputs[0]].type, nn::OperandType::TENSOR_FLOAT32);
  EXPECT_EQ(m.op_summary(), c.summary);
  EXPECT_EQ(count_ops(m, OperationType::DEQUANTIZE), 0u);
  // FP16 weights were folded to float32 constants; no FP16 operand is left.
  for (const auto& o : m.operands) EXPECT_NE(o.type, nn::OperandType::TENSOR_FLOAT16) << o.name;

  const nn::Metadata& md = m.metadata;
  EXPECT_EQ(md.task, "segmentation");
  EXPECT_EQ(md.input_color, "RGB");
  EXPECT_EQ(md.input_mean, (std::vector<float>{0.f, 0.f, 0.f}));
  EXPECT_EQ(md.input_std, (std::vector<float>{255.f, 255.f, 255.f}));
  EXPECT_EQ(md.output_meaning, "person_probability");
  EXPECT_EQ(md.source_file, c.file);
  EXPECT_EQ(md.source_sha256, c.sha256);
  EXPECT_EQ(md.converter_version, nn::converter_version());
  EXPECT_EQ(md.input_source_layouts, std::vector<std::string>{"NHWC"});
  EXPECT_EQ(md.output_source_layouts, std::vector<std::string>{"NHWC"});
}

INSTANTIATE_TEST_SUITE_P(
    Models, SelfieImport,
    ::testing::Values(SelfieCase{"selfie_segmentation.tflite",
                                 {1, 256, 256, 3},
                                 {1, 256, 256, 1},
                                 kSelfieSummary,
                                 "8d13b7fae74af625c641226813616a2117bd6bca19eb3b75574621fc08557f27"},
                      SelfieCase{"selfie_segmentation_landscape.tflite",
                                 {1, 144, 256, 3},
                                 {1, 144, 256, 1},
                                 kLandscapeSummary,
                                 "4aafe6223bb8dac6fac8ca8ed56852870a33051ef3f6238822d282a109962894"}),
    [](const auto& info) { return std::string(info.param.input[1] == 256 ? "portrait" : "landscape"); });

TEST(SelfieImport, TransposeConvBiasCustomOpMapsToImplicitTransposeConv) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite")) return;
  auto result = nn::import_tflite_file(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  const nn::Operation* tconv = nullptr;
  for (const auto& op : m.operations)
    if (op.type == OperationType::TRANSPOSE_CONV_2D) tconv = &op;
  ASSERT_NE(tconv, nullptr);
  ASSERT_EQ(tconv->inputs.size(), 9u);  // implicit form
  EXPECT_EQ(m.operands[tconv->inputs[0]].dims, (nn::Dims{1, 128, 128, 16}));
  EXPECT_EQ(m.operands[tconv->inputs[1]].dims, (nn::Dims{1, 2, 2, 16}));
  EXPECT_TRUE(m.operands[tconv->inputs[1]].is_constant());
  const nn::Operand& shape = m.operands[tconv->inputs[3]];
  ASSERT_EQ(shape.dims, nn::Dims{4});
  EXPECT_EQ(std::vector<int32_t>(shape.as<int32_t>(), shape.as<int32_t>() + 4),
            (std::vector<int32_t>{1, 256, 256, 1}));
  EXPECT_EQ(m.scalar_i32(tconv->inputs[4]), 1);  // SAME
  EXPECT_EQ(m.scalar_i32(tconv->inputs[5]), 2);  // stride_w
  EXPECT_EQ(m.scalar_i32(tconv->inputs[6]), 2);  // stride_h
  EXPECT_FALSE(m.scalar_bool(tconv->inputs[8]));

  // Resizes keep TFLite's half_pixel_centers and take NNAPI's (width, height) order.
  for (const auto& op : m.operations) {
    if (op.type != OperationType::RESIZE_BILINEAR) continue;
    ASSERT_EQ(op.inputs.size(), 6u);
    const nn::Dims& in = m.operands[op.inputs[0]].dims;
    EXPECT_EQ(m.scalar_i32(op.inputs[1]), static_cast<int32_t>(in[2] * 2));
    EXPECT_EQ(m.scalar_i32(op.inputs[2]), static_cast<int32_t>(in[1] * 2));
    EXPECT_FALSE(m.scalar_bool(op.inputs[4]));  // align_corners
    EXPECT_TRUE(m.scalar_bool(op.inputs[5]));   // half_pixel_centers
  }
}

// ---------------------------------------------------------------------------------------
// Corrupt input: clear errors, never a crash.

void expect_invalid(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  auto result = nn::import_tflite_buffer(bytes, "bad.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidModel) << result.status().to_string();
  EXPECT_NE(result.status().message().find(fragment), std::string::npos) << result.status().to_string();
  EXPECT_NE(result.status().message().find("bad.tflite"), std::string::npos) << result.status().to_string();
}

TEST(TfliteCorrupt, EmptyAndTinyBuffers) {
  expect_invalid({}, "too small to be a TFLite model");
  expect_invalid({1, 2, 3}, "too small to be a TFLite model");
}

TEST(TfliteCorrupt, WrongIdentifierIsNamed) {
  std::vector<uint8_t> bytes(64, 0);
  std::memcpy(bytes.data() + 4, "ONNX", 4);
  expect_invalid(bytes, "file identifier is 'ONNX', expected 'TFL3'");
}

TEST(TfliteCorrupt, GarbageBehindAValidIdentifierFailsVerification) {
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(4096);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::memcpy(bytes.data() + 4, "TFL3", 4);
  expect_invalid(bytes, "corrupt TFLite flatbuffer");
}

TEST(TfliteCorrupt, TruncatedModelFailsVerification) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite")) return;
  const auto bytes = read_file(nn_test::asset("models/selfie_segmentation.tflite"));
  for (size_t keep : {size_t{8}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
    expect_invalid(std::vector<uint8_t>(bytes.begin(), bytes.begin() + keep), "corrupt TFLite flatbuffer");
  }
}

TEST(TfliteCorrupt, MissingFileIsAnIoError) {
  auto result = nn::import_tflite_file("/nonexistent/model.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kIoError);
  EXPECT_NE(result.status().message().find("/nonexistent/model.tflite"), std::string::npos);
}

// Random byte flips in the real model: each import either succeeds or fails with a
// message; none may crash (run under ASan/UBSan with NN_SANITIZE=ON to see more).
TEST(TfliteCorrupt, ByteFlipsNeverCrash) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite")) return;
  const auto original = read_file(nn_test::asset("models/selfie_segmentation.tflite"));
  // The flatbuffer's tables and vectors of offsets sit in the last ~40 KB (buffers come first).
  std::mt19937 rng(1234);
  int failed = 0;
  for (int trial = 0; trial < 150; ++trial) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at =
          trial % 2 ? rng() % bytes.size() : bytes.size() - 1 - rng() % std::min<size_t>(bytes.size(), 40000);
      bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    auto result = nn::import_tflite_buffer(bytes, "flipped.tflite");
    if (!result.is_ok()) {
      ++failed;
      EXPECT_FALSE(result.status().message().empty());
      EXPECT_NE(result.status().code(), StatusCode::kInternal) << result.status().to_string();
    }
  }
  // Most flips land in weights and import fine; some must have hit the structure.
  EXPECT_GT(failed, 0);
}

TEST(TfliteCorrupt, OutOfRangeTensorIndexIsNamed) {
  TinyModel t;
  const int x = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_RELU), {x + 40}, {y});
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(result.status().message().find("op 0 RELU: input 0: tensor index 40 out of range"),
            std::string::npos)
      << result.status().to_string();
}

// A constant's shape that claims far more elements than its buffer holds is refused by the
// buffer check, before anything that size is allocated (a fuzzer's finding: 1.2 G int32
// for a RESIZE size tensor of 8 bytes).
TEST(TfliteCorrupt, ConstantShapeLargerThanItsBufferIsRefusedBeforeAllocating) {
  TinyModel t;
  const int x = t.tensor({1, 4, 4, 1}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 8, 8, 1}, tflite::TensorType_FLOAT32, "y");
  const int32_t size_values[2] = {8, 8};
  // Just under the importer's 2^31-element cap: 8 GiB as int32, which a fuzzer's (or a
  // phone's) memory limit refuses; `ulimit -v 4000000` makes an allocate-first importer fail here.
  const int size = t.tensor({32768, 65535}, tflite::TensorType_INT32, "size", size_values, sizeof(size_values));
  t.op(t.opcode(tflite::BuiltinOperator_RESIZE_BILINEAR), {x, size}, {y});
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidModel) << result.status().to_string();
  EXPECT_NE(result.status().message().find("'size': buffer holds 8 bytes"), std::string::npos)
      << result.status().to_string();
}

// ---------------------------------------------------------------------------------------
// Refusals by name

TEST(TfliteUnsupported, BuiltinIsRefusedByName) {
  TinyModel t;
  const int x = t.tensor({4, 1, 1, 1}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 2, 2, 1}, tflite::TensorType_FLOAT32, "y");
  const int relu_out = t.tensor({4, 1, 1, 1}, tflite::TensorType_FLOAT32, "r");
  const int block = t.constant<int32_t>({2}, tflite::TensorType_INT32, "block", {2, 2});
  const int crops = t.constant<int32_t>({2, 2}, tflite::TensorType_INT32, "crops", {0, 0, 0, 0});
  t.op(t.opcode(tflite::BuiltinOperator_RELU), {x}, {relu_out});
  t.op(t.opcode(tflite::BuiltinOperator_BATCH_TO_SPACE_ND), {relu_out, block, crops}, {y});
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnsupportedOp);
  EXPECT_NE(result.status().message().find("op 1: builtin BATCH_TO_SPACE_ND (code 37) is not supported"),
            std::string::npos)
      << result.status().to_string();
}

TEST(TfliteUnsupported, ExtendedCodeAbove127IsReadFromBuiltinCode) {
  // Codes past 127 live in builtin_code only; deprecated_builtin_code holds the placeholder.
  TinyModel t;
  const int x = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(150 /* GELU */), {x}, {y});
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnsupportedOp);
  EXPECT_NE(result.status().message().find("op 0: builtin GELU (code 150) is not supported"),
            std::string::npos)
      << result.status().to_string();
}

TEST(TfliteUnsupported, CustomOpIsRefusedByName) {
  TinyModel t;
  const int x = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_CUSTOM, "MaxPoolingWithArgmax2D"), {x}, {y});
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnsupportedOp);
  EXPECT_NE(result.status().message().find("op 0: custom op 'MaxPoolingWithArgmax2D' is not supported"),
            std::string::npos)
      << result.status().to_string();
}

TEST(TfliteUnsupported, SignBitActivationIsRefused) {
  TinyModel t;
  const int a = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "a");
  const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
  auto opts = tflite::CreateAddOptions(t.fbb(), tflite::ActivationFunctionType_SIGN_BIT);
  t.op(t.opcode(tflite::BuiltinOperator_ADD), {a, a}, {y}, tflite::BuiltinOptions_AddOptions, opts.Union());
  auto result = nn::import_tflite_buffer(t.finish({a}, {y}), "tiny.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnsupportedOp);
  EXPECT_NE(result.status().message().find("op 0 ADD: fused activation SIGN_BIT is not supported"),
            std::string::npos)
      << result.status().to_string();
}

// ---------------------------------------------------------------------------------------
// Mappings on tiny models (graph only: validate=false keeps them independent of kernels)

nn::tflite_import::ImportOptions graph_only() {
  nn::tflite_import::ImportOptions o;
  o.validate = false;
  return o;
}

TEST(TfliteMapping, Fp16ConstantBehindDequantizeIsFoldedToFloat32) {
  TinyModel t;
  // 1.0, -2.0, 0.5, 65504 (max half), 2^-24 (smallest subnormal), -0
  const std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000};
  const int x = t.tensor({1, 6}, tflite::TensorType_FLOAT32, "x");
  const int w16 = t.constant<uint16_t>({1, 6}, tflite::TensorType_FLOAT16, "w16", halves);
  const int w = t.tensor({1, 6}, tflite::TensorType_FLOAT32, "w");
  const int y = t.tensor({1, 6}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_DEQUANTIZE, "", -1), {w16}, {w});
  t.op(t.opcode(tflite::BuiltinOperator_MUL), {x, w}, {y});
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  ASSERT_EQ(m.op_summary(), "MUL x 1");
  const nn::Operand& folded = m.operands[m.operations[0].inputs[1]];
  ASSERT_TRUE(folded.is_constant());
  ASSERT_EQ(folded.type, nn::OperandType::TENSOR_FLOAT32);
  ASSERT_EQ(folded.dims, (nn::Dims{1, 6}));
  const float* v = folded.as<float>();
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[1], -2.f);
  EXPECT_EQ(v[2], 0.5f);
  EXPECT_EQ(v[3], 65504.f);
  EXPECT_EQ(v[4], std::ldexp(1.f, -24));
  EXPECT_TRUE(v[5] == 0.f && std::signbit(v[5]));
}

TEST(TfliteMapping, HalfToFloatSpecialValues) {
  using nn::tflite_import::half_to_float;
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)) && half_to_float(0x7c00) > 0);
  EXPECT_TRUE(std::isinf(half_to_float(0xfc00)) && half_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.f, -14));  // smallest normal
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
}

TEST(TfliteMapping, Int8PerChannelDequantizeIsFolded) {
  TinyModel t;
  const std::vector<int8_t> q = {1, -2, 3, 4};  // [2, 2], channel dim 0, scales {0.5, 0.25}
  const int x = t.tensor({2, 2}, tflite::TensorType_FLOAT32, "x");
  const int wq = t.tensor({2, 2}, tflite::TensorType_INT8, "wq", q.data(), q.size(), {0.5f, 0.25f}, 0);
  const int w = t.tensor({2, 2}, tflite::TensorType_FLOAT32, "w");
  const int y = t.tensor({2, 2}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_DEQUANTIZE), {wq}, {w});
  t.op(t.opcode(tflite::BuiltinOperator_ADD), {x, w}, {y});
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Operand& folded = (*result)->operands[(*result)->operations[0].inputs[1]];
  const float* v = folded.as<float>();
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{0.5f, -1.f, 0.75f, 1.f}));
}

TEST(TfliteMapping, DeprecatedAndExtendedOpcodeFieldsAgree) {
  // An old converter writes only deprecated_builtin_code; a new one may write only
  // builtin_code for small codes. Both must read as HARD_SWISH (117).
  for (int variant = 0; variant < 2; ++variant) {
    TinyModel t;
    const int x = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "x");
    const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
    const int code = variant == 0 ? t.opcode(0, "", 117) /* builtin_code ADD(0), deprecated 117 */
                                  : t.opcode(117, "", 0);
    t.op(code, {x}, {y});
    auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "tiny.tflite", graph_only());
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    EXPECT_EQ((*result)->op_summary(), "HARD_SWISH x 1");
  }
}

TEST(TfliteMapping, Conv2dSameWithFusedRelu6AndDilation) {
  TinyModel t;
  std::vector<float> w(8 * 3 * 3 * 4, 0.1f), b(8, 0.f);
  const int x = t.tensor({1, 9, 9, 4}, tflite::TensorType_FLOAT32, "x");
  const int wt = t.constant<float>({8, 3, 3, 4}, tflite::TensorType_FLOAT32, "w", w);
  const int bt = t.constant<float>({8}, tflite::TensorType_FLOAT32, "b", b);
  const int y = t.tensor({1, 5, 5, 8}, tflite::TensorType_FLOAT32, "y");
  auto opts = tflite::CreateConv2DOptions(t.fbb(), tflite::Padding_SAME, 2, 2,
                                          tflite::ActivationFunctionType_RELU6, 2, 2);
  t.op(t.opcode(tflite::BuiltinOperator_CONV_2D), {x, wt, bt}, {y}, tflite::BuiltinOptions_Conv2DOptions,
       opts.Union());
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  ASSERT_EQ(m.operations.size(), 1u);
  const auto& ins = m.operations[0].inputs;
  ASSERT_EQ(ins.size(), 10u);          // implicit padding + layout + dilations
  EXPECT_EQ(m.scalar_i32(ins[3]), 1);  // SAME
  EXPECT_EQ(m.scalar_i32(ins[4]), 2);
  EXPECT_EQ(m.scalar_i32(ins[5]), 2);
  EXPECT_EQ(m.scalar_i32(ins[6]), 3);  // RELU6
  EXPECT_FALSE(m.scalar_bool(ins[7]));
  EXPECT_EQ(m.scalar_i32(ins[8]), 2);
  EXPECT_EQ(m.scalar_i32(ins[9]), 2);
}

TEST(TfliteMapping, TanhActivationAndConcatActivationBecomeOps) {
  TinyModel t;
  const int a = t.tensor({1, 2}, tflite::TensorType_FLOAT32, "a");
  const int s = t.tensor({1, 2}, tflite::TensorType_FLOAT32, "s");
  const int y = t.tensor({1, 4}, tflite::TensorType_FLOAT32, "y");
  auto add_opts = tflite::CreateAddOptions(t.fbb(), tflite::ActivationFunctionType_TANH);
  t.op(t.opcode(tflite::BuiltinOperator_ADD), {a, a}, {s}, tflite::BuiltinOptions_AddOptions,
       add_opts.Union());
  auto cat_opts = tflite::CreateConcatenationOptions(t.fbb(), -1, tflite::ActivationFunctionType_RELU);
  t.op(t.opcode(tflite::BuiltinOperator_CONCATENATION), {s, a}, {y},
       tflite::BuiltinOptions_ConcatenationOptions, cat_opts.Union());
  auto result = nn::tflite_import::import_buffer(t.finish({a}, {y}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  EXPECT_EQ(m.op_summary(), "ADD x 1, TANH x 1, CONCATENATION x 1, RELU x 1");
  EXPECT_EQ(m.scalar_i32(m.operations[0].inputs[2]), 0);  // ADD's fuse is NONE, TANH follows
  EXPECT_EQ(m.scalar_i32(m.operations[2].inputs[2]), 1);  // axis -1 normalized to 1
  EXPECT_EQ(m.outputs[0], m.operations[3].outputs[0]);
}

TEST(TfliteMapping, SplitTakesAxisFirstInTfliteAndLastInNnapi) {
  TinyModel t;
  const int axis = t.constant<int32_t>({}, tflite::TensorType_INT32, "axis", {1});
  const int x = t.tensor({2, 6}, tflite::TensorType_FLOAT32, "x");
  const int y0 = t.tensor({2, 3}, tflite::TensorType_FLOAT32, "y0");
  const int y1 = t.tensor({2, 3}, tflite::TensorType_FLOAT32, "y1");
  auto opts = tflite::CreateSplitOptions(t.fbb(), 2);
  t.op(t.opcode(tflite::BuiltinOperator_SPLIT), {axis, x}, {y0, y1}, tflite::BuiltinOptions_SplitOptions,
       opts.Union());
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y0, y1}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  ASSERT_EQ(m.operations.size(), 1u);
  EXPECT_EQ(m.operations[0].inputs[0], m.inputs[0]);
  EXPECT_EQ(m.scalar_i32(m.operations[0].inputs[1]), 1);
  EXPECT_EQ(m.scalar_i32(m.operations[0].inputs[2]), 2);
  EXPECT_EQ(m.operations[0].outputs.size(), 2u);
}

TEST(TfliteMapping, Int64ShapeConstantsAreNarrowed) {
  TinyModel t;
  const int x = t.tensor({2, 6}, tflite::TensorType_FLOAT32, "x");
  const int shape = t.constant<int64_t>({2}, tflite::TensorType_INT64, "shape", {3, -1});
  const int y = t.tensor({3, 4}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_RESHAPE), {x, shape}, {y});
  auto result = nn::tflite_import::import_buffer(t.finish({x}, {y}), "tiny.tflite", graph_only());
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Operand& s = (*result)->operands[(*result)->operations[0].inputs[1]];
  ASSERT_EQ(s.type, nn::OperandType::TENSOR_INT32);
  EXPECT_EQ(std::vector<int32_t>(s.as<int32_t>(), s.as<int32_t>() + 2), (std::vector<int32_t>{3, -1}));
}

// A small chain imported with validation and run with the reference kernels, checked
// against the same arithmetic done here: PAD -> MAX_POOL_2D -> RESHAPE -> FULLY_CONNECTED
// (fused RELU) -> SOFTMAX.
TEST(TfliteEndToEnd, PadPoolReshapeDenseSoftmaxMatchesNaiveMath) {
  TinyModel t;
  const int x = t.tensor({1, 4, 4, 2}, tflite::TensorType_FLOAT32, "x");
  const int pads = t.constant<int32_t>({4, 2}, tflite::TensorType_INT32, "pads", {0, 0, 1, 1, 1, 1, 0, 0});
  const int padded = t.tensor({1, 6, 6, 2}, tflite::TensorType_FLOAT32, "padded");
  const int pooled = t.tensor({1, 3, 3, 2}, tflite::TensorType_FLOAT32, "pooled");
  const int shape = t.constant<int32_t>({2}, tflite::TensorType_INT32, "shape", {1, 18});
  const int flat = t.tensor({1, 18}, tflite::TensorType_FLOAT32, "flat");
  const std::vector<float> w = nn_test::random_floats(3 * 18, 11), b = {0.1f, -0.2f, 0.3f};
  const int wt = t.constant<float>({3, 18}, tflite::TensorType_FLOAT32, "w", w);
  const int bt = t.constant<float>({3}, tflite::TensorType_FLOAT32, "b", b);
  const int dense = t.tensor({1, 3}, tflite::TensorType_FLOAT32, "dense");
  const int y = t.tensor({1, 3}, tflite::TensorType_FLOAT32, "y");
  t.op(t.opcode(tflite::BuiltinOperator_PAD), {x, pads}, {padded});
  auto pool = tflite::CreatePool2DOptions(t.fbb(), tflite::Padding_VALID, 2, 2, 2, 2);
  t.op(t.opcode(tflite::BuiltinOperator_MAX_POOL_2D), {padded}, {pooled},
       tflite::BuiltinOptions_Pool2DOptions, pool.Union());
  t.op(t.opcode(tflite::BuiltinOperator_RESHAPE), {pooled, shape}, {flat});
  auto fc = tflite::CreateFullyConnectedOptions(t.fbb(), tflite::ActivationFunctionType_RELU);
  t.op(t.opcode(tflite::BuiltinOperator_FULLY_CONNECTED), {flat, wt, bt}, {dense},
       tflite::BuiltinOptions_FullyConnectedOptions, fc.Union());
  auto sm = tflite::CreateSoftmaxOptions(t.fbb(), 1.f);
  t.op(t.opcode(tflite::BuiltinOperator_SOFTMAX), {dense}, {y}, tflite::BuiltinOptions_SoftmaxOptions,
       sm.Union());
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "chain.tflite");
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  EXPECT_EQ(m.op_summary(), "PAD x 1, MAX_POOL_2D x 1, RESHAPE x 1, FULLY_CONNECTED x 1, SOFTMAX x 1");

  const std::vector<float> in = nn_test::random_floats(32, 5, -1.f, 1.f);
  std::vector<float> got(3);
  const void* ins[] = {in.data()};
  void* outs[] = {got.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));

  // The same by hand. Zero padding takes part in the max (TFLite's PAD writes zeros).
  auto at = [&](int yy, int xx, int c) {
    yy -= 1;
    xx -= 1;
    return (yy < 0 || yy >= 4 || xx < 0 || xx >= 4) ? 0.f : in[(yy * 4 + xx) * 2 + c];
  };
  std::vector<float> f(18);
  for (int py = 0; py < 3; ++py)
    for (int px = 0; px < 3; ++px)
      for (int c = 0; c < 2; ++c)
        f[(py * 3 + px) * 2 + c] = std::max({at(2 * py, 2 * px, c), at(2 * py, 2 * px + 1, c),
                                             at(2 * py + 1, 2 * px, c), at(2 * py + 1, 2 * px + 1, c)});
  std::vector<float> expect(3);
  float total = 0;
  for (int u = 0; u < 3; ++u) {
    float acc = b[u];
    for (int k = 0; k < 18; ++k) acc += w[u * 18 + k] * f[k];
    expect[u] = std::exp(std::max(acc, 0.f));
    total += expect[u];
  }
  for (float& e : expect) e /= total;
  EXPECT_LT(nn_test::max_relative_error(got.data(), expect.data(), 3), 1e-5);
}

}  // namespace

namespace {

int unpack_op(TinyModel& t, int x, std::vector<int32_t> outs, int num, int axis) {
  auto o = tflite::CreateUnpackOptions(t.fbb(), num, axis);
  t.op(t.opcode(tflite::BuiltinOperator_UNPACK), {x}, std::move(outs), tflite::BuiltinOptions_UnpackOptions,
       o.Union());
  return 0;
}

float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

}  // namespace

// UNPACK of one slice (an LSTM unrolled over one step, as DTLN's) is a RESHAPE alone.
TEST(TfliteMapping, UnpackOfOneSliceIsAReshape) {
  TinyModel t;
  const int x = t.tensor({1, 1, 257}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({1, 257}, tflite::TensorType_FLOAT32, "y");
  unpack_op(t, x, {y}, 1, 1);
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "unpack1.tflite");
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  EXPECT_EQ((*result)->op_summary(), "RESHAPE x 1");
  EXPECT_EQ((*result)->operands[(*result)->outputs[0]].dims, (nn::Dims{1, 257}));
}

TEST(TfliteMapping, UnpackWithTheWrongOutputCountIsRefused) {
  TinyModel t;
  const int x = t.tensor({2, 3}, tflite::TensorType_FLOAT32, "x");
  const int y = t.tensor({3}, tflite::TensorType_FLOAT32, "y");
  unpack_op(t, x, {y}, 2, 0);
  auto result = nn::import_tflite_buffer(t.finish({x}, {y}), "unpack_bad.tflite");
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("2 slices along axis 0, but the op has 1 outputs"), std::string::npos)
      << result.status().to_string();
}

// One LSTM step as TFLite unrolls it (DTLN's stages are two of these per stage): UNPACK
// the time axis, STRIDED_SLICE h and c out of a [1, 2, units, 2] state, two
// FULLY_CONNECTED without bias, ADD the bias, SPLIT the gates, LOGISTIC / TANH / MUL / ADD,
// then PACK the unpacked slices back around the new h. Run on the reference kernels and
// checked against the same arithmetic done here.
TEST(TfliteEndToEnd, UnrolledLstmStepMatchesNaiveMath) {
  constexpr int kUnits = 4, kIn = 4;
  TinyModel t;
  const auto F = tflite::TensorType_FLOAT32;
  const auto I = tflite::TensorType_INT32;
  const int x = t.tensor({1, 3, kIn}, F, "x");
  const int state = t.tensor({1, 2, kUnits, 2}, F, "state");
  const int u0 = t.tensor({1, kIn}, F, "u0"), u1 = t.tensor({1, kIn}, F, "u1"), u2 = t.tensor({1, kIn}, F, "u2");
  unpack_op(t, x, {u0, u1, u2}, 3, 1);
  // h = state[:, 0, :, 0], c = state[:, 0, :, 1] (axes 1 and 3 shrunk: mask 0b1010).
  const int strides = t.constant<int32_t>({4}, I, "strides", {1, 1, 1, 1});
  const int hb = t.constant<int32_t>({4}, I, "hb", {0, 0, 0, 0}), he = t.constant<int32_t>({4}, I, "he", {1, 1, kUnits, 1});
  const int cb = t.constant<int32_t>({4}, I, "cb", {0, 0, 0, 1}), ce = t.constant<int32_t>({4}, I, "ce", {1, 1, kUnits, 2});
  const int h = t.tensor({1, kUnits}, F, "h"), c = t.tensor({1, kUnits}, F, "c");
  auto ss = tflite::CreateStridedSliceOptions(t.fbb(), 0, 0, 0, 0, 0b1010);
  const int ss_code = t.opcode(tflite::BuiltinOperator_STRIDED_SLICE);
  t.op(ss_code, {state, hb, he, strides}, {h}, tflite::BuiltinOptions_StridedSliceOptions, ss.Union());
  auto ss2 = tflite::CreateStridedSliceOptions(t.fbb(), 0, 0, 0, 0, 0b1010);
  t.op(ss_code, {state, cb, ce, strides}, {c}, tflite::BuiltinOptions_StridedSliceOptions, ss2.Union());
  const std::vector<float> W = nn_test::random_floats(4 * kUnits * kIn, 21, -0.5f, 0.5f);
  const std::vector<float> U = nn_test::random_floats(4 * kUnits * kUnits, 22, -0.5f, 0.5f);
  const std::vector<float> B = nn_test::random_floats(4 * kUnits, 23, -0.5f, 0.5f);
  const int wt = t.constant<float>({4 * kUnits, kIn}, F, "W", W), ut = t.constant<float>({4 * kUnits, kUnits}, F, "U", U);
  const int bt = t.constant<float>({4 * kUnits}, F, "B", B);
  const int xw = t.tensor({1, 4 * kUnits}, F, "xw"), hu = t.tensor({1, 4 * kUnits}, F, "hu");
  const int sum = t.tensor({1, 4 * kUnits}, F, "sum"), z = t.tensor({1, 4 * kUnits}, F, "z");
  const int fc = t.opcode(tflite::BuiltinOperator_FULLY_CONNECTED);
  t.op(fc, {u1, wt, -1}, {xw});
  t.op(fc, {h, ut, -1}, {hu});
  const int add = t.opcode(tflite::BuiltinOperator_ADD);
  t.op(add, {xw, hu}, {sum});
  t.op(add, {sum, bt}, {z});
  const int axis = t.constant<int32_t>({}, I, "axis", {1});
  const int gi = t.tensor({1, kUnits}, F, "gi"), gf = t.tensor({1, kUnits}, F, "gf"), gg = t.tensor({1, kUnits}, F, "gg"),
            go = t.tensor({1, kUnits}, F, "go");
  auto split = tflite::CreateSplitOptions(t.fbb(), 4);
  t.op(t.opcode(tflite::BuiltinOperator_SPLIT), {axis, z}, {gi, gf, gg, go}, tflite::BuiltinOptions_SplitOptions,
       split.Union());
  const int si = t.tensor({1, kUnits}, F, "si"), sf = t.tensor({1, kUnits}, F, "sf"), so = t.tensor({1, kUnits}, F, "so");
  const int tg = t.tensor({1, kUnits}, F, "tg");
  const int logistic = t.opcode(tflite::BuiltinOperator_LOGISTIC), tanh_code = t.opcode(tflite::BuiltinOperator_TANH);
  t.op(logistic, {gi}, {si});
  t.op(logistic, {gf}, {sf});
  t.op(logistic, {go}, {so});
  t.op(tanh_code, {gg}, {tg});
  const int fc_ = t.tensor({1, kUnits}, F, "f*c"), ig = t.tensor({1, kUnits}, F, "i*g");
  const int c2 = t.tensor({1, kUnits}, F, "c2"), tc = t.tensor({1, kUnits}, F, "tanh_c2"), h2 = t.tensor({1, kUnits}, F, "h2");
  const int mul = t.opcode(tflite::BuiltinOperator_MUL);
  t.op(mul, {sf, c}, {fc_});
  t.op(mul, {si, tg}, {ig});
  t.op(add, {fc_, ig}, {c2});
  t.op(tanh_code, {c2}, {tc});
  t.op(mul, {so, tc}, {h2});
  const int y = t.tensor({1, 3, kUnits}, F, "y");
  auto pack = tflite::CreatePackOptions(t.fbb(), 3, 1);
  t.op(t.opcode(tflite::BuiltinOperator_PACK), {u0, h2, u2}, {y}, tflite::BuiltinOptions_PackOptions, pack.Union());
  auto result = nn::import_tflite_buffer(t.finish({x, state}, {y, c2}), "lstm.tflite");
  ASSERT_TRUE(result.is_ok()) << result.status().to_string();
  const nn::Model& m = **result;
  EXPECT_EQ(count_ops(m, OperationType::SPLIT), 2u);    // the gates and the UNPACK
  EXPECT_EQ(count_ops(m, OperationType::RESHAPE), 3u);  // one per unpacked slice

  const std::vector<float> xin = nn_test::random_floats(3 * kIn, 31, -1.f, 1.f);
  const std::vector<float> sin = nn_test::random_floats(2 * kUnits * 2, 32, -1.f, 1.f);
  std::vector<float> got_y(3 * kUnits), got_c(kUnits);
  const void* ins[] = {xin.data(), sin.data()};
  void* outs[] = {got_y.data(), got_c.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));

  std::vector<float> want_y(3 * kUnits), want_c(kUnits);
  for (int k = 0; k < kIn; ++k) {
    want_y[k] = xin[k];
    want_y[2 * kUnits + k] = xin[2 * kIn + k];
  }
  for (int u = 0; u < kUnits; ++u) {
    float gates[4];
    for (int g = 0; g < 4; ++g) {
      const int row = g * kUnits + u;
      float acc = B[row];
      for (int k = 0; k < kIn; ++k) acc += W[row * kIn + k] * xin[kIn + k];
      for (int k = 0; k < kUnits; ++k) acc += U[row * kUnits + k] * sin[k * 2 + 0];
      gates[g] = acc;
    }
    const float cc = sigmoid(gates[1]) * sin[u * 2 + 1] + sigmoid(gates[0]) * std::tanh(gates[2]);
    want_c[u] = cc;
    want_y[kUnits + u] = sigmoid(gates[3]) * std::tanh(cc);
  }
  EXPECT_LT(nn_test::max_relative_error(got_y.data(), want_y.data(), want_y.size()), 1e-5);
  EXPECT_LT(nn_test::max_relative_error(got_c.data(), want_c.data(), want_c.size()), 1e-5);
}
