// The CPU delegate's fusion passes (cpu_passes.cpp), each on a model where only it can act:
// where it applies, the absorbed ops run inside their head's step; where it must not, they
// keep a step of their own; either way the numbers equal the reference kernels'.
// Where each pass is tested (this file and cpu_delegate_ops_test / cpu_options_test):
//   fuse_conv_before_resize  PointwiseConvRunsBeforeTheResizeItReads, ConvStaysAfterResizeWhen...
//   fuse_add_mean            AddThenGlobalMeanIsOneNativeOp, AddStaysUnfusedUnless..., AddClaimedBy...
//   fuse_se_gates            GatedInputFusesIntoPointwiseConv, GatedInputStaysUnfusedWhenShared
//   fuse_epilogues           ReluFoldsIntoConv, ConvHardSwishResidualAddFuse, *Fuse (depthwise),
//                            TransposeConvLogisticInEpilogue, SwishFusesIntoNativeConvAndDepthwise,
//                            BroadcastAddAndVisibleOutputStayUnfused, and the cases below
//   fuse_expand_depthwise    ExpansionRunsWithTheDepthwiseItFeeds, ExpansionStaysApartWhen...,
//                            ProjectionRunsWithTheDepthwiseItReads, ProjectionStaysApartWhen...
//   fuse_reshapes_into_data_ops  ReshapesAroundAChannelShuffleFoldIntoTheDataOps, ReshapeStays...
//   fuse_concat_affine       BatchNormAfterAChannelConcatRunsInTheCopy, BatchNormStaysApartWhen...
#include <gtest/gtest.h>

#include <string>

#include "runtime_test_util.h"
#include "test_model.h"

namespace {

using T = nn::OperationType;
using Built = nn_test::TestModel;
constexpr double kTolerance = 1e-4;

bool has_native() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// One profiled CPU step per head op, compared with the reference kernels.
nn_test::Comparison profiled_cpu(Built& b, float lo, float hi, const nn::CpuOptions& cpu = {}) {
  nn::Status v = b.model->validate_and_infer_shapes();
  EXPECT_TRUE(v.is_ok()) << v.to_string();
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.profile = true;
  o.cpu = cpu;
  auto c = nn_test::compare_with_reference(b.model, o, lo, hi);
  EXPECT_LE(c.max_rel_error, kTolerance) << nn_test::step_labels(c);
  return c;
}

uint32_t conv1x1(Built& b, uint32_t x, uint32_t c, uint32_t seed, int32_t fuse = 0) {
  return b.op(T::CONV_2D, {x, b.constant({c, 1, 1, c}, seed, -1.f, 1.f), b.constant({c}, seed + 1), b.i32(1),
                           b.i32(1), b.i32(1), b.i32(fuse)});
}

// An activation after a HARD_SWISH in the epilogue stays a step of its own: the kernel's
// clamp applies before the hard swish, and RELU1 does not commute with it (hs(2) = 1.67
// clamps to 1, hs(clamp(2)) = 0.67).
TEST(CpuFusionPass, EpilogueKeepsAnActivationAfterHardSwishApart) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  uint32_t x = b.input({1, 6, 7, 13});
  b.output(b.op(T::RELU1, {b.op(T::HARD_SWISH, {conv1x1(b, x, 13, 61)})}));
  auto c = profiled_cpu(b, -3.f, 3.f);
  EXPECT_EQ(nn_test::count_steps(c, "op 0 CONV_2D [native]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "HARD_SWISH"), 0) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 2 RELU1 [xnnpack]"), 1) << nn_test::step_labels(c);
}

// A LOGISTIC after a native conv stays apart (only the transpose conv's epilogue has one).
TEST(CpuFusionPass, EpilogueTakesNoLogisticAfterADenseConv) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  b.output(b.op(T::LOGISTIC, {conv1x1(b, b.input({1, 6, 7, 13}), 13, 63)}));
  auto c = profiled_cpu(b, -2.f, 2.f);
  EXPECT_EQ(nn_test::count_steps(c, "op 0 CONV_2D [native]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 1 LOGISTIC [xnnpack]"), 1) << nn_test::step_labels(c);
}

