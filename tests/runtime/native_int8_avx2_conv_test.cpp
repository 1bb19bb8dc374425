// The native int8 convs' AVX2 forms (CpuOptions::avx512 off, so they run on AVX-512 hosts
// too) against the reference kernels, byte for byte under NNAPI's requantization: the narrow
// window convs read directly from int16 window rows (CpuOptions::native_int8_direct_windows)
// and the 2x2/2 transpose conv to one channel (a segmentation head) in its four-column form.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "int8_test_util.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace nn {
namespace {

using T = OperationType;
using nn_test::q8;
using nn_test::run;

// The plain AVX2 forms (vpmaddubsw / vpmaddwd; AVX-VNNI keeps its own conv path).
CpuOptions avx2_options(bool fp32) {
  CpuOptions cpu;
  cpu.int8_fp32_requant = fp32;
  cpu.avx512 = false;
  cpu.avx_vnni = false;
  return cpu;
}

// A CONV_2D (kernel x kernel, SAME, stride, dilation) or a TRANSPOSE_CONV_2D 2x2/2 (VALID) with
// per-channel weights: random in [-127, 127], or every `force` one -128 where force > 0.
std::shared_ptr<Model> conv_model(T type, Dims in_dims, uint32_t out_c, int32_t fuse, uint32_t seed,
                                  uint32_t kernel = 2, uint32_t stride = 2, uint32_t dilation = 1,
                                  size_t force = 0, const std::vector<int8_t>& weights = {}) {
  const uint32_t in_c = in_dims[3];
  auto m = std::make_shared<Model>();
  const float in_scale = 0.05f;
  const uint32_t x = m->add_operand(q8(in_dims, in_scale, -17, Lifetime::MODEL_INPUT));
  std::mt19937 rng(seed);
  std::vector<int32_t> bias(out_c);  // first: the same for the same seed and out_c
  for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 20001) - 10000;
  std::vector<int8_t> w(size_t(out_c) * kernel * kernel * in_c);
  for (int8_t& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  if (force)
    for (size_t i = 0; i < w.size(); i += force) w[i] = -128;
  if (!weights.empty()) w = weights;
  const uint32_t f = m->add_constant(OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL,
                                     {out_c, kernel, kernel, in_c}, w.data(), w.size());
  m->operands[f].channel_quant.channel_dim = 0;
  for (uint32_t o = 0; o < out_c; ++o)
    m->operands[f].channel_quant.scales.push_back(0.002f * (1.f + 0.37f * float(o % 7)));
  const uint32_t b = m->add_constant_i32({out_c}, bias);
  m->operands[b].scale = 0.f;
  const Dims out_dims = type == T::CONV_2D ? Dims{in_dims[0], (in_dims[1] + stride - 1) / stride,
                                                  (in_dims[2] + stride - 1) / stride, out_c}
                                           : Dims{in_dims[0], in_dims[1] * 2, in_dims[2] * 2, out_c};
  const uint32_t y = m->add_operand(q8(out_dims, 0.11f, 5, Lifetime::MODEL_OUTPUT));
  if (type == T::CONV_2D)
    m->add_operation(T::CONV_2D,
                     {x, f, b, m->add_scalar_i32(1), m->add_scalar_i32(int32_t(stride)),
                      m->add_scalar_i32(int32_t(stride)), m->add_scalar_i32(fuse), m->add_scalar_bool(false),
                      m->add_scalar_i32(int32_t(dilation)), m->add_scalar_i32(int32_t(dilation))},
                     {y});
  else
    m->add_operation(
        T::TRANSPOSE_CONV_2D,
        {x, f, b,
         m->add_constant_i32({4}, std::vector<int32_t>{int32_t(out_dims[0]), int32_t(out_dims[1]),
                                                       int32_t(out_dims[2]), int32_t(out_dims[3])}),
         m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(fuse),
         m->add_scalar_bool(false)},
        {y});
  m->inputs = {x};
  m->outputs = {y};
  return m;
}

// Random int8 values, or (ends) -128 and 127 runs with a few others: the int16 products'
// extremes.
std::vector<std::vector<int8_t>> input(size_t bytes, bool ends, uint32_t seed) {
  std::vector<std::vector<int8_t>> x(1, std::vector<int8_t>(bytes));
  std::mt19937 rng(seed);
  const int8_t end_values[] = {-128, -128, 127, -127, 0, -128};
  for (size_t i = 0; i < bytes; ++i)
    x[0][i] = ends ? end_values[(i / 7 + i % 5 + seed) % 6] : int8_t(int(rng() % 256) - 128);
  return x;
}

size_t bytes_differing(const std::vector<int8_t>& a, const std::vector<int8_t>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  return differ;
}

// Narrow windows (kernel_w * in_c <= 28 int16 values a tap row) on AVX2 read their taps from
// int16 window rows: RGB stems and in_c 1-6, kernels 3 / 5 / 7, strides 1 and 2, SAME padding
// on both sides or only past the end (even sizes at stride 2), odd widths (a pass of 4 pixels
// and single ones), batch 2, 1-3 column blocks of 8 (the last one partial), a weight -128
// (the vpmaddwd GEMM), inputs at both ends of int8 and random ones, 1 and 2 threads: the
// reference's bytes; in fp32 requantization the gathered rows' bytes. Wider rows and dilated
// columns keep the gathered rows.
TEST(NativeInt8AvxTwoConv, NarrowWindowsDirectAndGatheredEqualTheReference) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  struct Shape {
    uint32_t in_c, kernel, stride, width, out_c, dilation;
    size_t force;  // every force-th weight -128 (0: none)
  };
  const Shape shapes[] = {{3, 3, 2, 25, 16, 1, 0}, {3, 3, 2, 24, 32, 1, 0}, {3, 3, 1, 13, 40, 1, 0},
                          {3, 3, 2, 21, 8, 1, 0},  {3, 3, 2, 19, 24, 1, 5}, {4, 3, 2, 19, 16, 1, 0},
                          {1, 3, 2, 20, 16, 1, 0}, {2, 3, 1, 11, 20, 1, 0}, {5, 3, 2, 17, 32, 1, 0},
                          {3, 5, 2, 21, 16, 1, 0}, {2, 7, 2, 23, 48, 1, 0}, {3, 7, 2, 18, 12, 1, 0},
                          {4, 7, 1, 9, 16, 1, 0},  {1, 5, 1, 9, 8, 1, 0},   {6, 3, 2, 17, 16, 1, 0},
                          {6, 5, 2, 13, 16, 1, 0}, {3, 3, 1, 15, 16, 2, 0}};
  uint32_t seed = 1200;
  for (const Shape& sh : shapes)
    for (bool ends : {false, true}) {
      const int32_t fuse = seed % 3 == 0 ? 3 : seed % 3 == 1 ? 1 : 0;  // RELU6, RELU, none
      auto m = conv_model(T::CONV_2D, {2, 15, sh.width, sh.in_c}, sh.out_c, fuse, seed++, sh.kernel,
                          sh.stride, sh.dilation, sh.force);
      ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
      const auto x = input(size_t(2) * 15 * sh.width * sh.in_c, ends, seed);
      const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
      const bool narrow = sh.kernel * sh.in_c <= 28 && sh.dilation == 1;
      const std::string shape = std::to_string(sh.in_c) + "->" + std::to_string(sh.out_c) + " " +
                                std::to_string(sh.kernel) + "x" + std::to_string(sh.kernel) + "/" +
                                std::to_string(sh.stride) + " width " + std::to_string(sh.width) +
                                (sh.dilation > 1 ? " dilated" : "") + (sh.force ? " weight -128" : "") +
                                (ends ? " ends" : " random");
      for (bool fp32 : {false, true}) {
        std::vector<int8_t> gathered_fp32;
        for (bool direct : {false, true})
          for (int threads : {1, 2}) {
            CpuOptions cpu = avx2_options(fp32);
            cpu.native_int8_direct_windows = direct;
            std::string kernel;
            const std::vector<int8_t> got = run(m, x, "cpu", cpu, threads, &kernel);
            const std::string name = shape + (direct ? ", direct" : ", gathered") +
                                     (fp32 ? ", fp32, " : ", ") + std::to_string(threads) + " threads";
            // a weight -128 takes the vpmaddwd GEMM ("AVX2" alone)
            EXPECT_EQ(kernel.rfind("native int8 conv AVX2", 0), 0u) << name << ": " << kernel;
            EXPECT_EQ(kernel.find("vpmaddubsw") == std::string::npos, sh.force != 0)
                << name << ": " << kernel;
            EXPECT_EQ(kernel.find(", direct windows") != std::string::npos, direct && narrow)
                << name << ": " << kernel;
            if (!fp32) {
              const size_t differ = bytes_differing(got, expected);
              EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << got.size() << " bytes differ";
            } else if (!direct) {
              gathered_fp32 = got;
            } else {
              EXPECT_EQ(got, gathered_fp32) << name << ": the direct form differs from the gathered rows";
            }
          }
      }
    }
}

