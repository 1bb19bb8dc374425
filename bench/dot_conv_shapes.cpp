// Where NativeDotConv pays: it against NativeConv's GEMM on dense convs of few output
// channels, per shape (SIZExIN_CxOUT_CxKERNEL, stride 1, SAME), at each thread count; the
// two run alternately and each keeps its fastest run. One JSON line per shape and thread
// count (speedup > 1: the dot conv faster), and whether NativeDotConv::supports takes it.
//   nndotconv [--threads 1,2] [--avx2] --shapes 256x8x1x3,256x8x2x3,...
#include <pthreadpool.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "delegates/cpu/native_dot_conv.h"
#include "native_op_timing.h"

using nn_bench::parse_list;
using nn_bench::seconds_of;

int main(int argc, char** argv) {
  CLI::App app{"NativeDotConv vs NativeConv per conv shape"};
  std::string threads_arg = "1,2";
  std::string shapes_arg = "256x8x1x3,256x8x2x3,256x8x3x3,256x8x4x3,256x8x6x3,256x8x8x3,128x16x1x3,128x16x4x3,64x32x1x3,64x32x4x3,256x3x1x3";
  bool avx2 = false;
  double budget_ms = 200;
  app.add_option("--threads", threads_arg, "thread counts");
  app.add_option("--shapes", shapes_arg, "SIZExIN_CxOUT_CxKERNEL,... (square maps, SAME padding)");
  app.add_option("--budget-ms", budget_ms, "time per kernel per shape");
  app.add_flag("--avx2", avx2, "the AVX2 kernels (as NN_NO_AVX512=1)");
  CLI11_PARSE(app, argc, argv);
  const nn::cpu::NativeIsa isa = nn::cpu::NativeIsa::with(!avx2, -1, true);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (uint32_t threads : parse_list(threads_arg, ',')) {
    pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
    std::stringstream shapes(shapes_arg);
    for (std::string item; std::getline(shapes, item, ',');) {
      const std::vector<uint32_t> v = parse_list(item, 'x');
      if (v.size() != 4) {
        std::fprintf(stderr, "--shapes: SIZExIN_CxOUT_CxKERNEL, not %s\n", item.c_str());
        return 2;
      }
      nn::cpu::NativeConvShape s;
      s.in_h = s.in_w = s.out_h = s.out_w = v[0];
      s.in_c = v[1], s.out_c = v[2], s.kernel_h = s.kernel_w = v[3], s.pad_top = s.pad_left = v[3] / 2;
      std::vector<float> in(size_t(v[0]) * v[0] * s.in_c), filter(size_t(s.out_c) * v[3] * v[3] * s.in_c),
          bias(s.out_c), out(size_t(v[0]) * v[0] * s.out_c);
      for (float& x : in) x = uni(rng);
      for (float& x : filter) x = uni(rng) * 0.1f;
      for (float& x : bias) x = uni(rng);
      const nn::cpu::Epilogue none;
      const bool takes = nn::cpu::NativeDotConv::supports(s, none, isa);
      std::unique_ptr<nn::cpu::NativeOp> ops[2] = {
          std::make_unique<nn::cpu::NativeConv>(s, filter.data(), bias.data(), none, isa),
          std::make_unique<nn::cpu::NativeDotConv>(s, filter.data(), bias.data(), none, isa)};
      std::vector<std::vector<float>> scratch;
      for (const auto& op : ops) scratch.emplace_back(op->scratch_bytes() / sizeof(float) + 16);
      double best[2] = {1e9, 1e9}, spent = 0;
      for (int round = 0; round < 1000 && (round < 5 || spent < budget_ms * 2e-3); ++round)
        for (int k = 0; k < 2; ++k) {
          nn::cpu::NativeArgs a;
          a.input = in.data(), a.output = out.data(), a.scratch = scratch[k].data(), a.pool = pool;
          const double t = seconds_of(*ops[k], a);
          best[k] = std::min(best[k], t), spent += t;
        }
      std::printf(
          "{\"isa\": \"%s\", \"threads\": %u, \"size\": %u, \"in_c\": %u, \"out_c\": %u, \"kernel\": %u, "
          "\"gemm_ms\": %.4f, \"dot_ms\": %.4f, \"speedup\": %.2f, \"supports\": %s}\n",
          avx2 ? "avx2" : "avx512", threads, v[0], s.in_c, s.out_c, v[3], best[0] * 1e3, best[1] * 1e3,
          best[0] / best[1], takes ? "true" : "false");
      std::fflush(stdout);
    }
    if (pool) pthreadpool_destroy(pool);
  }
  return 0;
}