// One residual per epilogue: of two ADDs in a row the first is absorbed, the second stays.
TEST(CpuFusionPass, EpilogueAddsOneResidualOnly) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  uint32_t x = b.input({1, 6, 7, 13}), skip = b.input({1, 6, 7, 13});
  uint32_t sum = b.op(T::ADD, {conv1x1(b, x, 13, 65), x, b.i32(0)});
  b.output(b.op(T::ADD, {sum, skip, b.i32(0)}));
  auto c = profiled_cpu(b, -2.f, 2.f);
  EXPECT_EQ(nn_test::count_steps(c, "op 0 CONV_2D [native]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 1 ADD"), 0) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 2 ADD [xnnpack]"), 1) << nn_test::step_labels(c);
}

// Without native kernels the epilogue is XNNPACK's clamp only: a RELU* folds into the op
// before it when that op clamps its output (a conv, an ADD), never into one that does not
// (LOGISTIC), and a HARD_SWISH or residual ADD stays an XNNPACK node of its own.
TEST(CpuFusionPass, EpilogueOnXnnpackOpsFoldsActivationsOnly) {
  nn::CpuOptions xnnpack_only;
  xnnpack_only.native_kernels = false;
  Built b;
  uint32_t x = b.input({1, 6, 7, 13});
  uint32_t conv = conv1x1(b, x, 13, 67);
  uint32_t relu = b.op(T::RELU6, {conv});                          // folds into op 0
  uint32_t hs = b.op(T::HARD_SWISH, {relu});                       // stays
  uint32_t add = b.op(T::ADD, {hs, x, b.i32(0)});                  // stays (a residual for native only)
  uint32_t clamp = b.op(T::RELU1, {add});                          // folds into the ADD
  b.output(b.op(T::RELU, {b.op(T::LOGISTIC, {clamp})}));           // RELU stays after LOGISTIC
  auto c = profiled_cpu(b, -3.f, 3.f, xnnpack_only);
  EXPECT_EQ(nn_test::count_steps(c, "[native]"), 0) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "RELU6"), 0) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "RELU1"), 0) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 2 HARD_SWISH [xnnpack]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 3 ADD [xnnpack]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "op 6 RELU [xnnpack]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(c.steps.size(), 5u) << nn_test::step_labels(c);
}

// x * sigmoid(x) is a swish epilogue only when the sigmoid feeds nothing else and the MUL
// has no activation of its own; otherwise LOGISTIC and MUL stay XNNPACK nodes.
TEST(CpuFusionPass, SwishStaysApartWhenTheSigmoidIsSharedOrTheProductClamped) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  {
    Built b;
    uint32_t y = conv1x1(b, b.input({1, 6, 7, 13}), 13, 69);
    uint32_t s = b.op(T::LOGISTIC, {y});
    b.output(b.op(T::MUL, {y, s, b.i32(0)}));
    b.output(s);  // the sigmoid is read outside too
    auto c = profiled_cpu(b, -3.f, 3.f);
    EXPECT_EQ(nn_test::count_steps(c, "op 1 LOGISTIC [xnnpack]"), 1) << nn_test::step_labels(c);
    EXPECT_EQ(nn_test::count_steps(c, "op 2 MUL [xnnpack]"), 1) << nn_test::step_labels(c);
  }
  {
    Built b;
    uint32_t y = conv1x1(b, b.input({1, 6, 7, 13}), 13, 71);
    b.output(b.op(T::MUL, {y, b.op(T::LOGISTIC, {y}), b.i32(3)}));  // MUL's own RELU6
    auto c = profiled_cpu(b, -3.f, 3.f);
    EXPECT_EQ(nn_test::count_steps(c, "op 1 LOGISTIC [xnnpack]"), 1) << nn_test::step_labels(c);
    EXPECT_EQ(nn_test::count_steps(c, "op 2 MUL [xnnpack]"), 1) << nn_test::step_labels(c);
  }
}

