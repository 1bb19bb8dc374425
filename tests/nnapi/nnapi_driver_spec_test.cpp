// The reference driver (libneuralnetworks.so, level-30 build, linked directly) against the
// NNAPI specification: each validation rule, result codes, copy-vs-reference of values,
// a model built op by op and run; the level-27 and level-29 builds (dlopen'ed by path)
// export only their level's functions and refuse what came later.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "nnapi/NeuralNetworks.h"

namespace {

constexpr int32_t kFloat32 = 0, kInt32 = 1, kTensorFloat32 = 3, kTensorInt32 = 4, kQuant8Signed = 14, kBool = 6;
constexpr int32_t kAdd = 0, kConv2d = 3, kEmbeddingLookup = 7, kSoftmax = 25, kHardSwish = 99;

struct ModelPtr {
  ANeuralNetworksModel* m = nullptr;
  ModelPtr() { EXPECT_EQ(ANeuralNetworksModel_create(&m), ANEURALNETWORKS_NO_ERROR); }
  ~ModelPtr() { ANeuralNetworksModel_free(m); }
  operator ANeuralNetworksModel*() const { return m; }
};

ANeuralNetworksOperandType tensor(const std::vector<uint32_t>& dims, int32_t type = kTensorFloat32) {
  return {type, static_cast<uint32_t>(dims.size()), dims.data(), 0.f, 0};
}
ANeuralNetworksOperandType scalar(int32_t type) { return {type, 0, nullptr, 0.f, 0}; }

int add_i32(ANeuralNetworksModel* m, int32_t* next, int32_t v) {
  ANeuralNetworksOperandType t = scalar(kInt32);
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m, &t), ANEURALNETWORKS_NO_ERROR);
  EXPECT_EQ(ANeuralNetworksModel_setOperandValue(m, *next, &v, sizeof v), ANEURALNETWORKS_NO_ERROR);
  return (*next)++;
}

NnpipeDriverCounters counters() {
  NnpipeDriverCounters c{};
  NnpipeDriver_getCounters(&c);
  return c;
}

// out = in + c (c a constant of n floats): the model most rules are tried on.
struct AddModel {
  ModelPtr model;
  std::vector<uint32_t> dims;
  std::vector<float> constant;
  explicit AddModel(uint32_t n, bool finish = true) : dims{n}, constant(n) {
    for (uint32_t i = 0; i < n; ++i) constant[i] = 0.5f * static_cast<float>(i);
    ANeuralNetworksOperandType t = tensor(dims), act = scalar(kInt32);
    for (int k = 0; k < 2; ++k) EXPECT_EQ(ANeuralNetworksModel_addOperand(model, &t), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksModel_addOperand(model, &act), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksModel_addOperand(model, &t), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksModel_setOperandValue(model, 1, constant.data(), n * sizeof(float)), ANEURALNETWORKS_NO_ERROR);
    int32_t none = 0;
    EXPECT_EQ(ANeuralNetworksModel_setOperandValue(model, 2, &none, sizeof none), ANEURALNETWORKS_NO_ERROR);
    uint32_t ins[] = {0, 1, 2}, outs[] = {3}, model_in[] = {0};
    EXPECT_EQ(ANeuralNetworksModel_addOperation(model, kAdd, 3, ins, 1, outs), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksModel_identifyInputsAndOutputs(model, 1, model_in, 1, outs), ANEURALNETWORKS_NO_ERROR);
    if (finish) {
      EXPECT_EQ(ANeuralNetworksModel_finish(model), ANEURALNETWORKS_NO_ERROR);
    }
  }
  // Compiles, runs once on `in`, returns the output (and the result code in *code).
  std::vector<float> run(const std::vector<float>& in, int* code = nullptr) {
    ANeuralNetworksCompilation* c = nullptr;
    EXPECT_EQ(ANeuralNetworksCompilation_create(model, &c), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_NO_ERROR);
    ANeuralNetworksExecution* e = nullptr;
    EXPECT_EQ(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_NO_ERROR);
    std::vector<float> out(in.size(), -1.f);
    EXPECT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, in.data(), in.size() * 4), ANEURALNETWORKS_NO_ERROR);
    EXPECT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, out.data(), out.size() * 4), ANEURALNETWORKS_NO_ERROR);
    int result = ANeuralNetworksExecution_compute(e);
    if (code) *code = result;
    ANeuralNetworksExecution_free(e);
    ANeuralNetworksCompilation_free(c);
    return out;
  }
};

