// ONNX importer, quantized graphs: a QDQ graph in the form ONNX Runtime's quantizer writes
// (per-axis int8 conv weights, int32 bias through DequantizeLinear, Relu between the conv and
// its QuantizeLinear, add, max pool, flatten, gemm) and a QLinearConv model, built here with
// the ONNX protobuf. They must import as quantized IR ops (not DEQUANTIZE -> float op) and,
// run with the reference kernels, match the ONNX QDQ float semantics computed here in plain
// loops within one output step. Bad quantization parameters are refused by name.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/import/import.h"
#include "nn/ops/registry.h"
#include "onnx/onnx_pb.h"
#include "test_support.h"

namespace {

using I64 = std::vector<int64_t>;

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  Builder() {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    g = m.mutable_graph();
    g->set_name("q");
  }
  void io(onnx::ValueInfoProto* v, const std::string& name, int32_t type, const I64& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const std::string& name, int32_t type, const I64& dims) { io(g->add_input(), name, type, dims); }
  void output(const std::string& name, int32_t type, const I64& dims) { io(g->add_output(), name, type, dims); }
  // Initializer of ONNX type `type` (1 float, 2 uint8, 3 int8, 6 int32).
  void init(const std::string& name, int32_t type, const I64& dims, const std::vector<double>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    for (double x : v) {
      if (type == 1)
        t->add_float_data(static_cast<float>(x));
      else
        t->add_int32_data(static_cast<int32_t>(x));
    }
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins, const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out + "_node");
    for (const auto& i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const I64& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  // x -> QuantizeLinear(s, zp) -> DequantizeLinear: the pair ORT puts after every op.
  std::string qdq(const std::string& x, const std::string& tag, float s, int zp, int32_t type = 3) {
    init(tag + "_s", 1, {}, {s});
    init(tag + "_zp", type, {}, {double(zp)});
    node("QuantizeLinear", {x, tag + "_s", tag + "_zp"}, tag + "_q");
    node("DequantizeLinear", {tag + "_q", tag + "_s", tag + "_zp"}, tag + "_dq");
    return tag + "_dq";
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

nn::Result<std::shared_ptr<nn::Model>> import(const Builder& b) {
  const std::string s = b.bytes();
  return nn::import_onnx_buffer({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, "qdq_test.onnx");
}

size_t count(const nn::Model& m, nn::OperationType t) {
  size_t n = 0;
  for (const auto& op : m.operations) n += op.type == t;
  return n;
}

// ONNX QuantizeLinear then DequantizeLinear in float (round half to even, saturate).
float fq(float x, float s, int zp, bool is_signed = true) {
  const float lo = is_signed ? -128.f : 0.f, hi = is_signed ? 127.f : 255.f;
  const float q = std::clamp(std::nearbyint(x / s) + zp, lo, hi);
  return (q - zp) * s;
}

// NCHW float conv with OIHW weights, pad p, stride 1.
std::vector<float> conv(const std::vector<float>& x, int C, int H, int W, const std::vector<float>& w, int M,
                        int k, int p, const std::vector<float>& b) {
  std::vector<float> y(size_t(M) * H * W);
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < W; ++q) {
        double acc = b[m];
        for (int c = 0; c < C; ++c)
          for (int i = 0; i < k; ++i)
            for (int j = 0; j < k; ++j) {
              const int hh = h + i - p, ww = q + j - p;
              if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
              acc += double(x[(size_t(c) * H + hh) * W + ww]) * w[((size_t(m) * C + c) * k + i) * k + j];
            }
        y[(size_t(m) * H + h) * W + q] = float(acc);
      }
  return y;
}

struct QdqNet {
  static constexpr int C = 3, H = 9, W = 9, M = 4, N = 5;
  static constexpr float s_in = 0.02f, s1 = 0.03f, s2 = 0.025f, s3 = 0.05f, s_out = 0.08f;
  static constexpr int zp_in = 3, zp1 = -128, zp2 = 5, zp3 = -20, zp_out = 2;
  std::vector<double> w1, w1s, b1, w2, b2, wf, bf;
  float w2s = 0.01f, wfs = 0.004f;
  Builder b;

  explicit QdqNet(bool bad_axis_len = false) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> wi(-127, 127), bi(-3000, 3000);
    std::uniform_real_distribution<double> u(-0.3, 0.3);
    for (int k = 0; k < M * C * 9; ++k) w1.push_back(wi(rng));
    w1s = {0.004, 0.007, 0.0025, 0.01};
    for (int m = 0; m < M; ++m) b1.push_back(bi(rng));
    for (int k = 0; k < M * M; ++k) w2.push_back(wi(rng));
    for (int m = 0; m < M; ++m) b2.push_back(u(rng));  // a float bias, quantized at import
    const int K = M * 4 * 4;
    for (int k = 0; k < N * K; ++k) wf.push_back(wi(rng));
    for (int n = 0; n < N; ++n) bf.push_back(u(rng));

    b.input("x", 1, {1, C, H, W});
    const std::string x = b.qdq("x", "in", s_in, zp_in);
    // conv1: per-axis int8 weights (axis 0), int32 bias dequantized at in_scale x w_scale.
    b.init("w1", 3, {M, C, 3, 3}, w1);
    b.init("w1_s", 1, {bad_axis_len ? M - 1 : M}, bad_axis_len ? std::vector<double>(w1s.begin(), w1s.end() - 1) : w1s);
    b.init("w1_zp", 3, {bad_axis_len ? M - 1 : M}, std::vector<double>(bad_axis_len ? M - 1 : M, 0));
    Builder::i(b.node("DequantizeLinear", {"w1", "w1_s", "w1_zp"}, "w1_dq"), "axis", 0);
    std::vector<double> b1s;
    for (int m = 0; m < M; ++m) b1s.push_back(double(s_in) * float(w1s[m]));
    b.init("b1", 6, {M}, b1);
    b.init("b1_s", 1, {M}, b1s);
    b.init("b1_zp", 6, {M}, std::vector<double>(M, 0));
    Builder::i(b.node("DequantizeLinear", {"b1", "b1_s", "b1_zp"}, "b1_dq"), "axis", 0);
    auto* c1 = b.node("Conv", {x, "w1_dq", "b1_dq"}, "c1");
    Builder::ints(c1, "pads", {1, 1, 1, 1});
    b.node("Relu", {"c1"}, "r1");
    const std::string a = b.qdq("r1", "a", s1, zp1);
    // conv2: 1x1, per-tensor int8 weights, float bias.
    b.init("w2", 3, {M, M, 1, 1}, w2);
    b.init("w2_s", 1, {}, {w2s});
    b.init("w2_zp", 3, {}, {0});
    b.node("DequantizeLinear", {"w2", "w2_s", "w2_zp"}, "w2_dq");
    b.init("b2", 1, {M}, b2);
    b.node("Conv", {a, "w2_dq", "b2"}, "c2");
    const std::string c = b.qdq("c2", "c", s2, zp2);
    b.node("Add", {a, c}, "sum");
    const std::string s = b.qdq("sum", "s", s3, zp3);
    auto* mp = b.node("MaxPool", {s}, "mp");
    Builder::ints(mp, "kernel_shape", {2, 2});
    Builder::ints(mp, "strides", {2, 2});
    const std::string p = b.qdq("mp", "p", s3, zp3);
    auto* fl = b.node("Flatten", {p}, "flat");
    Builder::i(fl, "axis", 1);
    const std::string f = b.qdq("flat", "f", s3, zp3);
    b.init("wf", 3, {N, K}, wf);
    b.init("wf_s", 1, {}, {wfs});
    b.init("wf_zp", 3, {}, {0});
    b.node("DequantizeLinear", {"wf", "wf_s", "wf_zp"}, "wf_dq");
    b.init("bf", 1, {N}, bf);
    auto* gm = b.node("Gemm", {f, "wf_dq", "bf"}, "gemm");
    Builder::i(gm, "transB", 1);
    const std::string out = b.qdq("gemm", "o", s_out, zp_out);
    b.node("Identity", {out}, "y");
    b.output("y", 1, {1, N});
  }

  // The QDQ float semantics, step by step.
  std::vector<float> reference(const std::vector<float>& x_in) const {
    std::vector<float> x(x_in);
    for (float& v : x) v = fq(v, s_in, zp_in);
    std::vector<float> w(w1.size()), bias(M);
    for (size_t k = 0; k < w.size(); ++k) w[k] = float(w1[k]) * float(w1s[k / (C * 9)]);
    for (int m = 0; m < M; ++m) bias[m] = float(b1[m]) * float(float(s_in) * float(w1s[m]));
    std::vector<float> a = conv(x, C, H, W, w, M, 3, 1, bias);
    for (float& v : a) v = fq(std::max(v, 0.f), s1, zp1);
    std::vector<float> w2f(w2.size()), b2f(b2.begin(), b2.end());
    for (size_t k = 0; k < w2.size(); ++k) w2f[k] = float(w2[k]) * w2s;
    std::vector<float> c = conv(a, M, H, W, w2f, M, 1, 0, b2f);
    std::vector<float> s(a.size());
    for (size_t k = 0; k < s.size(); ++k) s[k] = fq(a[k] + fq(c[k], s2, zp2), s3, zp3);
    const int Ho = H / 2, Wo = W / 2;
    std::vector<float> p(size_t(M) * Ho * Wo);
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < Ho; ++h)
        for (int q = 0; q < Wo; ++q) {
          float mx = -1e30f;
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) mx = std::max(mx, s[(size_t(m) * H + 2 * h + i) * W + 2 * q + j]);
          p[(size_t(m) * Ho + h) * Wo + q] = mx;
        }
    std::vector<float> y(N);
    for (int n = 0; n < N; ++n) {
      double acc = bf[n];
      for (size_t k = 0; k < p.size(); ++k) acc += double(p[k]) * (float(wf[n * p.size() + k]) * wfs);
      y[n] = fq(float(acc), s_out, zp_out);
    }
    return y;
  }
};

