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

// One QDQ-wrapped op per test, as ONNX Runtime's quantizer writes it: the op must fold into
// its quantized IR form (int8 in and out, no DEQUANTIZE -> float op -> QUANTIZE left: one
// QUANTIZE per model input, one DEQUANTIZE at the output) and, run by the reference kernels,
// stay within one output step of the QDQ float semantics computed here.
namespace {

using nn::OperationType;

// NCHW <-> NHWC for one image.
std::vector<float> to_nhwc(const std::vector<float>& x, int C, int H, int W) {
  std::vector<float> y(x.size());
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) y[(size_t(h) * W + w) * C + c] = x[(size_t(c) * H + h) * W + w];
  return y;
}
std::vector<float> to_nchw(const std::vector<float>& y, int C, int H, int W) {
  std::vector<float> x(y.size());
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) x[(size_t(c) * H + h) * W + w] = y[(size_t(h) * W + w) * C + c];
  return x;
}


// The op folded: `type` writes an int8 tensor, its quantized inputs are int8 too, and the
// only QUANTIZE / DEQUANTIZE are the model's entries and exit.
void expect_folded(const nn::Model& m, OperationType type, size_t model_inputs) {
  std::printf("  %s\n", m.op_summary().c_str());
  EXPECT_EQ(count(m, type), 1u) << nn::operation_type_name(type);
  EXPECT_EQ(count(m, OperationType::QUANTIZE), model_inputs);
  EXPECT_EQ(count(m, OperationType::DEQUANTIZE), 1u);
  for (const auto& op : m.operations) {
    if (op.type != type) continue;
    EXPECT_EQ(m.operands[op.outputs[0]].type, nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED)
        << nn::operation_type_name(type) << " writes a float tensor: not folded";
    const nn::Operand& in = m.operands[op.inputs[0]];
    EXPECT_EQ(in.type, nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED) << nn::operation_type_name(type);
  }
}

// Runs `m` on NCHW inputs and returns the largest difference of its output from `want`
// (NCHW) in output steps. A 4-D input or output the IR holds as NHWC is transposed here.
double steps_off(const nn::Model& m, std::vector<std::vector<float>> inputs, const std::vector<float>& want,
                 float out_scale) {
  auto nhwc_of = [](const nn::Dims& ir, const std::string& layout) { return ir.size() == 4 && layout == "NCHW"; };
  std::vector<const void*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const nn::Dims& d = m.operands[m.inputs[i]].dims;
    const std::string layout = i < m.metadata.input_source_layouts.size() ? m.metadata.input_source_layouts[i] : "";
    if (nhwc_of(d, layout)) inputs[i] = to_nhwc(inputs[i], int(d[3]), int(d[1]), int(d[2]));
    ins.push_back(inputs[i].data());
  }
  std::vector<float> got(want.size());
  void* outs[] = {got.data()};
  const nn::Status s = nn::run_reference(m, ins, outs);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  const nn::Dims& d = m.operands[m.outputs[0]].dims;
  const std::string layout = m.metadata.output_source_layouts.empty() ? "" : m.metadata.output_source_layouts[0];
  if (nhwc_of(d, layout)) got = to_nchw(got, int(d[3]), int(d[1]), int(d[2]));
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / out_scale);
  return worst;
}

constexpr double kOneStep = 1.0 + 1e-3;  // one step, plus float noise in the difference