TEST(NnapiDriverSpec, ModelBuiltOpByOpRuns) {
  // CONV_2D (3x3, 1->2 channels, SAME, implicit padding) then ADD with a constant, RELU6 fused.
  ModelPtr m;
  int32_t next = 0;
  std::vector<uint32_t> in_dims{1, 4, 4, 1}, filter_dims{2, 3, 3, 1}, bias_dims{2}, out_dims{1, 4, 4, 2};
  ANeuralNetworksOperandType in_t = tensor(in_dims), f_t = tensor(filter_dims), b_t = tensor(bias_dims),
                             o_t = tensor(out_dims);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &in_t), 0);
  const int input = next++;
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &f_t), 0);
  const int filter = next++;
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &b_t), 0);
  const int bias = next++;
  std::vector<float> f(18), b{0.25f, -1.f};
  for (int i = 0; i < 18; ++i) f[i] = i < 9 ? 1.f : (i % 2 ? 0.5f : -0.5f);
  ASSERT_EQ(ANeuralNetworksModel_setOperandValue(m, filter, f.data(), f.size() * 4), 0);
  ASSERT_EQ(ANeuralNetworksModel_setOperandValue(m, bias, b.data(), b.size() * 4), 0);
  const int pad = add_i32(m, &next, 1 /*SAME*/), sw = add_i32(m, &next, 1), sh = add_i32(m, &next, 1),
            act = add_i32(m, &next, 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &o_t), 0);
  const int conv_out = next++;
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &o_t), 0);
  const int addend = next++;
  std::vector<float> addend_v(32, 1.f);
  ASSERT_EQ(ANeuralNetworksModel_setOperandValue(m, addend, addend_v.data(), 128), 0);
  const int relu6 = add_i32(m, &next, 3);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &o_t), 0);
  const int out = next++;
  uint32_t conv_in[] = {uint32_t(input), uint32_t(filter), uint32_t(bias), uint32_t(pad), uint32_t(sw), uint32_t(sh), uint32_t(act)};
  uint32_t conv_outs[] = {uint32_t(conv_out)}, add_in[] = {uint32_t(conv_out), uint32_t(addend), uint32_t(relu6)},
           add_outs[] = {uint32_t(out)}, model_in[] = {uint32_t(input)};
  // Ops added out of order: the driver runs them in a topological order.
  ASSERT_EQ(ANeuralNetworksModel_addOperation(m, kAdd, 3, add_in, 1, add_outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperation(m, kConv2d, 7, conv_in, 1, conv_outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_identifyInputsAndOutputs(m, 1, model_in, 1, add_outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_finish(m), 0);

  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = 0.1f * static_cast<float>(i) - 0.5f;
  ANeuralNetworksCompilation* c = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_create(m, &c), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c), 0);
  ANeuralNetworksExecution* e = nullptr;
  ASSERT_EQ(ANeuralNetworksExecution_create(c, &e), 0);
  std::vector<float> y(32);
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 0, &in_t, x.data(), 64), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, y.data(), 128), 0);
  ASSERT_EQ(ANeuralNetworksExecution_compute(e), 0);
  uint32_t rank = 0, dims[4] = {};
  ASSERT_EQ(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), 0);
  ASSERT_EQ(rank, 4u);
  ASSERT_EQ(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), 0);
  EXPECT_EQ(dims[3], 2u);
  for (int yy = 0; yy < 4; ++yy)
    for (int xx = 0; xx < 4; ++xx)
      for (int oc = 0; oc < 2; ++oc) {
        float acc = b[oc];
        for (int ky = -1; ky <= 1; ++ky)
          for (int kx = -1; kx <= 1; ++kx) {
            int sy = yy + ky, sx = xx + kx;
            if (sy < 0 || sy >= 4 || sx < 0 || sx >= 4) continue;
            acc += x[sy * 4 + sx] * f[oc * 9 + (ky + 1) * 3 + (kx + 1)];
          }
        float want = std::min(6.f, std::max(0.f, acc + 1.f));
        EXPECT_NEAR(y[(yy * 4 + xx) * 2 + oc], want, 1e-5) << yy << "," << xx << "," << oc;
      }
  ANeuralNetworksExecution_free(e);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, UnexpectedNull) {
  EXPECT_EQ(ANeuralNetworksModel_create(nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  ModelPtr m;
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m, nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksModel_addOperand(nullptr, nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m, kAdd, 3, nullptr, 0, nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksModel_finish(nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksCompilation_create(m, nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksExecution_compute(nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  uint32_t count = 0;
  EXPECT_EQ(ANeuralNetworks_getDeviceCount(nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworks_getDeviceCount(&count), ANEURALNETWORKS_NO_ERROR);
  EXPECT_EQ(count, 2u);
  AddModel add(4);
  ANeuralNetworksCompilation* c = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_create(add.model, &c), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c), 0);
  ANeuralNetworksExecution* e = nullptr;
  ASSERT_EQ(ANeuralNetworksExecution_create(c, &e), 0);
  EXPECT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, nullptr, 16), ANEURALNETWORKS_UNEXPECTED_NULL);
  EXPECT_EQ(ANeuralNetworksExecution_startCompute(e, nullptr), ANEURALNETWORKS_UNEXPECTED_NULL);
  ANeuralNetworksExecution_free(e);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, BadDataForWhatTheSpecificationDoesNotAllow) {
  ModelPtr m;
  std::vector<uint32_t> d{4};
  ANeuralNetworksOperandType bad_type{57, 0, nullptr, 0, 0};
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m, &bad_type), ANEURALNETWORKS_BAD_DATA);
  ModelPtr m2;
  ANeuralNetworksOperandType scalar_with_dims{kInt32, 1, d.data(), 0, 0};
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m2, &scalar_with_dims), ANEURALNETWORKS_BAD_DATA);
  ModelPtr m3;
  ANeuralNetworksOperandType float_with_scale{kTensorFloat32, 1, d.data(), 0.5f, 0};
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m3, &float_with_scale), ANEURALNETWORKS_BAD_DATA);
  ModelPtr m4;
  ANeuralNetworksOperandType quant_zero_scale{kQuant8Signed, 1, d.data(), 0.f, 0};
  EXPECT_EQ(ANeuralNetworksModel_addOperand(m4, &quant_zero_scale), ANEURALNETWORKS_BAD_DATA);

  ModelPtr m5;
  ANeuralNetworksOperandType t = tensor(d), act = scalar(kInt32);
  for (int k = 0; k < 3; ++k) ASSERT_EQ(ANeuralNetworksModel_addOperand(m5, &t), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m5, &act), 0);
  std::vector<float> wrong_size(3);
  EXPECT_EQ(ANeuralNetworksModel_setOperandValue(m5, 1, wrong_size.data(), 12), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(ANeuralNetworksModel_setOperandValue(m5, 9, wrong_size.data(), 16), ANEURALNETWORKS_BAD_DATA);
  uint32_t two[] = {0, 1}, three[] = {0, 1, 3}, out[] = {2}, past[] = {0, 1, 7};
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m5, kAdd, 2, two, 1, out), ANEURALNETWORKS_BAD_DATA);  // ADD takes 3
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m5, kAdd, 3, past, 1, out), ANEURALNETWORKS_BAD_DATA);  // operand 7
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m5, 1234, 3, three, 1, out), ANEURALNETWORKS_BAD_DATA);  // no such op
  ModelPtr m6;
  for (int k = 0; k < 3; ++k) ASSERT_EQ(ANeuralNetworksModel_addOperand(m6, &t), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m6, &act), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperation(m6, kAdd, 3, three, 1, out), 0);
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m6, kAdd, 3, three, 1, out), ANEURALNETWORKS_BAD_DATA);  // written twice
  // A failed call leaves the model invalid: finish refuses it.
  EXPECT_EQ(ANeuralNetworksModel_finish(m6), ANEURALNETWORKS_BAD_STATE);

  ModelPtr empty;
  EXPECT_EQ(ANeuralNetworksModel_finish(empty), ANEURALNETWORKS_BAD_DATA);  // no inputs/outputs
}