// An inverted residual block on 56x56 (expansion 16 -> 96, 3x3 depthwise, projection
// 96 -> 16, maybe the block's residual ADD), at 1 and 2 threads: the depthwise's 1.2 MB
// output is over the 512 KB below which depthwise_project_pays leaves the projection apart.
TEST(CpuFusionPass, ProjectionRunsWithTheDepthwiseItReads) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  for (bool add : {true, false}) {
    Built b;
    uint32_t x = b.input({1, 56, 56, 16});
    uint32_t e = b.op(T::CONV_2D, {x, b.constant({96, 1, 1, 16}, 91, -0.5f, 0.5f), b.constant({96}, 92),
                                   b.i32(1), b.i32(1), b.i32(1), b.i32(3)});
    uint32_t d =
        b.op(T::DEPTHWISE_CONV_2D, {e, b.constant({1, 3, 3, 96}, 93, -0.5f, 0.5f), b.constant({96}, 94),
                                    b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(3)});
    uint32_t p = b.op(T::CONV_2D, {d, b.constant({16, 1, 1, 96}, 95, -0.5f, 0.5f), b.constant({16}, 96),
                                   b.i32(1), b.i32(1), b.i32(1), b.i32(0)});
    b.output(add ? b.op(T::ADD, {p, x, b.i32(0)}) : p);
    for (int threads : {1, 2}) {
      nn::Status v = b.model->validate_and_infer_shapes();
      ASSERT_TRUE(v.is_ok()) << v.to_string();
      nn::SessionOptions o;
      o.delegates = {"cpu"};
      o.profile = true;
      o.threads = threads;
      auto c = nn_test::compare_with_reference(b.model, o, -1.f, 1.f);
      EXPECT_LE(c.max_rel_error, kTolerance) << nn_test::step_labels(c);
      // One step: the expansion's, running the depthwise, the projection and the ADD.
      EXPECT_EQ(nn_test::count_steps(c, "op 0 CONV_2D [native]"), 1) << nn_test::step_labels(c);
      EXPECT_EQ(c.steps.size(), 1u) << threads << " threads: " << nn_test::step_labels(c);
    }
  }
}

// The projection stays apart, while the expansion still runs the depthwise, where the
// depthwise's output is small (48x48 at stride 2: 24x24x96, 221 KB), is read by another op
// too, or is read by a conv that is not pointwise.
TEST(CpuFusionPass, ProjectionStaysApartWhenSmallSharedOrNotPointwise) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  struct Case {
    uint32_t size, stride, k;
    bool shared;
  };
  for (const Case& c : {Case{48, 2, 1, false}, Case{56, 1, 1, true}, Case{56, 1, 3, false}}) {
    Built b;
    uint32_t x = b.input({1, c.size, c.size, 16});
    uint32_t e = b.op(T::CONV_2D, {x, b.constant({96, 1, 1, 16}, 97, -0.5f, 0.5f), b.constant({96}, 98),
                                   b.i32(1), b.i32(1), b.i32(1), b.i32(3)});
    uint32_t d =
        b.op(T::DEPTHWISE_CONV_2D, {e, b.constant({1, 3, 3, 96}, 99, -0.5f, 0.5f), b.constant({96}, 100),
                                    b.i32(1), b.i32(c.stride), b.i32(c.stride), b.i32(1), b.i32(3)});
    b.output(b.op(T::CONV_2D, {d, b.constant({16, c.k, c.k, 96}, 101, -0.5f, 0.5f), b.constant({16}, 102),
                               b.i32(1), b.i32(1), b.i32(1), b.i32(0)}));
    if (c.shared) b.output(d);
    auto r = profiled_cpu(b, -1.f, 1.f);
    const std::string what = std::to_string(c.size) + " stride " + std::to_string(c.stride) + " k " +
                             std::to_string(c.k) + (c.shared ? " shared" : "") + ": " +
                             nn_test::step_labels(r);
    EXPECT_EQ(nn_test::count_steps(r, "op 0 CONV_2D [native]"), 1) << what;
    EXPECT_EQ(nn_test::count_steps(r, "op 1 "), 0) << what;  // the expansion runs the depthwise
    EXPECT_EQ(nn_test::count_steps(r, "op 2 CONV_2D [native]"), 1) << what;
  }
}

// Each fusion switch, off, leaves exactly its own pattern unfused while the others still
// apply: a model with five patterns, one switch off at a time.
// ShuffleNet's channel shuffle as the ONNX importer writes it (NHWC -> NCHW, RESHAPE to
// [.., 2, C/2, H, W], TRANSPOSE, RESHAPE back, a SLICE of one half, back to NHWC): every
// RESHAPE, a RESHAPE of a RESHAPE too, is written by the data op before it, on 1 and 2 threads.
uint32_t shuffle_half(Built& b, uint32_t x, int32_t h, int32_t w, int32_t half) {
  uint32_t nchw = b.op(T::TRANSPOSE, {x, b.ints({0, 3, 1, 2})});
  uint32_t groups = b.op(T::RESHAPE, {nchw, b.ints({1, 2, half, h, w})});
  uint32_t swapped = b.op(T::TRANSPOSE, {groups, b.ints({0, 2, 1, 3, 4})});
  uint32_t back = b.op(T::RESHAPE, {swapped, b.ints({1, 2 * half, h, w})});
  uint32_t flat = b.op(T::RESHAPE, {back, b.ints({1, 2 * half, h * w})});
  uint32_t second = b.op(T::SLICE, {flat, b.ints({0, half, 0}), b.ints({1, half, h * w})});
  uint32_t image = b.op(T::RESHAPE, {second, b.ints({1, half, h, w})});
  return b.op(T::TRANSPOSE, {image, b.ints({0, 2, 3, 1})});
}

