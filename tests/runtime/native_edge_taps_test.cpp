// Native dilated stride-1 convs run the micro-tiles that cross the image's left or right
// edge, or an output row, tap by tap (CpuOptions::edge_taps): taps that read only padding
// for every pixel of the tile are skipped, taps inside read in place, the rest copied with
// zeros. Against the reference kernels with the switch on and off, on the AVX2 and AVX-512
// kernels, 1 and 2 threads: ASPP's dilation 12 on a 16x16 map, odd sizes whose tiles cross
// rows and images (batch 2), uneven dilations; grouped convs keep their im2col rows.
#include <gtest/gtest.h>

#include <string>

#include "delegates/cpu/native_kernels.h"
#include "runtime_test_util.h"
#include "test_model.h"

namespace {

using T = nn::OperationType;
using Built = nn_test::TestModel;

struct Case {
  const char* name;
  uint32_t batch, h, w, in_c, out_c, groups, dil_h, dil_w;
};

// A 3x3 conv, stride 1, padded by its dilation (output size = input size).
void build(Built& b, const Case& k) {
  uint32_t x = b.input({k.batch, k.h, k.w, k.in_c});
  uint32_t w = b.constant({k.out_c, 3, 3, k.in_c / k.groups}, 7), bias = b.constant({k.out_c}, 8);
  const int32_t ph = int32_t(k.dil_h), pw = int32_t(k.dil_w);
  if (k.groups == 1)
    b.output(b.op(T::CONV_2D, {x, w, bias, b.i32(pw), b.i32(pw), b.i32(ph), b.i32(ph), b.i32(1), b.i32(1), b.i32(1),
                               b.boolean(false), b.i32(pw), b.i32(ph)}));
  else  // GROUPED_CONV_2D has no dilation
    b.output(b.op(T::GROUPED_CONV_2D, {x, w, bias, b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(1), b.i32(1),
                                       b.i32(int32_t(k.groups)), b.i32(1), b.boolean(false)}));
}

TEST(NativeEdgeTaps, MatchTheReferenceWithTheSwitchOnAndOff) {
  if (!nn::cpu::native_conv_supported()) GTEST_SKIP() << "no AVX2";
  const Case cases[] = {
      {"ASPP dilation 12 on 16x16", 1, 16, 16, 40, 24, 1, 12, 12},
      {"dilation 5x3 on 9x11", 1, 9, 11, 13, 19, 1, 5, 3},
      {"batch 2, 7x5, dilation 2: tiles across rows and images", 2, 7, 5, 17, 33, 1, 2, 2},
      {"dilation 1x4 on 6x13", 1, 6, 13, 8, 16, 1, 1, 4},
      {"grouped, 3 groups of 8 on 7x10", 1, 7, 10, 24, 48, 3, 1, 1},
      {"grouped, 4 groups of 16 on 5x5, batch 2", 2, 5, 5, 64, 64, 4, 1, 1}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Built b;
    build(b, k);
    ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
    for (bool avx512 : {false, true}) {
      if (avx512 && !__builtin_cpu_supports("avx512f")) continue;
      SCOPED_TRACE(avx512 ? "AVX-512" : "AVX2");
      for (bool on : {true, false}) {
        nn::CpuOptions cpu;
        cpu.avx512 = avx512;
        cpu.edge_taps = on;
        const std::string kernel = nn_test::cpu_kernel_of(b.model, cpu, "op 0");
        if (k.groups > 1 && avx512)  // two groups per call there (NativeGroupedConv), no edge taps
          EXPECT_EQ(kernel, "native grouped conv AVX-512, group pairs");
        else if (k.groups > 1)
          EXPECT_EQ(kernel, "native grouped conv AVX2");
        else
          EXPECT_EQ(kernel.find(", edge taps") != std::string::npos, on) << kernel;
        for (int threads : {1, 2}) {
          nn::SessionOptions o;
          o.delegates = {"cpu"};
          o.cpu = cpu;
          o.threads = threads;
          EXPECT_LE(nn_test::compare_with_reference(b.model, o).max_rel_error, 1e-4)
              << (on ? "on, " : "off, ") << threads << " threads";
        }
      }
    }
  }
}

}  // namespace