TEST(OnnxQuantizedFolds, DepthwiseConvPerChannel) {
  constexpr int C = 5, H = 7, W = 6;
  const float s_in = 0.03f, s_out = 0.05f;
  const int zp_in = -7, zp_out = 4;
  const std::vector<double> ws = {0.002, 0.011, 0.006, 0.0035, 0.009};
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> wi(-127, 127), bi(-2000, 2000);
  std::vector<double> w, bias;
  for (int k = 0; k < C * 9; ++k) w.push_back(wi(rng));
  for (int c = 0; c < C; ++c) bias.push_back(bi(rng));
  Builder b;
  b.input("x", 1, {1, C, H, W});
  const std::string x = b.qdq("x", "in", s_in, zp_in);
  b.init("w", 3, {C, 1, 3, 3}, w);
  b.init("w_s", 1, {C}, ws);
  b.init("w_zp", 3, {C}, std::vector<double>(C, 0));
  Builder::i(b.node("DequantizeLinear", {"w", "w_s", "w_zp"}, "w_dq"), "axis", 0);
  std::vector<double> bs;
  for (int c = 0; c < C; ++c) bs.push_back(double(s_in) * float(ws[c]));
  b.init("b", 6, {C}, bias);
  b.init("b_s", 1, {C}, bs);
  b.init("b_zp", 6, {C}, std::vector<double>(C, 0));
  Builder::i(b.node("DequantizeLinear", {"b", "b_s", "b_zp"}, "b_dq"), "axis", 0);
  auto* conv = b.node("Conv", {x, "w_dq", "b_dq"}, "dw");
  Builder::ints(conv, "pads", {1, 1, 1, 1});
  Builder::i(conv, "group", C);
  const std::string y = b.qdq("dw", "o", s_out, zp_out);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, C, H, W});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::DEPTHWISE_CONV_2D, 1);
  for (const auto& op : m.operations)
    if (op.type == OperationType::DEPTHWISE_CONV_2D) {
      const nn::Operand& f = m.operands[op.inputs[1]];
      ASSERT_EQ(f.type, nn::OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL);
      EXPECT_EQ(f.channel_quant.channel_dim, 3u);  // [1, H, W, C]
      ASSERT_EQ(f.channel_quant.scales.size(), size_t(C));
      EXPECT_FLOAT_EQ(f.channel_quant.scales[1], float(ws[1]));
      EXPECT_EQ(m.operands[op.inputs[2]].type, nn::OperandType::TENSOR_INT32);
    }
  const std::vector<float> xin = nn_test::random_floats(size_t(C) * H * W, 5, -3.5f, 3.2f);
  std::vector<float> want(xin.size());
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < W; ++q) {
        double acc = float(bias[c]) * float(float(s_in) * float(ws[c]));
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            const int hh = h + i - 1, qq = q + j - 1;
            if (hh < 0 || hh >= H || qq < 0 || qq >= W) continue;
            acc += double(fq(xin[(size_t(c) * H + hh) * W + qq], s_in, zp_in)) * (float(w[c * 9 + i * 3 + j]) * float(ws[c]));
          }
        want[(size_t(c) * H + h) * W + q] = fq(float(acc), s_out, zp_out);
      }
  const double worst = steps_off(m, {xin}, want, s_out);
  std::printf("depthwise per-channel: max %.2f output steps from the QDQ semantics\n", worst);
  EXPECT_LE(worst, kOneStep);
}

TEST(OnnxQuantizedFolds, ConcatOfDifferentScales) {
  Builder b;
  b.input("a", 1, {1, 4});
  b.input("c", 1, {1, 6});
  const std::string a = b.qdq("a", "qa", 0.02f, -10);
  const std::string c = b.qdq("c", "qc", 0.05f, 20);
  Builder::i(b.node("Concat", {a, c}, "cat"), "axis", 1);
  const std::string y = b.qdq("cat", "o", 0.04f, 3);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, 10});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::CONCATENATION, 2);
  const std::vector<float> av = nn_test::random_floats(4, 8, -2.5f, 2.6f), cv = nn_test::random_floats(6, 9, -6.f, 5.f);
  std::vector<float> want;
  for (float v : av) want.push_back(fq(fq(v, 0.02f, -10), 0.04f, 3));
  for (float v : cv) want.push_back(fq(fq(v, 0.05f, 20), 0.04f, 3));
  const double worst = steps_off(m, {av, cv}, want, 0.04f);
  std::printf("concat: max %.2f output steps\n", worst);
  EXPECT_LE(worst, kOneStep);
}

TEST(OnnxQuantizedFolds, Mul) {
  Builder b;
  b.input("a", 1, {1, 12});
  b.input("c", 1, {1, 12});
  const std::string a = b.qdq("a", "qa", 0.03f, 5);
  const std::string c = b.qdq("c", "qc", 0.015f, -30);
  b.node("Mul", {a, c}, "mul");
  const std::string y = b.qdq("mul", "o", 0.02f, -3);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, 12});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::MUL, 2);
  const std::vector<float> av = nn_test::random_floats(12, 10, -3.f, 3.f), cv = nn_test::random_floats(12, 11, -1.4f, 2.2f);
  std::vector<float> want;
  for (size_t i = 0; i < av.size(); ++i) want.push_back(fq(fq(av[i], 0.03f, 5) * fq(cv[i], 0.015f, -30), 0.02f, -3));
  const double worst = steps_off(m, {av, cv}, want, 0.02f);
  std::printf("mul: max %.2f output steps\n", worst);
  EXPECT_LE(worst, kOneStep);
}