TEST(CpuFusionPass, ReshapesAroundAChannelShuffleFoldIntoTheDataOps) {
  for (int32_t half : {13, 24}) {
    Built b;
    b.output(shuffle_half(b, b.input({1, 7, 9, uint32_t(2 * half)}), 7, 9, half));
    auto on = profiled_cpu(b, -1.f, 1.f);
    EXPECT_EQ(nn_test::count_steps(on, "RESHAPE"), 0) << nn_test::step_labels(on);
    EXPECT_EQ(nn_test::count_steps(on, "TRANSPOSE [native]"), 3) << nn_test::step_labels(on);
    EXPECT_EQ(nn_test::count_steps(on, "op 5 SLICE [native]"), 1) << nn_test::step_labels(on);
    EXPECT_EQ(on.steps.size(), 4u) << nn_test::step_labels(on);
    nn::CpuOptions off;
    off.fold_reshapes = false;
    auto apart = profiled_cpu(b, -1.f, 1.f, off);
    EXPECT_EQ(nn_test::count_steps(apart, "RESHAPE [xnnpack]"), 4) << nn_test::step_labels(apart);
    nn::SessionOptions two;
    two.delegates = {"cpu"};
    two.threads = 2;
    EXPECT_LE(nn_test::compare_with_reference(b.model, two, -1.f, 1.f).max_rel_error, kTolerance);
  }
}

// A RESHAPE keeps its step where the tensor it reshapes is read elsewhere too (here a model
// output) or was not written by a native data op (a model input, an XNNPACK op).
TEST(CpuFusionPass, ReshapeStaysApartWhenItsInputIsSharedOrNotADataOp) {
  Built b;
  uint32_t x = b.input({1, 5, 3, 11});
  uint32_t nchw = b.op(T::TRANSPOSE, {x, b.ints({0, 3, 1, 2})});
  b.output(nchw);
  b.output(b.op(T::RESHAPE, {nchw, b.ints({11, 15})}));                           // op 1: shared input
  b.output(b.op(T::RESHAPE, {x, b.ints({15, 11})}));                              // op 2: a model input
  b.output(b.op(T::RESHAPE, {b.op(T::RELU, {x}), b.ints({5, 33})}));             // op 4: after XNNPACK
  auto c = profiled_cpu(b, -1.f, 1.f);
  EXPECT_EQ(nn_test::count_steps(c, "op 0 TRANSPOSE [native]"), 1) << nn_test::step_labels(c);
  EXPECT_EQ(nn_test::count_steps(c, "RESHAPE [xnnpack]"), 3) << nn_test::step_labels(c);
}