TEST(NnapiDriverSpec, AValidOpTheKernelsLackIsUnsupportedNotBadData) {
  // EMBEDDING_LOOKUP (level 27) is valid NNAPI; nnpipe has no kernel for it.
  ModelPtr m;
  std::vector<uint32_t> lookup_dims{2}, value_dims{3, 4}, out_dims{2, 4};
  ANeuralNetworksOperandType lookups = tensor(lookup_dims, kTensorInt32), values = tensor(value_dims),
                             out = tensor(out_dims);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &lookups), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &values), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &out), 0);
  uint32_t ins[] = {0, 1}, outs[] = {2};
  ASSERT_EQ(ANeuralNetworksModel_addOperation(m, kEmbeddingLookup, 2, ins, 1, outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, ins, 1, outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_finish(m), 0);
  uint32_t count = 0;
  ASSERT_EQ(ANeuralNetworks_getDeviceCount(&count), 0);
  std::vector<ANeuralNetworksDevice*> devices(count);
  for (uint32_t i = 0; i < count; ++i) ASSERT_EQ(ANeuralNetworks_getDevice(i, &devices[i]), 0);
  bool supported[1] = {true};
  ASSERT_EQ(ANeuralNetworksModel_getSupportedOperationsForDevices(m, devices.data(), count, supported), 0);
  EXPECT_FALSE(supported[0]);
  ANeuralNetworksCompilation* c = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_createForDevices(m, devices.data(), count, &c), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_BAD_DATA);  // no listed device takes it
  ANeuralNetworksCompilation_free(c);
  ASSERT_EQ(ANeuralNetworksCompilation_create(m, &c), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_OP_FAILED);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, BadStateForCallsOutOfOrder) {
  AddModel add(4, false);
  ANeuralNetworksCompilation* c = nullptr;
  EXPECT_EQ(ANeuralNetworksCompilation_create(add.model, &c), ANEURALNETWORKS_BAD_STATE);  // model not finished
  ASSERT_EQ(ANeuralNetworksModel_finish(add.model), 0);
  EXPECT_EQ(ANeuralNetworksModel_finish(add.model), ANEURALNETWORKS_BAD_STATE);
  float v[4] = {};
  EXPECT_EQ(ANeuralNetworksModel_setOperandValue(add.model, 1, v, 16), ANEURALNETWORKS_BAD_STATE);
  ANeuralNetworksOperandType t = tensor(add.dims);
  EXPECT_EQ(ANeuralNetworksModel_addOperand(add.model, &t), ANEURALNETWORKS_BAD_STATE);
  ASSERT_EQ(ANeuralNetworksCompilation_create(add.model, &c), 0);
  ANeuralNetworksExecution* e = nullptr;
  EXPECT_EQ(ANeuralNetworksExecution_create(c, &e), ANEURALNETWORKS_BAD_STATE);  // compilation not finished
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_finish(c), ANEURALNETWORKS_BAD_STATE);
  EXPECT_EQ(ANeuralNetworksCompilation_setPreference(c, ANEURALNETWORKS_PREFER_LOW_POWER), ANEURALNETWORKS_BAD_STATE);
  ASSERT_EQ(ANeuralNetworksExecution_create(c, &e), 0);
  float in[4] = {1, 2, 3, 4}, out[4];
  uint32_t rank;
  EXPECT_EQ(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), ANEURALNETWORKS_BAD_STATE);  // not run
  EXPECT_EQ(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_BAD_DATA);  // inputs not set
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, in, 16), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, out, 16), 0);
  ASSERT_EQ(ANeuralNetworksExecution_compute(e), 0);
  EXPECT_EQ(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_BAD_STATE);  // one computation per execution
  EXPECT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, in, 16), ANEURALNETWORKS_BAD_STATE);
  ANeuralNetworksExecution_free(e);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, SmallValuesAreCopiedLargeOnesReferenced) {
  // 4 floats = 16 bytes <= 128: copied at setOperandValue, so a later change is not seen.
  AddModel small(4, false);
  const std::vector<float> small_before = small.constant;
  for (float& v : small.constant) v = 100.f;
  ASSERT_EQ(ANeuralNetworksModel_finish(small.model), 0);
  std::vector<float> in(4, 1.f);
  std::vector<float> out = small.run(in);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], 1.f + small_before[i]);
  // 64 floats = 256 bytes > 128: referenced, so the change before running is what runs.
  AddModel large(64, false);
  for (float& v : large.constant) v = 100.f;
  ASSERT_EQ(ANeuralNetworksModel_finish(large.model), 0);
  std::vector<float> in64(64, 1.f);
  out = large.run(in64);
  for (float v : out) EXPECT_FLOAT_EQ(v, 101.f);
}