TEST(OnnxQuantized, QdqGraphFoldsIntoQuantizedOps) {
  QdqNet net;
  auto model = import(net.b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  std::printf("QDQ graph: %zu ops: %s\n", m.operations.size(), m.op_summary().c_str());
  // Quantized ops, with float only at the entry and the exit.
  EXPECT_EQ(count(m, nn::OperationType::QUANTIZE), 1u);
  EXPECT_EQ(count(m, nn::OperationType::DEQUANTIZE), 1u);
  EXPECT_EQ(count(m, nn::OperationType::CONV_2D), 2u);
  EXPECT_EQ(count(m, nn::OperationType::ADD), 1u);
  EXPECT_EQ(count(m, nn::OperationType::MAX_POOL_2D), 1u);
  EXPECT_EQ(count(m, nn::OperationType::FULLY_CONNECTED), 1u);
  EXPECT_EQ(count(m, nn::OperationType::RELU), 0u);  // fused into conv1
  bool per_channel = false;
  for (const auto& op : m.operations) {
    if (op.type == nn::OperationType::QUANTIZE || op.type == nn::OperationType::DEQUANTIZE) continue;
    for (uint32_t o : op.outputs)
      EXPECT_EQ(m.operands[o].type, nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED)
          << nn::operation_type_name(op.type) << " writes a non-int8 tensor";
    if (op.type == nn::OperationType::CONV_2D) {
      const nn::Operand& f = m.operands[op.inputs[1]];
      const nn::Operand& bias = m.operands[op.inputs[2]];
      EXPECT_EQ(bias.type, nn::OperandType::TENSOR_INT32);
      if (f.type == nn::OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL) {
        per_channel |= f.channel_quant.scales.size() == 4 && f.channel_quant.channel_dim == 0 &&
                       std::fabs(f.channel_quant.scales[1] - 0.007f) < 1e-9f;
      }
    }
  }
  EXPECT_TRUE(per_channel) << "conv1's per-axis weights did not become per-channel";

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.3f, 2.6f);
  double worst = 0;
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> x(size_t(QdqNet::C) * QdqNet::H * QdqNet::W);
    for (float& v : x) v = u(rng);
    std::vector<float> want = net.reference(x), got(QdqNet::N);
    const void* ins[] = {x.data()};
    void* outs[] = {got.data()};
    NN_ASSERT_OK(nn::run_reference(m, ins, outs));
    for (int n = 0; n < QdqNet::N; ++n) worst = std::max(worst, std::fabs(double(got[n]) - want[n]) / QdqNet::s_out);
    if (trial == 0) std::printf("y[0..4] got %g %g %g, want %g %g %g\n", got[0], got[1], got[2], want[0], want[1], want[2]);
  }
  std::printf("QDQ graph vs float QDQ semantics: max %.2f output steps\n", worst);
  EXPECT_LE(worst, 1.0 + 1e-3);  // one step, plus float noise in the difference
}

