// AVERAGE_POOL_2D and MAX_POOL_2D against a naive NCHW reference, hand-computed cases,
// PyTorch goldens and validation errors.
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "conv_test_util.h"

namespace {

using conv_test::expect_invalid;
using conv_test::expect_near_all;
using nn::Dims;
using nn::OperandType;
using nn::OperationType;

struct PoolCase {
  const char* name;
  bool max;
  int n, h, w, c, fh, fw, sh, sw;
  int pad_l, pad_r, pad_t, pad_b;
  int implicit;  // 0 explicit, 1 SAME, 2 VALID
  int fuse;
  bool layout;
};

// Builds the op; pads only used by the explicit form.
nn::Model build_pool(const PoolCase& c, uint32_t* out) {
  nn::Model m;
  uint32_t x = conv_test::add_float_input(m, {uint32_t(c.n), uint32_t(c.h), uint32_t(c.w), uint32_t(c.c)});
  std::vector<uint32_t> in = {x};
  if (c.implicit)
    in.push_back(m.add_scalar_i32(c.implicit));
  else
    for (int p : {c.pad_l, c.pad_r, c.pad_t, c.pad_b}) in.push_back(m.add_scalar_i32(p));
  for (int v : {c.sw, c.sh, c.fw, c.fh, c.fuse}) in.push_back(m.add_scalar_i32(v));
  if (c.layout) in.push_back(m.add_scalar_bool(false));
  *out = m.add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  m.add_operation(c.max ? OperationType::MAX_POOL_2D : OperationType::AVERAGE_POOL_2D, in, {*out});
  m.outputs = {*out};
  return m;
}

// NCHW, visiting every window position and skipping the padded ones.
std::vector<float> naive_pool_nchw(const PoolCase& c, int pt, int pl, int oh_n, int ow_n,
                                   const std::vector<float>& x) {
  std::vector<float> y(size_t(c.n) * c.c * oh_n * ow_n);
  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int oh = 0; oh < oh_n; ++oh)
        for (int ow = 0; ow < ow_n; ++ow) {
          double sum = 0, best = -std::numeric_limits<double>::infinity();
          int count = 0;
          for (int a = 0; a < c.fh; ++a)
            for (int b = 0; b < c.fw; ++b) {
              const int ih = oh * c.sh - pt + a, iw = ow * c.sw - pl + b;
              if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
              const double v = x[((size_t(n) * c.c + ch) * c.h + ih) * c.w + iw];
              sum += v;
              best = std::max(best, v);
              ++count;
            }
          double v = c.max ? best : sum / count;
          if (c.fuse == 1) v = std::max(v, 0.0);
          if (c.fuse == 3) v = std::min(std::max(v, 0.0), 6.0);
          y[((size_t(n) * c.c + ch) * oh_n + oh) * ow_n + ow] = float(v);
        }
  return y;
}

std::vector<float> to_nchw(const std::vector<float>& x, int n, int h, int w, int c) {
  std::vector<float> y(x.size());
  for (int a = 0; a < n; ++a)
    for (int k = 0; k < c; ++k)
      for (int i = 0; i < h; ++i)
        for (int j = 0; j < w; ++j)
          y[((size_t(a) * c + k) * h + i) * w + j] = x[((size_t(a) * h + i) * w + j) * c + k];
  return y;
}