TEST(CpuFusionPass, EachSwitchTurnsOffItsOwnPassOnly) {
  if (!has_native()) GTEST_SKIP() << "no native kernels on this CPU";
  Built b;
  const uint32_t c = 16;
  uint32_t x = b.input({1, 32, 32, c});
  // expand (1x1 to 96) + depthwise 3x3 on 48x48: 884 KB between them, over the 512 KB
  // below which expand_depthwise leaves them apart.
  uint32_t big = b.input({1, 48, 48, c});
  uint32_t e = b.op(T::CONV_2D, {big, b.constant({96, 1, 1, c}, 81), b.constant({96}, 82), b.i32(1), b.i32(1),
                                 b.i32(1), b.i32(3)});
  uint32_t dw = b.op(T::DEPTHWISE_CONV_2D, {e, b.constant({1, 3, 3, 96}, 83), b.constant({96}, 84), b.i32(1),
                                            b.i32(1), b.i32(1), b.i32(1), b.i32(3)});
  b.output(dw);
  // add + global mean
  uint32_t sum = b.op(T::ADD, {x, b.input({1, 32, 32, c}), b.i32(0)});
  b.output(b.op(T::MEAN, {sum, b.ints({1, 2}), b.i32(1)}));
  // SE gate into a pointwise conv
  uint32_t gate = b.input({1, 1, 1, c});
  b.output(conv1x1(b, b.op(T::MUL, {x, gate, b.i32(0)}), c, 85));
  // pointwise conv after a resize
  uint32_t up = b.op(T::RESIZE_BILINEAR, {x, b.i32(64), b.i32(64), b.boolean(false), b.boolean(false),
                                          b.boolean(true)});
  b.output(conv1x1(b, up, c, 87));
  // swish epilogue
  uint32_t y = conv1x1(b, x, c, 89);
  b.output(b.op(T::MUL, {y, b.op(T::LOGISTIC, {y}), b.i32(0)}));

  auto steps_with = [&](const nn::CpuOptions& cpu) { return profiled_cpu(b, -1.f, 1.f, cpu); };
  const auto all = steps_with({});
  // `reappears` gets a step of its own (and `extra` steps are added in all) with `cpu`.
  auto unfused = [&](const nn::CpuOptions& cpu, const std::string& reappears, size_t extra = 1) {
    const auto off = steps_with(cpu);
    EXPECT_EQ(nn_test::count_steps(all, reappears), 0) << nn_test::step_labels(all);
    EXPECT_EQ(nn_test::count_steps(off, reappears), 1) << nn_test::step_labels(off);
    EXPECT_EQ(off.steps.size(), all.steps.size() + extra) << "one pattern unfused: " << nn_test::step_labels(off);
  };
  nn::CpuOptions o;
  o.expand_depthwise = false;
  unfused(o, "DEPTHWISE_CONV_2D");
  o = {};
  o.add_mean = false;
  unfused(o, "MEAN");
  o = {};
  o.se_fusion = false;
  unfused(o, "op 4 MUL");
  o = {};
  o.conv_before_resize = false;
  unfused(o, "RESIZE_BILINEAR");
  o = {};
  o.swish_epilogue = false;
  unfused(o, "LOGISTIC", 2);  // and its MUL
}

// DenseNet's dense layer input: a channel concat, then a batch norm as MUL by a per-channel
// constant and ADD of one, then a RELU (the ADD's fuse code or an op). The concat's copy
// computes them all and writes the last output, bit-identical to the reference (the
// product and the sum rounded apart, no FMA), with AVX-512, AVX2, on 1 and 2 threads (the
// 40 x 40 image splits its rows); odd channel counts leave vector tails in every input.
struct BatchNorm {
  bool const_first_mul = false, const_first_add = false;
  bool rank4_constants = false;  // [1,1,1,C] rather than [C]
  int32_t add_fuse = 1;          // RELU
  nn::OperationType after = nn::OperationType::ADD;  // ADD: no activation op after the ADD
};

uint32_t concat_batch_norm(Built& b, const std::vector<uint32_t>& xs, uint32_t c, const BatchNorm& bn) {
  std::vector<uint32_t> in = xs;
  in.push_back(b.i32(3));
  const uint32_t cat = b.op(T::CONCATENATION, in);
  const nn::Dims cd = bn.rank4_constants ? nn::Dims{1, 1, 1, c} : nn::Dims{c};
  const uint32_t s = b.constant(cd, 91, -2.f, 2.f), t = b.constant(cd, 92, -3.f, 3.f);
  const uint32_t mul = b.op(T::MUL, {bn.const_first_mul ? s : cat, bn.const_first_mul ? cat : s, b.i32(0)});
  const uint32_t add = b.op(T::ADD, {bn.const_first_add ? t : mul, bn.const_first_add ? mul : t, b.i32(bn.add_fuse)});
  return bn.after == T::ADD ? add : b.op(bn.after, {add});
}