// QLinearConv: uint8 activations, per-axis int8 weights, int32 bias, uint8 out.
TEST(OnnxQuantized, QLinearConv) {
  constexpr int C = 2, H = 6, W = 5, M = 3;
  const float sx = 0.05f, sy = 0.1f;
  const int zx = 120, zy = 100;
  const std::vector<double> sw = {0.01, 0.02, 0.005};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> wi(-127, 127), bi(-500, 500), xi(0, 255);
  std::vector<double> w, bias;
  for (int k = 0; k < M * C * 9; ++k) w.push_back(wi(rng));
  for (int m = 0; m < M; ++m) bias.push_back(bi(rng));
  Builder b;
  b.input("x", 2, {1, C, H, W});
  b.init("xs", 1, {}, {sx});
  b.init("xz", 2, {}, {double(zx)});
  b.init("w", 3, {M, C, 3, 3}, w);
  b.init("ws", 1, {M}, sw);
  b.init("wz", 3, {M}, {0, 0, 0});
  b.init("ys", 1, {}, {sy});
  b.init("yz", 2, {}, {double(zy)});
  b.init("B", 6, {M}, bias);
  auto* n = b.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "B"}, "y");
  Builder::ints(n, "pads", {1, 0, 1, 0});
  b.output("y", 2, {1, M, H, W - 2});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  std::printf("QLinearConv: %s\n", m.op_summary().c_str());
  EXPECT_EQ(count(m, nn::OperationType::CONV_2D), 1u);
  EXPECT_EQ(count(m, nn::OperationType::DEQUANTIZE), 0u);
  EXPECT_EQ(count(m, nn::OperationType::QUANTIZE), 0u);
  const nn::Operand& in = m.operands[m.inputs[0]];
  EXPECT_EQ(in.type, nn::OperandType::TENSOR_QUANT8_ASYMM);
  EXPECT_FLOAT_EQ(in.scale, sx);
  EXPECT_EQ(in.zero_point, zx);
  ASSERT_EQ(m.metadata.input_source_layouts[0], "NCHW");  // the input is NHWC in the IR

  std::vector<uint8_t> x(size_t(C) * H * W), x_nhwc(x.size());
  for (auto& v : x) v = static_cast<uint8_t>(xi(rng));
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < W; ++q) x_nhwc[(size_t(h) * W + q) * C + c] = x[(size_t(c) * H + h) * W + q];
  const int Wo = W - 2;
  std::vector<uint8_t> got(size_t(M) * H * Wo);
  const void* ins[] = {x_nhwc.data()};
  void* outs[] = {got.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));
  const nn::Operand& out = m.operands[m.outputs[0]];
  ASSERT_EQ(m.metadata.output_source_layouts[0], "NCHW");
  EXPECT_FLOAT_EQ(out.scale, sy);
  int worst = 0, exact = 0;
  for (int mo = 0; mo < M; ++mo)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < Wo; ++q) {
        int64_t acc = int64_t(bias[mo]);
        for (int c = 0; c < C; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int hh = h + i - 1, ww = q + j;
              if (hh < 0 || hh >= H) continue;
              acc += int64_t(x[(size_t(c) * H + hh) * W + ww] - zx) * int64_t(w[((size_t(mo) * C + c) * 3 + i) * 3 + j]);
            }
        const double real = double(acc) * sx * sw[mo] / sy;
        const int want = int(std::clamp<double>(std::nearbyint(real) + zy, 0, 255));
        const int g = got[(size_t(h) * Wo + q) * M + mo];
        worst = std::max(worst, std::abs(g - want));
        exact += g == want;
      }
  std::printf("QLinearConv: max %d steps from ONNX's QLinearConv, %d of %d exact\n", worst, exact, M * H * Wo);
  EXPECT_LE(worst, 1);
  EXPECT_GT(exact, M * H * Wo * 9 / 10);
}