class PoolVsNaive : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolVsNaive, MatchesNchwReference) {
  const PoolCase& c = GetParam();
  int pt = c.pad_t, pb = c.pad_b, pl = c.pad_l, pr = c.pad_r;
  if (c.implicit == 2) {
    pt = pb = pl = pr = 0;
  } else if (c.implicit == 1) {  // TF SAME: output ceil(in / stride), extra padding at the end
    auto same = [](int in, int k, int s, int* before, int* after) {
      const int out = (in + s - 1) / s;
      const int total = std::max(0, (out - 1) * s + k - in);
      *before = total / 2;
      *after = total - total / 2;
    };
    same(c.h, c.fh, c.sh, &pt, &pb);
    same(c.w, c.fw, c.sw, &pl, &pr);
  }
  const int oh = (c.h + pt + pb - c.fh) / c.sh + 1, ow = (c.w + pl + pr - c.fw) / c.sw + 1;
  std::vector<float> x = nn_test::random_floats(size_t(c.n) * c.h * c.w * c.c, 21, -4.f, 4.f);
  uint32_t y;
  nn::Model m = build_pool(c, &y);
  std::vector<float> got;
  NN_ASSERT_OK(conv_test::run_float(m, x, &got));
  ASSERT_EQ(m.operands[y].dims, (Dims{uint32_t(c.n), uint32_t(oh), uint32_t(ow), uint32_t(c.c)}));
  const std::vector<float> want = conv_test::nchw_to_nhwc(
      naive_pool_nchw(c, pt, pl, oh, ow, to_nchw(x, c.n, c.h, c.w, c.c)), c.n, c.c, oh, ow);
  expect_near_all(got, want, 1e-5, c.name);
}

const PoolCase kPoolCases[] = {
    {"avg_2x2_s2_c1", false, 1, 4, 6, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, false},
    {"avg_3x3_s2_pad1_13", false, 1, 13, 13, 13, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, true},
    {"avg_3x3_same_s1_odd", false, 2, 7, 9, 5, 3, 3, 1, 1, 0, 0, 0, 0, 1, 0, false},
    {"avg_asym_pads_rect", false, 1, 10, 11, 3, 3, 2, 2, 3, 1, 0, 1, 2, 0, 1, false},
    {"avg_global_127", false, 1, 7, 7, 127, 7, 7, 1, 1, 0, 0, 0, 0, 2, 0, false},
    {"avg_same_s2_even", false, 1, 8, 8, 4, 3, 3, 2, 2, 0, 0, 0, 0, 1, 3, false},
    {"max_2x2_s2", true, 1, 6, 4, 3, 2, 2, 2, 2, 0, 0, 0, 0, 2, 0, false},
    {"max_3x3_s2_same_13", true, 1, 13, 13, 13, 3, 3, 2, 2, 0, 0, 0, 0, 1, 0, true},
    {"max_3x3_pad1_relu", true, 2, 9, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, false},
    {"max_rect_stride_asym", true, 1, 11, 8, 127, 2, 3, 3, 1, 0, 2, 1, 0, 0, 0, false},
    {"max_window_1", true, 1, 5, 5, 2, 1, 1, 2, 2, 0, 0, 0, 0, 2, 0, false},
};

