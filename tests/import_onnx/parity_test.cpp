// ONNX importer: the three reference models (scripts/make_reference_models.py) import and,
// run with the reference kernels, match PyTorch's outputs; bad models are refused by name.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/import/import.h"
#include "nn/ops/registry.h"
#include "npy.h"
#include "onnx/onnx_pb.h"
#include "tensor_io.h"
#include "test_support.h"

namespace {

struct Parity {
  double max_rel = 0;      // max |a-b| / max(|b|, 1e-3)
  double max_abs = 0;      // max |a-b|
  double rel_to_peak = 0;  // max |a-b| / max |b|
};

// Imports assets/models/<name>.onnx, runs golden input_0 through run_reference and
// compares with output_0 in the source layout.
void check_model(const std::string& name, const std::string& task, Parity* parity,
                 std::shared_ptr<nn::Model>* out_model = nullptr) {
  const std::string model_path = "models/" + name + ".onnx";
  const std::string in_path = "golden/" + name + "/input_0.npy",
                    out_path = "golden/" + name + "/output_0.npy";
  if (!nn_test::require_asset(model_path) || !nn_test::require_asset(in_path) ||
      !nn_test::require_asset(out_path))
    return;
  auto model = nn::import_onnx_file(nn_test::asset(model_path));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  if (out_model) *out_model = *model;
  std::printf("%s: %zu ops: %s\n", name.c_str(), m.operations.size(), m.op_summary().c_str());
  EXPECT_EQ(m.metadata.task, task);
  EXPECT_EQ(m.metadata.source_file, name + ".onnx");
  EXPECT_EQ(m.metadata.source_sha256.size(), 64u);
  EXPECT_EQ(m.metadata.converter_version, nn::converter_version());
  ASSERT_EQ(m.inputs.size(), 1u);
  ASSERT_EQ(m.outputs.size(), 1u);
  ASSERT_EQ(m.metadata.input_source_layouts.size(), 1u);
  ASSERT_EQ(m.metadata.output_source_layouts.size(), 1u);

  auto input = nn::tools::read_npy(nn_test::asset(in_path));
  ASSERT_TRUE(input.is_ok()) << input.status().to_string();
  auto golden = nn::tools::read_npy(nn_test::asset(out_path));
  ASSERT_TRUE(golden.is_ok()) << golden.status().to_string();
  const nn::Operand& in_op = m.operands[m.inputs[0]];
  std::vector<uint8_t> in_buf(in_op.byte_size());
  NN_ASSERT_OK(nn::tools::npy_to_input(*input, in_op, m.metadata.input_source_layouts[0], in_buf.data()));
  const nn::Operand& out_op = m.operands[m.outputs[0]];
  std::vector<uint8_t> out_buf(out_op.byte_size());
  const void* ins[] = {in_buf.data()};
  void* outs[] = {out_buf.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));
  nn::tools::NpyArray got =
      nn::tools::output_to_npy(out_op, m.metadata.output_source_layouts[0], out_buf.data());
  ASSERT_EQ(got.shape, golden->shape);
  std::vector<float> a = got.to_f32(), b = golden->to_f32();
  ASSERT_EQ(a.size(), b.size());
  double peak = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    peak = std::max(peak, std::fabs(double(b[i])));
    parity->max_abs = std::max(parity->max_abs, std::fabs(double(a[i]) - double(b[i])));
  }
  parity->max_rel = nn_test::max_relative_error(a.data(), b.data(), a.size(), 1e-3);
  parity->rel_to_peak = peak > 0 ? parity->max_abs / peak : parity->max_abs;
  std::printf("%s: max |diff| %.3g, max rel (floor 1e-3) %.3g, max |diff| / max |golden| %.3g (peak %.3g)\n",
              name.c_str(), parity->max_abs, parity->max_rel, parity->rel_to_peak, peak);
}

size_t count_ops(const nn::Model& m, nn::OperationType t) {
  size_t n = 0;
  for (const auto& op : m.operations) n += op.type == t;
  return n;
}

TEST(OnnxParity, MobileNetV2) {
  Parity p;
  std::shared_ptr<nn::Model> m;
  check_model("mobilenet_v2", "classification", &p, &m);
  if (HasFatalFailure() || !m) return;
  // With batch-norm statistics measured on photos the model is as sensitive to float
  // rounding as a trained one: PyTorch's own float32 output is 1.44e-3 (per element, floor
  // 1e-3) and 2.4e-6 of the peak from its float64 one. Two float32 implementations: twice that.
  EXPECT_LE(p.max_rel, 3e-3);
  EXPECT_LE(p.rel_to_peak, 1e-5);
  EXPECT_EQ(m->metadata.input_source_layouts[0], "NCHW");
  EXPECT_EQ(m->metadata.output_source_layouts[0], "");
  // 52 convs (17 depthwise), Clip(0,6) fused as RELU6, one MEAN, one FC, no layout ops
  // beyond the [1,1,1,C] -> [1,C] reshape before the classifier.
  EXPECT_EQ(count_ops(*m, nn::OperationType::CONV_2D) + count_ops(*m, nn::OperationType::DEPTHWISE_CONV_2D),
            52u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::DEPTHWISE_CONV_2D), 17u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::RELU6), 0u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::TRANSPOSE), 0u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::FULLY_CONNECTED), 1u);
}

