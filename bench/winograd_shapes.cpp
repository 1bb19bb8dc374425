// Where Winograd pays: NativeWinograd (F(4x4, 3x3) and F(2x2, 3x3)) against NativeConv's
// implicit GEMM on dense 3x3 stride-1 SAME convs, per shape, at 1 and 2 threads; the two
// run alternately and each keeps its fastest run. One JSON line per shape and thread count
// (speedup > 1: Winograd faster), and which kernel winograd_choice picks. --shapes names
// (size, in_c, out_c) triples instead of every pair; --copies N cycles N copies of each
// kernel (their own packed weights), so weights that outgrow L2 arrive cold, as in a model.
//   nnwinograd [--threads 1,2] [--avx2] [--max-gflop 1.5] [--sizes 7,14,28,56] [--channels 16,32,...]
//   nnwinograd --shapes 7x512x512,14x256x256 --copies 8
#include <pthreadpool.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "delegates/cpu/native_winograd.h"
#include "native_op_timing.h"

using nn_bench::parse_list;
using nn_bench::seconds_of;

int main(int argc, char** argv) {
  CLI::App app{"NativeWinograd vs NativeConv per 3x3 conv shape"};
  std::string threads_arg = "1,2", sizes_arg = "7,14,28,56,112", channels_arg = "16,32,64,128,256,512";
  std::string shapes_arg;
  int copies = 1;
  bool avx2 = false;
  double max_gflop = 1.5, budget_ms = 60;
  app.add_option("--threads", threads_arg, "thread counts");
  app.add_option("--sizes", sizes_arg, "square output sizes");
  app.add_option("--channels", channels_arg, "input and output channel counts (every pair)");
  app.add_option("--max-gflop", max_gflop, "skip shapes with more direct-conv GFLOP per run");
  app.add_option("--budget-ms", budget_ms, "time per kernel per shape");
  app.add_option("--shapes", shapes_arg, "SIZExIN_CxOUT_C,... instead of --sizes / --channels");
  app.add_option("--copies", copies, "copies of each kernel, run in turn (cold weights)")->check(CLI::Range(1, 64));
  app.add_flag("--avx2", avx2, "the AVX2 kernels (as NN_NO_AVX512=1)");
  CLI11_PARSE(app, argc, argv);
  const nn::cpu::NativeIsa isa = nn::cpu::NativeIsa::with(!avx2, -1, true);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  // (size, in_c, out_c) per shape.
  std::vector<std::array<uint32_t, 3>> shapes;
  if (!shapes_arg.empty()) {
    std::stringstream in(shapes_arg);
    for (std::string item; std::getline(in, item, ',');) {
      std::replace(item.begin(), item.end(), 'x', ',');
      const std::vector<uint32_t> v = parse_list(item);
      if (v.size() != 3) {
        std::fprintf(stderr, "--shapes: SIZExIN_CxOUT_C, not %s\n", item.c_str());
        return 2;
      }
      shapes.push_back({v[0], v[1], v[2]});
    }
  } else {
    for (uint32_t size : parse_list(sizes_arg))
      for (uint32_t in_c : parse_list(channels_arg))
        for (uint32_t out_c : parse_list(channels_arg)) shapes.push_back({size, in_c, out_c});
  }
  for (uint32_t threads : parse_list(threads_arg)) {
    pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
    for (const auto& [size, in_c, out_c] : shapes) {
      nn::cpu::NativeConvShape s;
      s.in_h = s.in_w = s.out_h = s.out_w = size;
      s.in_c = in_c, s.out_c = out_c, s.kernel_h = s.kernel_w = 3, s.pad_top = s.pad_left = 1;
      const double gflop = 2.0 * size * size * in_c * out_c * 9 * 1e-9;
      if (gflop > max_gflop) continue;
      std::vector<float> in(size_t(size) * size * in_c), filter(size_t(out_c) * 9 * in_c), bias(out_c),
          out(size_t(size) * size * out_c);
      for (float& v : in) v = uni(rng);
      for (float& v : filter) v = uni(rng) * 0.1f;
      for (float& v : bias) v = uni(rng);
      nn::cpu::Epilogue relu;
      relu.lo = 0.f;
      // ops[k][i]: kernel k (direct, F(4x4), F(2x2)), copy i.
      std::vector<std::unique_ptr<nn::cpu::NativeOp>> ops[3];
      for (int i = 0; i < copies; ++i) {
        ops[0].push_back(std::make_unique<nn::cpu::NativeConv>(s, filter.data(), bias.data(), relu, isa));
        ops[1].push_back(
            std::make_unique<nn::cpu::NativeWinograd>(s, filter.data(), bias.data(), relu, threads, 4, isa));
        ops[2].push_back(
            std::make_unique<nn::cpu::NativeWinograd>(s, filter.data(), bias.data(), relu, threads, 2, isa));
      }
      std::vector<std::vector<float>> scratch;
      for (const auto& op : ops) scratch.emplace_back(op[0]->scratch_bytes() / sizeof(float) + 16);
      double best[3] = {1e9, 1e9, 1e9}, spent = 0;
      for (int round = 0; round < 200 * copies && (round < 3 * copies || spent < budget_ms * 3e-3); ++round)
        for (int k = 0; k < 3; ++k) {
          nn::cpu::NativeArgs a;
          a.input = in.data(), a.output = out.data(), a.scratch = scratch[k].data(), a.pool = pool;
          const double t = seconds_of(*ops[k][size_t(round % copies)], a);
          best[k] = std::min(best[k], t), spent += t;
        }
      const uint32_t pick = nn::cpu::winograd_choice(s, int(threads), true, isa);
      std::printf(
          "{\"threads\": %u, \"size\": %u, \"in_c\": %u, \"out_c\": %u, \"direct_ms\": %.4f, \"f4_ms\": "
          "%.4f, \"f2_ms\": %.4f, \"f4_speedup\": %.3f, \"f2_speedup\": %.3f, \"copies\": %d, \"pick\": \"%s\"}\n",
          threads, size, in_c, out_c, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[0] / best[1],
          best[0] / best[2], copies, pick == 4 ? "F4" : pick == 2 ? "F2" : "direct");
      std::fflush(stdout);
    }
    if (pool) pthreadpool_destroy(pool);
  }
  return 0;
}