INSTANTIATE_TEST_SUITE_P(Shapes, PoolVsNaive, ::testing::ValuesIn(kPoolCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(AveragePool, PaddingIsNotCounted) {
  // 1x2x2x1 [1 2; 3 4], 3x3 window, pads 1 all round, stride 1: every output covers only the
  // real pixels, so each is their plain mean 2.5 (counting the padding would give 10/9).
  PoolCase c{"", false, 1, 2, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, false};
  uint32_t y;
  nn::Model m = build_pool(c, &y);
  std::vector<float> got;
  NN_ASSERT_OK(conv_test::run_float(m, {1, 2, 3, 4}, &got));
  EXPECT_EQ(got, (std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f}));
  // 2x1 window at the corner covers [1; 3] and the pad above: mean 2, not 4/3.
  PoolCase e{"", false, 1, 2, 2, 1, 2, 1, 1, 1, 0, 0, 1, 0, 0, 0, false};
  nn::Model m2 = build_pool(e, &y);
  NN_ASSERT_OK(conv_test::run_float(m2, {1, 2, 3, 4}, &got));
  EXPECT_EQ(m2.operands[y].dims, (Dims{1, 2, 2, 1}));
  EXPECT_EQ(got, (std::vector<float>{1, 2, 2, 3}));
  // A pad as wide as the filter leaves a window with no pixel at all: defined as 0, not NaN.
  PoolCase empty{"", false, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, false};
  nn::Model m3 = build_pool(empty, &y);
  NN_ASSERT_OK(conv_test::run_float(m3, {7}, &got));
  EXPECT_EQ(got, (std::vector<float>{0, 7}));
}

TEST(MaxPool, NegativeValuesIgnorePadding) {
  // All-negative input: padding must not contribute a 0 to the max.
  PoolCase c{"", true, 1, 2, 2, 1, 2, 2, 1, 1, 1, 0, 1, 0, 0, 0, false};
  uint32_t y;
  nn::Model m = build_pool(c, &y);
  std::vector<float> got;
  NN_ASSERT_OK(conv_test::run_float(m, {-1, -2, -3, -4}, &got));
  EXPECT_EQ(got, (std::vector<float>{-1, -1, -1, -1}));
}

TEST(PoolQuant, Uint8MaxAndAverage) {
  for (bool max : {true, false}) {
    nn::Model m;
    uint32_t x = m.add_tensor(OperandType::TENSOR_QUANT8_ASYMM, {1, 2, 4, 1}, "x");
    m.operands[x].scale = 0.5f;
    m.operands[x].zero_point = 10;
    m.inputs = {x};
    uint32_t y = m.add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
    std::vector<uint32_t> in = {x, m.add_scalar_i32(2)};
    for (int v : {2, 2, 2, 2, 0}) in.push_back(m.add_scalar_i32(v));
    m.add_operation(max ? OperationType::MAX_POOL_2D : OperationType::AVERAGE_POOL_2D, in, {y});
    m.outputs = {y};
    const uint8_t xq[] = {10, 20, 0, 255, 13, 11, 4, 6};
    uint8_t got[2] = {};
    NN_ASSERT_OK(conv_test::run_raw(m, xq, got));
    EXPECT_EQ(m.operands[y].type, OperandType::TENSOR_QUANT8_ASYMM);
    EXPECT_EQ(m.operands[y].scale, 0.5f);
    if (max) {
      EXPECT_EQ(got[0], 20);
      EXPECT_EQ(got[1], 255);
    } else {
      // (10+20+13+11)/4 = 13.5 -> real 1.75 -> 3.5 steps + 10 -> rounds to 14; (0+255+4+6)/4 = 66.25 -> 66
      EXPECT_EQ(got[0], 14);
      EXPECT_EQ(got[1], 66);
    }
  }
}

TEST(PoolQuant, TinyScaleSaturatesTheFusedClamp) {
  // A denormal (positive, finite) scale puts RELU6's bound at 6 / scale = inf steps: the
  // clamp is the type's top (255), not an int cast of inf (UBSan, found by bench/fuzz.sh).
  nn::Model m;
  uint32_t x = m.add_tensor(OperandType::TENSOR_QUANT8_ASYMM, {1, 2, 4, 1}, "x");
  m.operands[x].scale = 1e-40f;
  m.operands[x].zero_point = 10;
  m.inputs = {x};
  uint32_t y = m.add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  std::vector<uint32_t> in = {x, m.add_scalar_i32(2)};
  for (int v : {2, 2, 2, 2, 3}) in.push_back(m.add_scalar_i32(v));  // fuse code 3: RELU6
  m.add_operation(OperationType::MAX_POOL_2D, in, {y});
  m.outputs = {y};
  const uint8_t xq[] = {10, 20, 0, 255, 13, 11, 4, 6};
  uint8_t got[2] = {};
  NN_ASSERT_OK(conv_test::run_raw(m, xq, got));
  EXPECT_EQ(got[0], 20);
  EXPECT_EQ(got[1], 255);
}

TEST(TorchGolden, AvgAndMaxPool) {
  std::ifstream file(conv_test::golden_dir() + "cases.json");
  ASSERT_TRUE(file);
  const nlohmann::json doc = nlohmann::json::parse(file);
  int checked = 0;
  for (const auto& j : doc["cases"]) {
    if (j["op"] != "pool") continue;
    const std::string name = j["name"];
    SCOPED_TRACE(name);
    PoolCase c{"",
               j["kind"] == "max",
               j["n"],
               j["h"],
               j["w"],
               j["c"],
               j["k"][0],
               j["k"][1],
               j["stride"][0],
               j["stride"][1],
               j["padding"][1],
               j["padding"][1],
               j["padding"][0],
               j["padding"][0],
               0,
               0,
               false};
    const conv_test::NpyArray x = conv_test::load_npy(conv_test::golden_dir() + name + "_x.npy");
    const conv_test::NpyArray y = conv_test::load_npy(conv_test::golden_dir() + name + "_y.npy");
    uint32_t yi;
    nn::Model m = build_pool(c, &yi);
    std::vector<float> got;
    NN_ASSERT_OK(conv_test::run_float(m, conv_test::nchw_to_nhwc(x.data, c.n, c.c, c.h, c.w), &got));
    const int oh = int(y.shape[2]), ow = int(y.shape[3]);
    ASSERT_EQ(m.operands[yi].dims, (Dims{uint32_t(c.n), uint32_t(oh), uint32_t(ow), uint32_t(c.c)}));
    expect_near_all(got, conv_test::nchw_to_nhwc(y.data, c.n, c.c, oh, ow), 1e-5, name);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(PoolValidation, RejectsBadInputs) {
  const PoolCase base{"", false, 1, 8, 8, 3, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, false};
  uint32_t y;
  {
    nn::Model m = build_pool(base, &y);
    NN_ASSERT_OK(m.validate_and_infer_shapes());
    EXPECT_EQ(m.operands[y].dims, (Dims{1, 4, 4, 3}));
  }
  {
    PoolCase c = base;
    c.fw = 0;
    nn::Model m = build_pool(c, &y);
    expect_invalid(m, {"op 0 AVERAGE_POOL_2D", "input 7 (filter_w) must be >= 1, got 0"});
  }
  {
    PoolCase c = base;
    c.sh = -2;
    nn::Model m = build_pool(c, &y);
    expect_invalid(m, {"input 6 (stride_h) must be >= 1, got -2"});
  }
  {
    PoolCase c = base;
    c.fh = 12;
    nn::Model m = build_pool(c, &y);
    expect_invalid(m, {"height: filter extent 12", "exceeds padded input 10"});
  }
  {
    PoolCase c = base;
    c.max = true;
    c.implicit = 5;
    nn::Model m = build_pool(c, &y);
    expect_invalid(m, {"op 0 MAX_POOL_2D", "padding scheme for width must be 1 (SAME) or 2 (VALID), got 5"});
  }
  {
    nn::Model m = build_pool(base, &y);
    m.operands[m.inputs[0]].dims = {8, 8, 3};
    expect_invalid(m, {"input 0 (input) must be rank 4, got [8,8,3]"});
  }
  {
    nn::Model m = build_pool(base, &y);
    m.operands[m.inputs[0]].type = OperandType::TENSOR_BOOL8;
    expect_invalid(m, {"input 0 (input) has type TENSOR_BOOL8"});
  }
  {
    nn::Model m = build_pool(base, &y);
    m.operations[0].inputs.pop_back();
    expect_invalid(m, {"expects 10 or 11 inputs (explicit padding) or 7 or 8 (implicit padding), got 9"});
  }
  {
    nn::Model m = build_pool(base, &y);
    m.operations[0].inputs[9] = m.add_scalar_f32(1.f);  // fuse as FLOAT32
    expect_invalid(m, {"input 9 (fuse) must be a constant INT32 scalar, got constant FLOAT32"});
  }
  {
    nn::Model m = build_pool(base, &y);
    m.operations[0].inputs.push_back(m.add_scalar_bool(true));
    expect_invalid(m, {"input 10 (layout) is true (NCHW)"}, nn::StatusCode::kUnsupportedOp);
  }
}

}  // namespace