TEST(OnnxParity, LrasppMobileNetV3Large) {
  Parity p;
  std::shared_ptr<nn::Model> m;
  check_model("lraspp_mobilenet_v3_large", "segmentation", &p, &m);
  if (HasFatalFailure() || !m) return;
  // PyTorch float32 vs float64: 6.0e-2 per element (floor 1e-3: logits near zero), 4.3e-6
  // of the peak. Twice that, as for MobileNetV2.
  EXPECT_LE(p.max_rel, 0.12);
  EXPECT_LE(p.rel_to_peak, 1e-5);
  EXPECT_EQ(m->metadata.input_source_layouts[0], "NCHW");
  EXPECT_EQ(m->metadata.output_source_layouts[0], "NCHW");
  EXPECT_EQ(count_ops(*m, nn::OperationType::TRANSPOSE), 0u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::RESIZE_BILINEAR), 2u);
  EXPECT_GT(count_ops(*m, nn::OperationType::HARD_SWISH), 0u);  // x * HardSigmoid(x)
}

TEST(OnnxParity, GruDenoise) {
  Parity p;
  std::shared_ptr<nn::Model> m;
  check_model("gru_denoise", "", &p, &m);
  if (HasFatalFailure() || !m) return;
  EXPECT_LE(p.max_rel, 1e-4);
  EXPECT_EQ(m->metadata.input_source_layouts[0], "");
  EXPECT_EQ(count_ops(*m, nn::OperationType::NNPIPE_GRU), 1u);
  EXPECT_EQ(count_ops(*m, nn::OperationType::FULLY_CONNECTED), 1u);  // MatMul + Add folded
  EXPECT_EQ(count_ops(*m, nn::OperationType::TRANSPOSE), 0u);        // batch 1: reshapes suffice
}

// ---------------------------------------------------------------- refusals

onnx::ModelProto one_node_model(const std::string& op_type, const std::string& node_name) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto add_io = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  add_io(g->add_input(), "x", {1, 3, 8, 8});
  add_io(g->add_output(), "y", {1, 3, 8, 8});
  auto* n = g->add_node();
  n->set_op_type(op_type);
  n->set_name(node_name);
  n->add_input("x");
  n->add_output("y");
  return m;
}

nn::Status import_proto(const onnx::ModelProto& m) {
  std::string bytes = m.SerializeAsString();
  auto r =
      nn::import_onnx_buffer({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "test.onnx");
  return r.is_ok() ? nn::Status::ok() : r.status();
}

TEST(OnnxRefusal, UnsupportedOpIsNamed) {
  nn::Status s = import_proto(one_node_model("Hardmax", "my_hardmax"));
  EXPECT_EQ(s.code(), nn::StatusCode::kUnsupportedOp);
  EXPECT_NE(s.message().find("Hardmax"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("my_hardmax"), std::string::npos) << s.message();
}

TEST(OnnxRefusal, InexpressibleResizeIsNamed) {
  onnx::ModelProto m = one_node_model("Resize", "up");
  auto* n = m.mutable_graph()->mutable_node(0);
  n->add_input("");
  n->add_input("scales");
  auto* a = n->add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("linear");
  a = n->add_attribute();
  a->set_name("coordinate_transformation_mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("tf_crop_and_resize");
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("scales");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  for (float v : {1.f, 1.f, 2.f, 2.f}) t->add_float_data(v);
  nn::Status s = import_proto(m);
  EXPECT_EQ(s.code(), nn::StatusCode::kUnsupportedOp);
  EXPECT_NE(s.message().find("tf_crop_and_resize"), std::string::npos) << s.message();
}

TEST(OnnxRefusal, MalformedBuffers) {
  const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34};
  auto r = nn::import_onnx_buffer(garbage, "garbage.onnx");
  EXPECT_EQ(r.status().code(), nn::StatusCode::kInvalidModel);
  EXPECT_EQ(nn::import_onnx_buffer({}, "empty.onnx").status().code(), nn::StatusCode::kInvalidModel);
  EXPECT_EQ(nn::import_onnx_file("/nonexistent/model.onnx").status().code(), nn::StatusCode::kIoError);

  // An initializer whose raw data is shorter than its dims claim.
  onnx::ModelProto m = one_node_model("Add", "add");
  m.mutable_graph()->mutable_node(0)->add_input("w");
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1000);
  t->set_raw_data(std::string(12, '\0'));
  nn::Status s = import_proto(m);
  EXPECT_EQ(s.code(), nn::StatusCode::kInvalidModel);
  EXPECT_NE(s.message().find("raw_data"), std::string::npos) << s.message();

  // Every truncation of a real model is refused or imported, never a crash.
  if (!nn_test::require_asset("models/gru_denoise.onnx")) return;
  FILE* f = std::fopen(nn_test::asset("models/gru_denoise.onnx").c_str(), "rb");
  ASSERT_TRUE(f);
  std::vector<uint8_t> bytes(1 << 22);
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  for (size_t cut = 0; cut < bytes.size(); cut += 997) {
    auto rr = nn::import_onnx_buffer({bytes.data(), cut}, "cut.onnx");
    if (!rr.is_ok()) {
      EXPECT_NE(rr.status().code(), nn::StatusCode::kInternal) << rr.status().to_string();
    }
  }
}

TEST(OnnxRefusal, SymbolicInputDims) {
  onnx::ModelProto m = one_node_model("Relu", "relu");
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N");
  nn::Status s = import_proto(m);
  EXPECT_EQ(s.code(), nn::StatusCode::kUnsupportedOp);
  EXPECT_NE(s.message().find("'N'"), std::string::npos) << s.message();
}

}  // namespace