// The 2x2/2 transpose conv to one channel on AVX2: 2 pixels x 4 columns a vector when
// in_c % 8 == 0 (16-byte steps and an 8-byte last one), else the GEMM's rows scattered. Odd
// widths (passes of 4 pixels and a short last one), batch 2, a weight -128, inputs at both
// ends of int8, 1 and 2 threads: the reference's bytes.
TEST(NativeInt8AvxTwoConv, SegmentationHeadDeconvEqualsTheReference) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 1700;
  for (uint32_t in_c : {8u, 16u, 24u, 32u, 12u})
    for (uint32_t width : {1u, 3u, 6u, 13u})
      for (bool ends : {false, true}) {
        const size_t force = seed % 4 == 0 ? 7 : 0;
        auto m = conv_model(T::TRANSPOSE_CONV_2D, {2, 3, width, in_c}, 1, seed % 3 == 0 ? 1 : 0, seed, 2, 2,
                            1, force);
        ++seed;
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        const auto x = input(size_t(2) * 3 * width * in_c, ends, seed);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        const bool four = in_c % 8 == 0;
        const std::string name = std::to_string(in_c) + "->1 width " + std::to_string(width) +
                                 (force ? " weight -128" : "") + (ends ? " ends" : " random");
        for (int threads : {1, 2}) {
          std::string kernel;
          const std::vector<int8_t> got = run(m, x, "cpu", avx2_options(false), threads, &kernel);
          EXPECT_EQ(kernel.rfind("native int8 deconv AVX2", 0), 0u) << name << ": " << kernel;
          EXPECT_EQ(kernel.find(", four columns") != std::string::npos, four) << name << ": " << kernel;
          const size_t differ = bytes_differing(got, expected);
          EXPECT_EQ(differ, 0u) << name << ", " << threads << " threads: " << differ << " of " << got.size()
                                << " bytes differ";
        }
      }
}

