// Where Winograd pays: NativeWinograd (F(4x4, 3x3) and F(2x2, 3x3)) against NativeConv's
// implicit GEMM on dense 3x3 stride-1 SAME convs, per shape, at 1 and 2 threads; the two
// run alternately and each keeps its fastest run. One JSON line per shape and thread count
// (speedup > 1: Winograd faster), and whether winograd_pays picks it.
//   nnwinograd [--threads 1,2] [--avx2] [--max-gflop 1.5] [--sizes 7,14,28,56] [--channels 16,32,...]
#include <pthreadpool.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "delegates/cpu/native_winograd.h"

namespace {

std::vector<uint32_t> parse_list(const std::string& s) {
  std::vector<uint32_t> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(uint32_t(std::stoul(item)));
  return v;
}

double seconds_of(const nn::cpu::NativeOp& op, nn::cpu::NativeArgs args) {
  const auto t0 = std::chrono::steady_clock::now();
  op.run(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NativeWinograd vs NativeConv per 3x3 conv shape"};
  std::string threads_arg = "1,2", sizes_arg = "7,14,28,56,112", channels_arg = "16,32,64,128,256,512";
  bool avx2 = false;
  double max_gflop = 1.5, budget_ms = 60;
  app.add_option("--threads", threads_arg, "thread counts");
  app.add_option("--sizes", sizes_arg, "square output sizes");
  app.add_option("--channels", channels_arg, "input and output channel counts (every pair)");
  app.add_option("--max-gflop", max_gflop, "skip shapes with more direct-conv GFLOP per run");
  app.add_option("--budget-ms", budget_ms, "time per kernel per shape");
  app.add_flag("--avx2", avx2, "the AVX2 kernels (as NN_NO_AVX512=1)");
  CLI11_PARSE(app, argc, argv);
  const nn::cpu::NativeIsa isa = nn::cpu::NativeIsa::with(!avx2, -1, true);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (uint32_t threads : parse_list(threads_arg)) {
    pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
    for (uint32_t size : parse_list(sizes_arg))
      for (uint32_t in_c : parse_list(channels_arg))
        for (uint32_t out_c : parse_list(channels_arg)) {
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
          const nn::cpu::NativeConv direct(s, filter.data(), bias.data(), relu, isa);
          const nn::cpu::NativeWinograd f4(s, filter.data(), bias.data(), relu, threads, 4, isa);
          const nn::cpu::NativeWinograd f2(s, filter.data(), bias.data(), relu, threads, 2, isa);
          const nn::cpu::NativeOp* ops[] = {&direct, &f4, &f2};
          std::vector<std::vector<float>> scratch;
          for (const auto* op : ops) scratch.emplace_back(op->scratch_bytes() / sizeof(float) + 16);
          double best[3] = {1e9, 1e9, 1e9}, spent = 0;
          for (int round = 0; round < 200 && (round < 3 || spent < budget_ms * 3e-3); ++round)
            for (int k = 0; k < 3; ++k) {
              nn::cpu::NativeArgs a;
              a.input = in.data(), a.output = out.data(), a.scratch = scratch[k].data(), a.pool = pool;
              const double t = seconds_of(*ops[k], a);
              best[k] = std::min(best[k], t), spent += t;
            }
          std::printf(
              "{\"threads\": %u, \"size\": %u, \"in_c\": %u, \"out_c\": %u, \"direct_ms\": %.4f, \"f4_ms\": "
              "%.4f, "
              "\"f2_ms\": %.4f, \"f4_speedup\": %.3f, \"f2_speedup\": %.3f, \"pays\": %s}\n",
              threads, size, in_c, out_c, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[0] / best[1],
              best[0] / best[2], nn::cpu::winograd_pays(s, int(threads)) ? "true" : "false");
          std::fflush(stdout);
        }
    if (pool) pthreadpool_destroy(pool);
  }
  return 0;
}