TEST(CpuFusionPass, BatchNormAfterAChannelConcatRunsInTheCopy) {
  std::vector<BatchNorm> forms(5);
  forms[1].const_first_mul = forms[1].const_first_add = true;
  forms[1].rank4_constants = true;
  forms[2].add_fuse = 0;  // no activation
  forms[3].add_fuse = 0, forms[3].after = T::RELU6;
  forms[4].add_fuse = 1, forms[4].after = T::RELU1;  // both clamps
  for (const nn::Dims& hw : {nn::Dims{1, 3, 5}, nn::Dims{1, 40, 40}}) {
    for (size_t f = 0; f < forms.size(); ++f) {
      Built b;
      const std::vector<uint32_t> widths = {5, 19, 13};
      std::vector<uint32_t> xs;
      for (uint32_t w : widths) xs.push_back(b.input({hw[0], hw[1], hw[2], w}));
      b.output(concat_batch_norm(b, xs, 37, forms[f]));
      const std::string what = "form " + std::to_string(f) + " at " + std::to_string(hw[1]) + "x" + std::to_string(hw[2]);
      for (bool avx512 : {true, false}) {
        nn::CpuOptions cpu;
        cpu.avx512 = avx512;
        auto c = profiled_cpu(b, -4.f, 4.f, cpu);
        EXPECT_EQ(c.max_rel_error, 0.0) << what;
        EXPECT_EQ(c.steps.size(), 1u) << what << ": " << nn_test::step_labels(c);
        EXPECT_EQ(nn_test::count_steps(c, "op 0 CONCATENATION [native]"), 1) << nn_test::step_labels(c);
        const std::string kernel = nn_test::cpu_kernel_of(b.model, cpu, "op 0");
        if (has_native()) {
          EXPECT_EQ(kernel, avx512 && __builtin_cpu_supports("avx512f") ? "native concat+affine AVX-512"
                                                                       : "native concat+affine AVX2") << what;
        }
        nn::SessionOptions two;
        two.delegates = {"cpu"};
        two.threads = 2;
        two.cpu = cpu;
        EXPECT_EQ(nn_test::compare_with_reference(b.model, two, -4.f, 4.f).max_rel_error, 0.0) << what;
      }
      nn::CpuOptions off;
      off.concat_affine = false;
      auto apart = profiled_cpu(b, -4.f, 4.f, off);
      EXPECT_EQ(nn_test::cpu_kernel_of(b.model, off, "op 0"), "native concat");
      EXPECT_EQ(nn_test::count_steps(apart, "op 1 MUL [xnnpack]"), 1) << nn_test::step_labels(apart);
      EXPECT_EQ(nn_test::count_steps(apart, "op 2 ADD [xnnpack]"), 1) << nn_test::step_labels(apart);
    }
  }
}

// The copy takes the batch norm only when each op's output feeds the next alone and the
// MUL and ADD are by per-channel constants along the concat's last axis.
TEST(CpuFusionPass, BatchNormStaysApartWhenSharedOrNotPerChannel) {
  auto expect_apart = [](Built& b, const std::string& what) {
    auto c = profiled_cpu(b, -4.f, 4.f);
    EXPECT_EQ(c.max_rel_error, 0.0) << what;
    EXPECT_EQ(nn_test::cpu_kernel_of(b.model, {}, "op 0"), "native concat") << what;
    EXPECT_EQ(nn_test::count_steps(c, "op 1 MUL [xnnpack]"), 1) << what << ": " << nn_test::step_labels(c);
  };
  {  // the concat's output read twice (also a model output)
    Built b;
    uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 9});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(3)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.constant({16}, 94), b.i32(1)}));
    b.output(cat);
    expect_apart(b, "shared concat");
  }
  {  // the MUL's output read twice
    Built b;
    uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 9});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(3)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.constant({16}, 94), b.i32(1)}));
    b.output(b.op(T::RELU, {mul}));
    expect_apart(b, "shared product");
  }
  {  // a MUL by one value per pixel, not per channel
    Built b;
    uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 9});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(3)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({1, 4, 5, 16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.constant({16}, 94), b.i32(1)}));
    expect_apart(b, "per-pixel scale");
  }
  {  // an ADD of one value per element
    Built b;
    uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 9});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(3)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.constant({1, 4, 5, 16}, 94), b.i32(1)}));
    expect_apart(b, "per-element bias");
  }
  {  // an ADD of a tensor computed at run time
    Built b;
    uint32_t x = b.input({1, 4, 5, 7}), y = b.input({1, 4, 5, 9});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(3)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.input({16}), b.i32(1)}));
    expect_apart(b, "run-time bias");
  }
  {  // a concat along the width, not the channels
    Built b;
    uint32_t x = b.input({1, 4, 5, 16}), y = b.input({1, 4, 3, 16});
    uint32_t cat = b.op(T::CONCATENATION, {x, y, b.i32(2)});
    uint32_t mul = b.op(T::MUL, {cat, b.constant({16}, 93), b.i32(0)});
    b.output(b.op(T::ADD, {mul, b.constant({16}, 94), b.i32(1)}));
    expect_apart(b, "width concat");
  }
}

}  // namespace