TEST(NnapiDriverSpec, OutputInsufficientSizeAndDimensions) {
  // The output declared with an unknown dimension: its size is known only after computing.
  ModelPtr m;
  std::vector<uint32_t> d{6}, unknown{0};
  ANeuralNetworksOperandType t = tensor(d), out_t = tensor(unknown), act = scalar(kInt32);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &t), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &t), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &act), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &out_t), 0);
  int32_t none = 0;
  ASSERT_EQ(ANeuralNetworksModel_setOperandValue(m, 2, &none, 4), 0);
  uint32_t ins[] = {0, 1, 2}, outs[] = {3}, model_in[] = {0, 1};
  ASSERT_EQ(ANeuralNetworksModel_addOperation(m, kAdd, 3, ins, 1, outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_identifyInputsAndOutputs(m, 2, model_in, 1, outs), 0);
  ASSERT_EQ(ANeuralNetworksModel_finish(m), 0);
  ANeuralNetworksCompilation* c = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_create(m, &c), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c), 0);
  float a[6] = {1, 2, 3, 4, 5, 6}, small_out[3];
  ANeuralNetworksExecution* e = nullptr;
  ASSERT_EQ(ANeuralNetworksExecution_create(c, &e), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, a, 24), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 1, nullptr, a, 24), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, small_out, sizeof small_out), 0);
  EXPECT_EQ(ANeuralNetworksExecution_compute(e), ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE);
  uint32_t rank = 0, dims[1] = {};
  ASSERT_EQ(ANeuralNetworksExecution_getOutputOperandRank(e, 0, &rank), 0);
  ASSERT_EQ(ANeuralNetworksExecution_getOutputOperandDimensions(e, 0, dims), 0);
  EXPECT_EQ(rank, 1u);
  EXPECT_EQ(dims[0], 6u);
  ANeuralNetworksExecution_free(e);
  // A fully specified output with a short buffer is refused when it is set.
  AddModel add(4);
  ANeuralNetworksCompilation* c2 = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_create(add.model, &c2), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c2), 0);
  ASSERT_EQ(ANeuralNetworksExecution_create(c2, &e), 0);
  EXPECT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, small_out, 12), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, a, 12), ANEURALNETWORKS_BAD_DATA);  // wrong length
  std::vector<uint32_t> wrong{5};
  ANeuralNetworksOperandType wrong_t = tensor(wrong);
  EXPECT_EQ(ANeuralNetworksExecution_setInput(e, 0, &wrong_t, a, 16), ANEURALNETWORKS_BAD_DATA);  // wrong dims
  ANeuralNetworksExecution_free(e);
  ANeuralNetworksCompilation_free(c2);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, DevicesTimeoutsPriorityAndStartComputeEvents) {
  uint32_t count = 0;
  ASSERT_EQ(ANeuralNetworks_getDeviceCount(&count), 0);
  std::vector<ANeuralNetworksDevice*> devices(count);
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    ASSERT_EQ(ANeuralNetworks_getDevice(i, &devices[i]), 0);
    const char* name = nullptr;
    int64_t level = 0;
    ASSERT_EQ(ANeuralNetworksDevice_getName(devices[i], &name), 0);
    ASSERT_EQ(ANeuralNetworksDevice_getFeatureLevel(devices[i], &level), 0);
    EXPECT_EQ(level, 30);
    names.push_back(name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"nnpipe-accel", "nnpipe-reference"}));
  EXPECT_EQ(ANeuralNetworks_getDevice(count, &devices[0]), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(ANeuralNetworks_getRuntimeFeatureLevel(), 30);
  AddModel add(4);
  bool supported[1] = {false};
  ASSERT_EQ(ANeuralNetworksModel_getSupportedOperationsForDevices(add.model, devices.data(), count, supported), 0);
  EXPECT_TRUE(supported[0]);
  ANeuralNetworksCompilation* c = nullptr;
  // A timeout needs a compilation for exactly one device.
  ASSERT_EQ(ANeuralNetworksCompilation_createForDevices(add.model, devices.data(), count, &c), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_setTimeout(c, 1000000), ANEURALNETWORKS_BAD_DATA);
  ANeuralNetworksCompilation_free(c);
  ASSERT_EQ(ANeuralNetworksCompilation_createForDevices(add.model, &devices[1], 1, &c), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_setPriority(c, 42), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(ANeuralNetworksCompilation_setPriority(c, ANEURALNETWORKS_PRIORITY_HIGH), 0);
  EXPECT_EQ(ANeuralNetworksCompilation_setTimeout(c, 1000000000), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(c), 0);
  ANeuralNetworksExecution* e = nullptr;
  ASSERT_EQ(ANeuralNetworksExecution_create(c, &e), 0);
  float in[4] = {1, 1, 1, 1}, out[4] = {};
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, in, 16), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, out, 16), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setTimeout(e, 1000000000), 0);
  ANeuralNetworksEvent* ev = nullptr;
  ASSERT_EQ(ANeuralNetworksExecution_startCompute(e, &ev), 0);
  EXPECT_EQ(ANeuralNetworksEvent_wait(ev), 0);
  EXPECT_FLOAT_EQ(out[3], 1.f + 1.5f);
  ANeuralNetworksEvent_free(ev);
  ANeuralNetworksExecution_free(e);
  // Bursts belong to one compilation.
  ANeuralNetworksBurst* burst = nullptr;
  ASSERT_EQ(ANeuralNetworksBurst_create(c, &burst), 0);
  ANeuralNetworksCompilation* other = nullptr;
  ASSERT_EQ(ANeuralNetworksCompilation_create(add.model, &other), 0);
  ASSERT_EQ(ANeuralNetworksCompilation_finish(other), 0);
  ASSERT_EQ(ANeuralNetworksExecution_create(other, &e), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setInput(e, 0, nullptr, in, 16), 0);
  ASSERT_EQ(ANeuralNetworksExecution_setOutput(e, 0, nullptr, out, 16), 0);
  EXPECT_EQ(ANeuralNetworksExecution_burstCompute(e, burst), ANEURALNETWORKS_BAD_DATA);
  ANeuralNetworksExecution_free(e);
  ANeuralNetworksBurst_free(burst);
  ANeuralNetworksCompilation_free(other);
  ANeuralNetworksCompilation_free(c);
}