// In fp32 requantization the four-column form gives the bytes of the GEMM rows it replaces: the
// same head on in_c 8, and on in_c 12 whose last 4 channels have zero weights (the GEMM's form,
// the same accumulators and per-column constants).
TEST(NativeInt8AvxTwoConv, SegmentationHeadDeconvInFp32EqualsTheGemmRows) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  for (uint32_t width : {5u, 8u})
    for (bool ends : {false, true}) {
      std::mt19937 rng(width);
      std::vector<int8_t> w8(4 * 8), w12(4 * 12, 0);
      for (size_t i = 0; i < w8.size(); ++i) {
        w8[i] = int8_t(int(rng() % 256) - 128);
        w12[i / 8 * 12 + i % 8] = w8[i];
      }
      auto m8 = conv_model(T::TRANSPOSE_CONV_2D, {2, 3, width, 8}, 1, 0, 77, 2, 2, 1, 0, w8);
      auto m12 = conv_model(T::TRANSPOSE_CONV_2D, {2, 3, width, 12}, 1, 0, 77, 2, 2, 1, 0, w12);
      ASSERT_TRUE(m8->validate_and_infer_shapes().is_ok());
      ASSERT_TRUE(m12->validate_and_infer_shapes().is_ok());
      const auto x8 = input(size_t(2) * 3 * width * 8, ends, width);
      std::vector<std::vector<int8_t>> x12(1, std::vector<int8_t>(size_t(2) * 3 * width * 12, 99));
      for (size_t i = 0; i < x8[0].size(); ++i) x12[0][i / 8 * 12 + i % 8] = x8[0][i];
      const std::string name = "width " + std::to_string(width) + (ends ? " ends" : " random");
      std::string four, rows;
      const std::vector<int8_t> got = run(m8, x8, "cpu", avx2_options(true), 1, &four);
      const std::vector<int8_t> want = run(m12, x12, "cpu", avx2_options(true), 1, &rows);
      EXPECT_NE(four.find(", four columns"), std::string::npos) << name << ": " << four;
      EXPECT_EQ(rows.find(", four columns"), std::string::npos) << name << ": " << rows;
      EXPECT_NE(four.find(", fp32 requant"), std::string::npos) << name << ": " << four;
      EXPECT_EQ(got, want) << name << ": " << four << " / " << rows;
    }
}