// AveragePool keeps its input's quantization (NNAPI's rule; ORT writes the same Q after it).
TEST(OnnxQuantizedFolds, AveragePool) {
  constexpr int C = 3, H = 7, W = 8;
  const float s = 0.04f;
  const int zp = 9;
  Builder b;
  b.input("x", 1, {1, C, H, W});
  const std::string x = b.qdq("x", "in", s, zp);
  auto* p = b.node("AveragePool", {x}, "ap");
  Builder::ints(p, "kernel_shape", {3, 2});
  Builder::ints(p, "strides", {2, 2});
  const int Ho = (H - 3) / 2 + 1, Wo = (W - 2) / 2 + 1;
  const std::string y = b.qdq("ap", "o", s, zp);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, C, Ho, Wo});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::AVERAGE_POOL_2D, 1);
  const std::vector<float> xin = nn_test::random_floats(size_t(C) * H * W, 12, -5.f, 4.5f);
  std::vector<float> want(size_t(C) * Ho * Wo);
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < Ho; ++h)
      for (int q = 0; q < Wo; ++q) {
        double acc = 0;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 2; ++j) acc += fq(xin[(size_t(c) * H + 2 * h + i) * W + 2 * q + j], s, zp);
        want[(size_t(c) * Ho + h) * Wo + q] = fq(float(acc / 6), s, zp);
      }
  const double worst = steps_off(m, {xin}, want, s);
  std::printf("average pool: max %.2f output steps\n", worst);
  EXPECT_LE(worst, kOneStep);
}

// GlobalAveragePool and ReduceMean over H, W both become a quantized MEAN.
void mean_test(const std::string& op_type) {
  constexpr int C = 4, H = 5, W = 6;
  const float s_in = 0.05f, s_out = 0.02f;
  const int zp_in = -20, zp_out = 11;
  Builder b;
  b.input("x", 1, {1, C, H, W});
  const std::string x = b.qdq("x", "in", s_in, zp_in);
  auto* n = b.node(op_type, {x}, "mean");
  if (op_type == "ReduceMean") {
    Builder::ints(n, "axes", {2, 3});
    Builder::i(n, "keepdims", 1);
  }
  const std::string y = b.qdq("mean", "o", s_out, zp_out);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, C, 1, 1});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::MEAN, 1);
  const std::vector<float> xin = nn_test::random_floats(size_t(C) * H * W, 13, -4.f, 7.f);
  std::vector<float> want(C);
  for (int c = 0; c < C; ++c) {
    double acc = 0;
    for (int k = 0; k < H * W; ++k) acc += fq(xin[size_t(c) * H * W + k], s_in, zp_in);
    want[c] = fq(float(acc / (H * W)), s_out, zp_out);
  }
  const double worst = steps_off(m, {xin}, want, s_out);
  std::printf("%s: max %.2f output steps\n", op_type.c_str(), worst);
  EXPECT_LE(worst, kOneStep);
}
TEST(OnnxQuantizedFolds, GlobalAveragePoolAsMean) { mean_test("GlobalAveragePool"); }
TEST(OnnxQuantizedFolds, ReduceMeanAsMean) { mean_test("ReduceMean"); }

TEST(OnnxQuantizedFolds, HardSwish) {
  Builder b;
  b.m.mutable_opset_import(0)->set_version(14);  // HardSwish is opset 14
  b.input("x", 1, {1, 16});
  const std::string x = b.qdq("x", "in", 0.05f, 2);
  b.node("HardSwish", {x}, "hs");
  const std::string y = b.qdq("hs", "o", 0.025f, -110);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, 16});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::HARD_SWISH, 1);
  const std::vector<float> xin = nn_test::random_floats(16, 14, -5.f, 5.5f);
  std::vector<float> want;
  for (float v : xin) {
    const float q = fq(v, 0.05f, 2);
    want.push_back(fq(q * std::clamp(q + 3.f, 0.f, 6.f) / 6.f, 0.025f, -110));
  }
  const double worst = steps_off(m, {xin}, want, 0.025f);
  std::printf("hard-swish: max %.2f output steps\n", worst);
  EXPECT_LE(worst, kOneStep);
}