TEST(OnnxQuantized, BadParametersAreRefusedByName) {
  {
    Builder b;
    b.input("x", 1, {1, 4});
    b.init("s", 1, {}, {0.0});
    b.init("z", 3, {}, {0});
    b.node("QuantizeLinear", {"x", "s", "z"}, "q");
    b.node("DequantizeLinear", {"q", "s", "z"}, "y");
    b.output("y", 1, {1, 4});
    auto r = import(b);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().to_string().find("y_scale must be positive"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().to_string().find("QuantizeLinear"), std::string::npos) << r.status().to_string();
  }
  {
    Builder b;
    b.input("x", 1, {1, 4});
    b.init("s", 1, {}, {-0.5});
    b.node("QuantizeLinear", {"x", "s"}, "y");
    b.output("y", 2, {1, 4});
    auto r = import(b);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().to_string().find("must be positive"), std::string::npos) << r.status().to_string();
  }
  {
    QdqNet net(/*bad_axis_len=*/true);
    auto r = import(net.b);
    ASSERT_FALSE(r.is_ok());
    const std::string msg = r.status().to_string();
    EXPECT_NE(msg.find("per-axis along axis 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("w1_dq"), std::string::npos) << msg;
  }
}

}  // namespace

namespace {

// A Sigmoid whose QuantizeLinear is not NNAPI's fixed 1/256 output scale has no quantized
// form: it stays DEQUANTIZE -> float LOGISTIC -> QUANTIZE, and is still exactly the QDQ math.
TEST(OnnxQuantized, UnfoldableOpStaysFloatBetweenDequantizeAndQuantize) {
  Builder b;
  b.input("x", 1, {1, 8});
  const std::string x = b.qdq("x", "in", 0.05f, 10);
  b.node("Sigmoid", {x}, "sg");
  const std::string y = b.qdq("sg", "o", 0.01f, -100);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, 8});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  std::printf("Sigmoid at scale 0.01: %s\n", m.op_summary().c_str());
  ASSERT_EQ(count(m, nn::OperationType::LOGISTIC), 1u);
  for (const auto& op : m.operations) {
    if (op.type == nn::OperationType::LOGISTIC) {
      EXPECT_EQ(m.operands[op.outputs[0]].type, nn::OperandType::TENSOR_FLOAT32);
    }
  }
  EXPECT_EQ(count(m, nn::OperationType::QUANTIZE), 2u);
  EXPECT_EQ(count(m, nn::OperationType::DEQUANTIZE), 2u);
  std::vector<float> in = {-3.f, -1.2f, -0.4f, 0.f, 0.33f, 0.9f, 2.f, 6.f}, got(8);
  const void* ins[] = {in.data()};
  void* outs[] = {got.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));
  for (int k = 0; k < 8; ++k) {
    const float want = fq(1.f / (1.f + std::exp(-fq(in[k], 0.05f, 10))), 0.01f, -100);
    EXPECT_NEAR(got[k], want, 0.01f * 1.001f) << k;
  }
}

