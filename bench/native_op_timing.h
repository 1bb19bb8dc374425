// Shared by the per-shape kernel benchmarks (nnwinograd, nndotconv, nnconv): comma lists of
// numbers on the command line, and one timed run of a native op.
#pragma once

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "delegates/cpu/native_kernels.h"

namespace nn_bench {

// "7,14,28" -> {7, 14, 28} (or another separator: "256x8x1" with 'x').
inline std::vector<uint32_t> parse_list(const std::string& s, char sep = ',') {
  std::vector<uint32_t> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) v.push_back(uint32_t(std::stoul(item)));
  return v;
}

// Wall time of one run of `op` in seconds.
inline double seconds_of(const nn::cpu::NativeOp& op, const nn::cpu::NativeArgs& args) {
  const auto t0 = std::chrono::steady_clock::now();
  op.run(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nn_bench
