// One NativeConv shape timed alone: its fastest run of several (ms and GFLOP/s), at 1 or
// more threads. Where the native conv's time goes on a shape, by experiment (env switches).
//   nnconv --shape 32x1024x2048 [--kernel 1] [--stride 1] [--threads 1] [--runs 20] [--avx2]
//          [--no-serial-row-tiles]
#include <pthreadpool.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"
#include "native_op_timing.h"

int main(int argc, char** argv) {
  CLI::App app{"one NativeConv shape timed"};
  std::string shape = "32x1024x2048";
  unsigned threads = 1, kernel = 1, stride = 1;
  int runs = 20;
  bool avx2 = false, no_row_tiles = false;
  app.add_option("--shape", shape, "SIZExIN_CxOUT_C (square input)");
  app.add_option("--kernel", kernel, "square kernel size (SAME padding)");
  app.add_option("--stride", stride, "stride");
  app.add_option("--threads", threads, "threads");
  app.add_option("--runs", runs, "runs (the fastest is kept)");
  app.add_flag("--avx2", avx2, "the AVX2 kernels (as NN_NO_AVX512=1)");
  app.add_flag("--no-serial-row-tiles", no_row_tiles, "as NN_NO_SERIAL_ROW_TILES=1");
  CLI11_PARSE(app, argc, argv);
  unsigned size = 0, in_c = 0, out_c = 0;
  if (std::sscanf(shape.c_str(), "%ux%ux%u", &size, &in_c, &out_c) != 3) return 2;
  nn::cpu::NativeIsa isa = nn::cpu::NativeIsa::with(!avx2, -1, true);
  isa.serial_row_tiles = !no_row_tiles;
  nn::cpu::NativeConvShape s;
  s.in_h = s.in_w = size;
  s.out_h = s.out_w = (size + stride - 1) / stride;
  s.in_c = in_c, s.out_c = out_c, s.kernel_h = s.kernel_w = kernel, s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = kernel / 2;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<float> in(size_t(size) * size * in_c), filter(size_t(out_c) * kernel * kernel * in_c), bias(out_c),
      out(size_t(s.out_h) * s.out_w * out_c);
  for (float& v : in) v = uni(rng);
  for (float& v : filter) v = uni(rng) * 0.1f;
  for (float& v : bias) v = uni(rng);
  nn::cpu::Epilogue relu;
  relu.lo = 0.f;
  nn::cpu::NativeConv conv(s, filter.data(), bias.data(), relu, isa);
  std::vector<float> scratch(conv.scratch_bytes() / sizeof(float) + 16);
  pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
  double best = 1e9;
  for (int r = 0; r < runs; ++r) {
    nn::cpu::NativeArgs a;
    a.input = in.data(), a.output = out.data(), a.scratch = scratch.data(), a.pool = pool;
    best = std::min(best, nn_bench::seconds_of(conv, a));
  }
  double sum = 0;
  for (float v : out) sum += v;
  const double gflop = 2.0 * s.out_h * s.out_w * out_c * in_c * kernel * kernel * 1e-9;
  std::printf("%s k%u s%u threads %u: %.3f ms, %.1f GFLOP/s (checksum %.6g)\n", shape.c_str(), kernel, stride,
              threads, best * 1e3, gflop / best, sum);
  if (pool) pthreadpool_destroy(pool);
  return 0;
}