// The same Sigmoid quantized at 1/256 (what NNAPI's LOGISTIC writes) folds.
TEST(OnnxQuantized, SigmoidAtNnapiScaleFolds) {
  Builder b;
  b.input("x", 1, {1, 8});
  const std::string x = b.qdq("x", "in", 0.05f, 10);
  b.node("Sigmoid", {x}, "sg");
  const std::string y = b.qdq("sg", "o", 1.f / 256, -128);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, 8});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  std::printf("Sigmoid at scale 1/256: %s\n", m.op_summary().c_str());
  EXPECT_EQ(count(m, nn::OperationType::QUANTIZE), 1u);
  EXPECT_EQ(count(m, nn::OperationType::DEQUANTIZE), 1u);
  for (const auto& op : m.operations) {
    if (op.type == nn::OperationType::LOGISTIC) {
      EXPECT_EQ(m.operands[op.outputs[0]].type, nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED);
    }
  }
  std::vector<float> in = {-3.f, -1.2f, -0.4f, 0.f, 0.33f, 0.9f, 2.f, 6.f}, got(8);
  const void* ins[] = {in.data()};
  void* outs[] = {got.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));
  for (int k = 0; k < 8; ++k) {
    const float want = fq(1.f / (1.f + std::exp(-fq(in[k], 0.05f, 10))), 1.f / 256, -128);
    EXPECT_NEAR(got[k], want, 1.001f / 256) << k;
  }
}

}  // namespace