// Resize 2x, linear, half_pixel (what torch's bilinear upsampling exports), same Q params.
TEST(OnnxQuantizedFolds, ResizeBilinear) {
  constexpr int C = 2, H = 3, W = 4;
  const float s = 0.03f;
  const int zp = -4;
  Builder b;
  b.input("x", 1, {1, C, H, W});
  const std::string x = b.qdq("x", "in", s, zp);
  b.init("roi", 1, {0}, {});
  b.init("scales", 1, {4}, {1, 1, 2, 2});
  auto* r = b.node("Resize", {x, "roi", "scales"}, "rs");
  auto* mode = r->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("linear");
  auto* ctm = r->add_attribute();
  ctm->set_name("coordinate_transformation_mode");
  ctm->set_type(onnx::AttributeProto::STRING);
  ctm->set_s("half_pixel");
  const std::string y = b.qdq("rs", "o", s, zp);
  b.node("Identity", {y}, "y");
  b.output("y", 1, {1, C, 2 * H, 2 * W});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  expect_folded(m, OperationType::RESIZE_BILINEAR, 1);
  const std::vector<float> xin = nn_test::random_floats(size_t(C) * H * W, 15, -3.5f, 3.6f);
  auto src = [](int o, int n) {  // half-pixel source coordinate, clamped to the image
    const float v = std::clamp((o + 0.5f) / 2.f - 0.5f, 0.f, float(n - 1));
    const int lo = int(std::floor(v));
    return std::tuple<int, int, float>(lo, std::min(lo + 1, n - 1), v - lo);
  };
  std::vector<float> want(size_t(C) * 4 * H * W);
  for (int c = 0; c < C; ++c)
    for (int h = 0; h < 2 * H; ++h)
      for (int q = 0; q < 2 * W; ++q) {
        auto [y0, y1, fy] = src(h, H);
        auto [x0, x1, fx] = src(q, W);
        auto at = [&](int yy, int xx) { return fq(xin[(size_t(c) * H + yy) * W + xx], s, zp); };
        const float top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * fx;
        const float bot = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * fx;
        want[(size_t(c) * 2 * H + h) * 2 * W + q] = fq(top + (bot - top) * fy, s, zp);
      }
  const double worst = steps_off(m, {xin}, want, s);
  std::printf("resize bilinear: max %.2f output steps\n", worst);
  EXPECT_LE(worst, kOneStep);
}

// QLinearMatMul: uint8 a, int8 per-tensor b (a constant), uint8 out -> FULLY_CONNECTED.
TEST(OnnxQuantizedFolds, QLinearMatMul) {
  constexpr int M = 3, K = 10, N = 4;
  const float sa = 0.02f, sb = 0.01f, sy = 0.05f;
  const int za = 130, zy = 120;
  std::mt19937 rng(16);
  std::uniform_int_distribution<int> bi(-127, 127), ai(0, 255);
  std::vector<double> bw;
  for (int k = 0; k < K * N; ++k) bw.push_back(bi(rng));
  Builder b;
  b.input("a", 2, {M, K});
  b.init("as", 1, {}, {sa});
  b.init("az", 2, {}, {double(za)});
  b.init("b", 3, {K, N}, bw);
  b.init("bs", 1, {}, {sb});
  b.init("bz", 3, {}, {0});
  b.init("ys", 1, {}, {sy});
  b.init("yz", 2, {}, {double(zy)});
  b.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, "y");
  b.output("y", 2, {M, N});
  auto model = import(b);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const nn::Model& m = **model;
  std::printf("  %s\n", m.op_summary().c_str());
  EXPECT_EQ(count(m, OperationType::FULLY_CONNECTED), 1u);
  EXPECT_EQ(count(m, OperationType::QUANTIZE), 0u);
  EXPECT_EQ(count(m, OperationType::DEQUANTIZE), 0u);
  for (const auto& op : m.operations)
    if (op.type == OperationType::FULLY_CONNECTED) {
      EXPECT_EQ(m.operands[op.outputs[0]].type, nn::OperandType::TENSOR_QUANT8_ASYMM);
      EXPECT_EQ(m.operands[op.inputs[1]].type, nn::OperandType::TENSOR_QUANT8_ASYMM);  // int8 b as uint8 + 128
    }
  std::vector<uint8_t> a(size_t(M) * K), got(size_t(M) * N);
  for (auto& v : a) v = static_cast<uint8_t>(ai(rng));
  const void* ins[] = {a.data()};
  void* outs[] = {got.data()};
  NN_ASSERT_OK(nn::run_reference(m, ins, outs));
  int worst = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int k = 0; k < K; ++k) acc += int64_t(a[size_t(i) * K + k] - za) * int64_t(bw[size_t(k) * N + j]);
      const int want = int(std::clamp<double>(std::nearbyint(double(acc) * sa * sb / sy) + zy, 0, 255));
      worst = std::max(worst, std::abs(int(got[size_t(i) * N + j]) - want));
    }
  std::printf("QLinearMatMul: max %d steps from ONNX's QLinearMatMul\n", worst);
  EXPECT_LE(worst, 1);
}

}  // namespace
