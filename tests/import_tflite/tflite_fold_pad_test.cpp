// Importing a TFLite model folds a zero spatial PAD into the convolutions that read it
// (engine/passes/fold_pad): the model gets smaller and computes the same, and a PAD that
// is not a conv's padding stays.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "import/tflite/tflite_importer.h"
#include "nn/import/import.h"
#include "nn/ir/model.h"
#include "nn/ops/registry.h"
#include "nn/runtime/session.h"
#include "test_support.h"
#include "tflite_builder.h"

namespace {

using tflite_test::TinyModel;

struct Built {
  std::vector<uint8_t> bytes;
  size_t in_elems = 0, out_elems = 0;
};

enum class Reader { kConvValid, kConvSame, kDepthwiseSame, kConvAndPool, kConvTwice };

// x [1,H,W,C] -> PAD(pads) -> the reader(s) -> y (concatenated when two read the pad).
Built pad_then(Reader reader, std::vector<int32_t> pads, int h = 11, int w = 9, int c = 5) {
  TinyModel t;
  const int ph = h + pads[2] + pads[3], pw = w + pads[4] + pads[5], pc = c + pads[6] + pads[7];
  const int x = t.tensor({1, h, w, c}, tflite::TensorType_FLOAT32, "x");
  const int pt = t.constant<int32_t>({4, 2}, tflite::TensorType_INT32, "pads", pads);
  const int padded = t.tensor({1, ph, pw, pc}, tflite::TensorType_FLOAT32, "padded");
  t.op(t.opcode(tflite::BuiltinOperator_PAD), {x, pt}, {padded});
  const int oc = 7;
  const std::vector<float> wv = nn_test::random_floats(oc * 3 * 3 * pc, 3), bv = nn_test::random_floats(oc, 4);
  const std::vector<float> dwv = nn_test::random_floats(3 * 3 * pc, 5), dbv = nn_test::random_floats(pc, 6);
  auto conv = [&](tflite::Padding padding, int stride, const char* name) {
    const int wt = t.constant<float>({oc, 3, 3, pc}, tflite::TensorType_FLOAT32, std::string(name) + "_w", wv);
    const int bt = t.constant<float>({oc}, tflite::TensorType_FLOAT32, std::string(name) + "_b", bv);
    const int oh = padding == tflite::Padding_SAME ? (ph + stride - 1) / stride : (ph - 3) / stride + 1;
    const int ow = padding == tflite::Padding_SAME ? (pw + stride - 1) / stride : (pw - 3) / stride + 1;
    const int y = t.tensor({1, oh, ow, oc}, tflite::TensorType_FLOAT32, name);
    auto o = tflite::CreateConv2DOptions(t.fbb(), padding, stride, stride, tflite::ActivationFunctionType_RELU6);
    t.op(t.opcode(tflite::BuiltinOperator_CONV_2D), {padded, wt, bt}, {y}, tflite::BuiltinOptions_Conv2DOptions,
         o.Union());
    return std::make_pair(y, size_t(oh) * ow * oc);
  };
  Built b;
  b.in_elems = size_t(h) * w * c;
  int y = -1;
  switch (reader) {
    case Reader::kConvValid: std::tie(y, b.out_elems) = conv(tflite::Padding_VALID, 2, "y"); break;
    case Reader::kConvSame: std::tie(y, b.out_elems) = conv(tflite::Padding_SAME, 1, "y"); break;
    case Reader::kDepthwiseSame: {
      const int wt = t.constant<float>({1, 3, 3, pc}, tflite::TensorType_FLOAT32, "dw_w", dwv);
      const int bt = t.constant<float>({pc}, tflite::TensorType_FLOAT32, "dw_b", dbv);
      const int oh = (ph + 1) / 2, ow = (pw + 1) / 2;
      y = t.tensor({1, oh, ow, pc}, tflite::TensorType_FLOAT32, "y");
      auto o = tflite::CreateDepthwiseConv2DOptions(t.fbb(), tflite::Padding_SAME, 2, 2, 1);
      t.op(t.opcode(tflite::BuiltinOperator_DEPTHWISE_CONV_2D), {padded, wt, bt}, {y},
           tflite::BuiltinOptions_DepthwiseConv2DOptions, o.Union());
      b.out_elems = size_t(oh) * ow * pc;
      break;
    }
    case Reader::kConvAndPool:
    case Reader::kConvTwice: {
      auto [a, an] = conv(tflite::Padding_VALID, 1, "a");
      int second = -1;
      size_t sn = 0;
      if (reader == Reader::kConvTwice) {
        std::tie(second, sn) = conv(tflite::Padding_SAME, 2, "s");
      } else {  // a max pool pads with -inf, not zeros: the PAD must stay
        second = t.tensor({1, ph - 2, pw - 2, pc}, tflite::TensorType_FLOAT32, "pool");
        auto o = tflite::CreatePool2DOptions(t.fbb(), tflite::Padding_VALID, 1, 1, 3, 3);
        t.op(t.opcode(tflite::BuiltinOperator_MAX_POOL_2D), {padded}, {second}, tflite::BuiltinOptions_Pool2DOptions,
             o.Union());
        sn = size_t(ph - 2) * (pw - 2) * pc;
      }
      b.bytes = t.finish({x}, {a, second});
      b.out_elems = an + sn;
      return b;
    }
  }
  b.bytes = t.finish({x}, {y});
  return b;
}

// The import's model (PAD folded where it can be) and the same graph imported without the
// fold (the importer's unvalidated graph, validated here): op summaries and outputs.
struct Imported {
  std::shared_ptr<nn::Model> folded, kept;
};
Imported import_both(const Built& b) {
  Imported r;
  auto f = nn::import_tflite_buffer(b.bytes, "pad.tflite");
  EXPECT_TRUE(f.is_ok()) << f.status().to_string();
  nn::tflite_import::ImportOptions raw;
  raw.validate = false;
  auto k = nn::tflite_import::import_buffer(b.bytes, "pad.tflite", raw);
  EXPECT_TRUE(k.is_ok()) << k.status().to_string();
  if (!f.is_ok() || !k.is_ok()) return r;
  r.folded = *f;
  r.kept = *k;
  EXPECT_TRUE(r.kept->validate_and_infer_shapes().is_ok());
  return r;
}

std::vector<std::vector<float>> run(const nn::Model& m, const std::vector<float>& in, const std::string& delegate) {
  std::vector<std::vector<float>> outs;
  for (uint32_t o : m.outputs) outs.emplace_back(nn::num_elements(m.operands[o].dims));
  if (delegate == "reference") {
    const void* ins[] = {in.data()};
    std::vector<void*> ptrs;
    for (auto& o : outs) ptrs.push_back(o.data());
    EXPECT_TRUE(nn::run_reference(m, ins, ptrs).is_ok());
    return outs;
  }
  nn::SessionOptions options;
  options.delegates = {delegate};
  auto s = nn::Session::open(std::make_shared<nn::Model>(m), options);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return outs;
  std::copy(in.begin(), in.end(), (*s)->input_f32(0));
  EXPECT_TRUE((*s)->run().is_ok());
  for (size_t i = 0; i < outs.size(); ++i)
    std::copy_n((*s)->output_f32(i), outs[i].size(), outs[i].begin());
  return outs;
}

void expect_same_outputs(const Imported& m, size_t in_elems) {
  const std::vector<float> in = nn_test::random_floats(in_elems, 9);
  const auto want = run(*m.kept, in, "reference");
  for (const char* d : {"reference", "cpu"}) {
    const auto got = run(*m.folded, in, d);
    ASSERT_EQ(got.size(), want.size());
    // the reference kernels add the same products in the same order; the CPU delegate's
    // kernels (FMA, their own order) land within float rounding of them
    const double tolerance = std::string(d) == "reference" ? 1e-7 : 1e-4;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LT(nn_test::max_relative_error(got[i].data(), want[i].data(), want[i].size()), tolerance)
          << d << " output " << i;
  }
}

TEST(TfliteFoldPad, ZeroSpatialPadBecomesTheConvsPadding) {
  const struct {
    Reader reader;
    std::vector<int32_t> pads;
    const char* summary;
  } cases[] = {
      {Reader::kConvValid, {0, 0, 1, 1, 1, 1, 0, 0}, "CONV_2D x 1"},     // Keras' ZeroPadding2D + stride 2
      {Reader::kConvValid, {0, 0, 0, 1, 2, 0, 0, 0}, "CONV_2D x 1"},     // asymmetric
      {Reader::kConvSame, {0, 0, 2, 1, 0, 3, 0, 0}, "CONV_2D x 1"},      // added to SAME's own
      {Reader::kDepthwiseSame, {0, 0, 1, 2, 1, 0, 0, 0}, "DEPTHWISE_CONV_2D x 1"},
      {Reader::kConvTwice, {0, 0, 1, 1, 1, 1, 0, 0}, "CONV_2D x 2"},     // every reader takes it
  };
  for (const auto& c : cases) {
    const Built b = pad_then(c.reader, c.pads);
    const Imported m = import_both(b);
    ASSERT_TRUE(m.folded && m.kept);
    EXPECT_EQ(m.folded->op_summary(), c.summary);
    EXPECT_EQ(m.kept->op_summary(), std::string("PAD x 1, ") + c.summary);
    expect_same_outputs(m, b.in_elems);
  }
}

TEST(TfliteFoldPad, PadThatIsNotAConvsPaddingStays) {
  // channels padded; a max pool beside the conv; the padded tensor a model output
  const Imported channels = import_both(pad_then(Reader::kConvValid, {0, 0, 1, 1, 1, 1, 0, 2}));
  ASSERT_TRUE(channels.folded);
  EXPECT_EQ(channels.folded->op_summary(), "PAD x 1, CONV_2D x 1");
  const Built pool = pad_then(Reader::kConvAndPool, {0, 0, 1, 1, 1, 1, 0, 0});
  const Imported with_pool = import_both(pool);
  ASSERT_TRUE(with_pool.folded);
  EXPECT_EQ(with_pool.folded->op_summary(), "PAD x 1, CONV_2D x 1, MAX_POOL_2D x 1");
  expect_same_outputs(with_pool, pool.in_elems);
}

}  // namespace