// The 1x1 convs on the AVX2 GEMM (column blocks outside, rows inside; |x| made once where the
// columns are more than 16; 16 columns packed into one store; a narrower activation range
// clamped, int8's by the saturating packs): the
// reference's bytes under NNAPI's requantization, and in fp32 requantization the AVX-512 VNNI
// GEMM's bytes where the CPU has it (the same accumulators and the same fused multiply-add).
// k a multiple of 4 (read in place) or not (copied), 1-12 column blocks (the last one partial),
// pixel counts not a multiple of the 4-row tile, RELU / RELU6 / none, 1 and 2 threads.
TEST(NativeInt8AvxTwoConv, PointwiseConvsEqualTheReferenceAndTheAvx512Bytes) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 2100;
  for (uint32_t in_c : {4u, 13u, 16u, 32u})
    for (uint32_t out_c : {8u, 13u, 16u, 24u, 40u, 96u})
      for (bool ends : {false, true}) {
        const int32_t fuse = seed % 3 == 0 ? 3 : seed % 3 == 1 ? 1 : 0;  // RELU6, RELU, none
        auto m = conv_model(T::CONV_2D, {1, 7, 11, in_c}, out_c, fuse, seed, 1, 1);
        ++seed;
        ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
        const auto x = input(size_t(7) * 11 * in_c, ends, seed);
        const std::vector<int8_t> expected = run(m, x, "reference", {}, 1, nullptr);
        const std::string name = std::to_string(in_c) + "->" + std::to_string(out_c) + " fuse " +
                                 std::to_string(fuse) + (ends ? " ends" : " random");
        for (int threads : {1, 2}) {
          std::string kernel;
          const std::vector<int8_t> got = run(m, x, "cpu", avx2_options(false), threads, &kernel);
          EXPECT_EQ(kernel, "native int8 conv 1x1 AVX2 vpmaddubsw") << name;
          const size_t differ = bytes_differing(got, expected);
          EXPECT_EQ(differ, 0u) << name << ", " << threads << " threads: " << differ << " of " << got.size()
                                << " bytes differ";
          if (!nn_test::has_avx512_vnni()) continue;
          std::string avx2_kernel, vnni_kernel;
          const std::vector<int8_t> avx2 = run(m, x, "cpu", avx2_options(true), threads, &avx2_kernel);
          CpuOptions vnni;
          vnni.amx = false;
          const std::vector<int8_t> wide = run(m, x, "cpu", vnni, threads, &vnni_kernel);
          EXPECT_EQ(vnni_kernel.rfind("native int8 conv 1x1 AVX-512 VNNI, fp32 requant", 0), 0u)
              << vnni_kernel;
          EXPECT_EQ(avx2, wide) << name << ", fp32 (" << avx2_kernel << " / " << vnni_kernel << ")";
        }
      }
}

// The 3x3 stride-1 depthwise conv on AVX2 takes output rows two at a time (the four input rows
// a pair reads interleaved once): the reference's bytes under NNAPI's requantization, and in
// fp32 requantization the AVX-512 VNNI form's bytes where the CPU has it. Heights even and odd
// (the last row alone), SAME padding top and bottom, widths 1-9, 1-24 channels (partial
// blocks of 8), batch 2, inputs at both ends of int8, 1 and 2 threads; stride 2 (single rows)
// beside them.
TEST(NativeInt8AvxTwoConv, DepthwiseRowPairsEqualTheReferenceAndTheAvx512Bytes) {
  if (!nn_test::has_avx2()) GTEST_SKIP() << "no AVX2";
  uint32_t seed = 3100;
  for (uint32_t c : {1u, 8u, 13u, 24u})
    for (uint32_t h : {2u, 3u, 8u})
      for (uint32_t stride : {1u, 2u})
        for (bool ends : {false, true}) {
          const uint32_t wd = 1 + (seed * 4) % 9;
          auto m = std::make_shared<Model>();
          const uint32_t x = m->add_operand(q8({2, h, wd, c}, 0.05f, -17, Lifetime::MODEL_INPUT));
          const int32_t fuse = seed % 3 == 0 ? 3 : seed % 3 == 1 ? 1 : 0;
          const uint32_t y =
              nn_test::int8_conv(*m, x, T::DEPTHWISE_CONV_2D, c, 3, stride, fuse, seed, 0.11f, 5);
          m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
          m->inputs = {x};
          m->outputs = {y};
          ++seed;
          ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
          const auto in = input(size_t(2) * h * wd * c, ends, seed);
          const std::vector<int8_t> expected = run(m, in, "reference", {}, 1, nullptr);
          const std::string name = "x" + std::to_string(c) + " " + std::to_string(h) + "x" +
                                   std::to_string(wd) + " stride " + std::to_string(stride) +
                                   (ends ? " ends" : " random");
          for (int threads : {1, 2}) {
            std::string kernel;
            const std::vector<int8_t> got = run(m, in, "cpu", avx2_options(false), threads, &kernel);
            EXPECT_EQ(kernel, "native int8 depthwise AVX2 vpmaddubsw") << name;
            const size_t differ = bytes_differing(got, expected);
            EXPECT_EQ(differ, 0u) << name << ", " << threads << " threads: " << differ << " of " << got.size()
                                  << " bytes differ";
            if (!nn_test::has_avx512_vnni() || !nn_test::has_avx512_vbmi()) continue;
            std::string avx2_kernel, vnni_kernel;
            const std::vector<int8_t> avx2 = run(m, in, "cpu", avx2_options(true), threads, &avx2_kernel);
            const std::vector<int8_t> wide = run(m, in, "cpu", CpuOptions{}, threads, &vnni_kernel);
            EXPECT_EQ(vnni_kernel, "native int8 depthwise AVX-512 VNNI, fp32 requant") << name;
            EXPECT_EQ(avx2, wide) << name << ", fp32 (" << avx2_kernel << " / " << vnni_kernel << ")";
          }
        }
}

}  // namespace
}  // namespace nn