TEST(NnapiDriverSpec, LiveObjectsAreCounted) {
  const NnpipeDriverCounters before = counters();
  {
    AddModel add(4);
    EXPECT_EQ(counters().live_models, before.live_models + 1);
    ANeuralNetworksCompilation* c = nullptr;
    ASSERT_EQ(ANeuralNetworksCompilation_create(add.model, &c), 0);
    EXPECT_EQ(counters().live_compilations, before.live_compilations + 1);
    ANeuralNetworksCompilation_free(c);
  }
  const NnpipeDriverCounters after = counters();
  EXPECT_EQ(after.live_models, before.live_models);
  EXPECT_EQ(after.live_compilations, before.live_compilations);
  EXPECT_EQ(after.live_executions, 0);
}

// The level-27 and level-29 builds, by path.
struct Library {
  void* handle;
  explicit Library(const char* path) : handle(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
  template <typename Fn>
  Fn* get(const char* name) const {
    return reinterpret_cast<Fn*>(dlsym(handle, name));
  }
};

// Builds in `lib` a one-op model of `op` with n float inputs of 4 elements plus trailing
// INT32 scalars; returns the addOperation result.
int add_operation_in(const Library& lib, int32_t op, int32_t extra_operand_type, int scalars) {
  auto create = lib.get<int(ANeuralNetworksModel**)>("ANeuralNetworksModel_create");
  auto free_model = lib.get<void(ANeuralNetworksModel*)>("ANeuralNetworksModel_free");
  auto add_operand = lib.get<int(ANeuralNetworksModel*, const ANeuralNetworksOperandType*)>("ANeuralNetworksModel_addOperand");
  auto add_operation = lib.get<int(ANeuralNetworksModel*, int32_t, uint32_t, const uint32_t*, uint32_t, const uint32_t*)>(
      "ANeuralNetworksModel_addOperation");
  ANeuralNetworksModel* m = nullptr;
  EXPECT_EQ(create(&m), 0);
  std::vector<uint32_t> d{1, 4};
  ANeuralNetworksOperandType t = tensor(d), s = scalar(kFloat32), i = scalar(kInt32);
  std::vector<uint32_t> ins;
  EXPECT_EQ(add_operand(m, &t), 0);
  ins.push_back(0);
  uint32_t next = 1;
  for (int k = 0; k < scalars; ++k, ++next) {
    EXPECT_EQ(add_operand(m, k == 0 ? &s : &i), 0);
    ins.push_back(next);
  }
  if (extra_operand_type >= 0) {
    ANeuralNetworksOperandType extra{extra_operand_type, 0, nullptr, 0, 0};
    int code = add_operand(m, &extra);
    free_model(m);
    return code;
  }
  EXPECT_EQ(add_operand(m, &t), 0);
  uint32_t out = next;
  int code = add_operation(m, op, static_cast<uint32_t>(ins.size()), ins.data(), 1, &out);
  free_model(m);
  return code;
}

TEST(NnapiDriverLevels, EachBuildExportsOnlyItsLevel) {
  Library l27(NN_NNAPI_DRIVER_DIR "/fl27/libneuralnetworks.so"), l29(NN_NNAPI_DRIVER_DIR "/fl29/libneuralnetworks.so");
  ASSERT_TRUE(l27.handle) << dlerror();
  ASSERT_TRUE(l29.handle) << dlerror();
  EXPECT_NE(l27.handle, l29.handle);
  EXPECT_TRUE(l27.get<void>("ANeuralNetworksExecution_startCompute"));
  EXPECT_FALSE(l27.get<void>("ANeuralNetworksExecution_compute"));
  EXPECT_FALSE(l27.get<void>("ANeuralNetworks_getDeviceCount"));
  EXPECT_FALSE(l27.get<void>("ANeuralNetworksModel_relaxComputationFloat32toFloat16"));
  EXPECT_TRUE(l29.get<void>("ANeuralNetworksExecution_compute"));
  EXPECT_TRUE(l29.get<void>("ANeuralNetworksBurst_create"));
  EXPECT_FALSE(l29.get<void>("ANeuralNetworksCompilation_setPriority"));
  EXPECT_FALSE(l29.get<void>("ANeuralNetworks_getRuntimeFeatureLevel"));
  EXPECT_TRUE(reinterpret_cast<void*>(&ANeuralNetworksCompilation_setPriority));
  // Nothing of the engine leaks out of the library.
  EXPECT_FALSE(l29.get<void>("_ZN2nn5Model19validate_and_infer_shapesEv"));
}

TEST(NnapiDriverLevels, OpsAndTypesAboveTheLevelAreBadData) {
  Library l27(NN_NNAPI_DRIVER_DIR "/fl27/libneuralnetworks.so"), l29(NN_NNAPI_DRIVER_DIR "/fl29/libneuralnetworks.so");
  ASSERT_TRUE(l27.handle && l29.handle);
  // HARD_SWISH (level 30) and a QUANT8_ASYMM_SIGNED operand (30): refused at 29.
  EXPECT_EQ(add_operation_in(l29, kHardSwish, -1, 0), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(add_operation_in(l29, 0, kQuant8Signed, 0), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(add_operation_in(l29, 0, kBool, 0), ANEURALNETWORKS_NO_ERROR);
  // SOFTMAX with an axis (29) refused at 27, without it accepted; BOOL operands are 29.
  EXPECT_EQ(add_operation_in(l27, kSoftmax, -1, 2), ANEURALNETWORKS_BAD_DATA);
  EXPECT_EQ(add_operation_in(l27, kSoftmax, -1, 1), ANEURALNETWORKS_NO_ERROR);
  EXPECT_EQ(add_operation_in(l27, 0, kBool, 0), ANEURALNETWORKS_BAD_DATA);
  // And level 30 takes HARD_SWISH.
  std::vector<uint32_t> d{1, 4};
  ModelPtr m;
  ANeuralNetworksOperandType t = tensor(d);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &t), 0);
  ASSERT_EQ(ANeuralNetworksModel_addOperand(m, &t), 0);
  uint32_t in = 0, out = 1;
  EXPECT_EQ(ANeuralNetworksModel_addOperation(m, kHardSwish, 1, &in, 1, &out), 0);
}

}  // namespace
