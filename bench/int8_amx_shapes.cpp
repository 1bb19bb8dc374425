// Where AMX pays: an int8 CONV_2D (SAME, random weights and input) on the CPU delegate with
// CpuOptions::amx on and off, per shape, run alternately; each keeps its fastest run (a
// session's run of the one op, the same overhead on both sides). One JSON line per shape and
// thread count (speedup > 1: AMX faster), with the kernel each side ran (AMX only where
// amx_int8_conv_pays takes the shape) and whether the rule picks AMX.
//   nnint8amx [--threads 1,2] [--sizes 4,6,7,8,14] [--kernel 1] [--pairs 160:960,960:160]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "delegates/cpu/native_int8.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(item);
  return v;
}

nn::Operand q8(nn::Dims d, float scale, int32_t zp, nn::Lifetime life) {
  nn::Operand o;
  o.type = nn::OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
  o.dims = std::move(d);
  o.scale = scale;
  o.zero_point = zp;
  o.lifetime = life;
  return o;
}

// size x size x in_c -> out_c, kernel x kernel, stride 1, SAME, per-channel weights, RELU6.
std::shared_ptr<nn::Model> conv_model(uint32_t size, uint32_t in_c, uint32_t out_c, uint32_t kernel) {
  auto m = std::make_shared<nn::Model>();
  std::mt19937 rng(size * 7919 + in_c * 31 + out_c);
  const float in_scale = 0.04f;
  const uint32_t x = m->add_operand(q8({1, size, size, in_c}, in_scale, -3, nn::Lifetime::MODEL_INPUT));
  std::vector<int8_t> w(size_t(out_c) * kernel * kernel * in_c);
  for (int8_t& v : w) v = int8_t(int(rng() % 255) - 127);
  const uint32_t f = m->add_constant(nn::OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL,
                                     {out_c, kernel, kernel, in_c}, w.data(), w.size());
  m->operands[f].channel_quant.channel_dim = 0;
  m->operands[f].channel_quant.scales.assign(out_c, 0.002f);
  std::vector<int32_t> bias(out_c);
  for (int32_t& v : bias) v = int32_t(rng() % 2001) - 1000;
  const uint32_t b = m->add_constant_i32({out_c}, bias);
  m->operands[b].scale = 0.f;
  const uint32_t y = m->add_operand(q8({1, size, size, out_c}, 0.05f, -128, nn::Lifetime::MODEL_OUTPUT));
  m->add_operation(
      nn::OperationType::CONV_2D,
      {x, f, b, m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(3)}, {y});
  m->inputs = {x};
  m->outputs = {y};
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"int8 CONV_2D on AMX vs the AVX-512 VNNI GEMM per shape (amx_int8_conv_pays' rule)"};
  std::string threads_arg = "1,2", sizes_arg = "4,6,7,8,14",
              pairs_arg = "160:960,960:160,960:320,320:1280,64:64";
  uint32_t kernel = 1;
  double budget_ms = 100;
  app.add_option("--threads", threads_arg, "thread counts");
  app.add_option("--sizes", sizes_arg, "square output sizes (rows = size * size)");
  app.add_option("--pairs", pairs_arg, "in_c:out_c pairs");
  app.add_option("--kernel", kernel, "square kernel size (1: the 1x1 GEMM; else gathered windows)");
  app.add_option("--budget-ms", budget_ms, "time per side per shape");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& t : split(threads_arg))
    for (const std::string& sz : split(sizes_arg))
      for (const std::string& pair : split(pairs_arg)) {
        const int threads = std::stoi(t);
        const uint32_t size = uint32_t(std::stoul(sz));
        const uint32_t in_c = uint32_t(std::stoul(pair.substr(0, pair.find(':'))));
        const uint32_t out_c = uint32_t(std::stoul(pair.substr(pair.find(':') + 1)));
        auto m = conv_model(size, in_c, out_c, kernel);
        if (!m->validate_and_infer_shapes().is_ok()) return 1;
        std::vector<std::unique_ptr<nn::Session>> sessions;
        std::string kernels[2];
        for (bool amx : {true, false}) {
          nn::SessionOptions so;
          so.delegates = {"cpu"};
          so.threads = threads;
          so.cpu.amx = amx;
          auto s = nn::Session::open(m, so);
          if (!s.is_ok()) {
            std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
            return 1;
          }
          std::vector<int8_t> x(size_t(size) * size * in_c);
          std::mt19937 rng(5);
          for (int8_t& v : x) v = int8_t(int(rng() % 256) - 128);
          if (!(*s)->set_input(0, x.data(), x.size()).is_ok()) return 1;
          kernels[sessions.size()] = (*s)->kernels().empty() ? "" : (*s)->kernels().at(0).kernel;
          sessions.push_back(std::move(*s));
        }
        double best[2] = {1e9, 1e9}, spent = 0;
        for (int round = 0; round < 20000 && (round < 5 || spent < budget_ms * 2e-3); ++round)
          for (int k = 0; k < 2; ++k) {
            const auto t0 = std::chrono::steady_clock::now();
            if (!sessions[k]->run().is_ok()) return 1;
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best[k] = std::min(best[k], dt), spent += dt;
          }
        const size_t k = size_t(kernel) * kernel * in_c, rows = size_t(size) * size;
        std::printf(
            "{\"threads\": %d, \"rows\": %zu, \"k\": %zu, \"n\": %u, \"amx_us\": %.2f, \"vnni_us\": %.2f, "
            "\"speedup\": %.3f, \"amx_kernel\": \"%s\", \"vnni_kernel\": \"%s\", \"pays\": %s}\n",
            threads, rows, k, out_c, best[0] * 1e6, best[1] * 1e6, best[1] / best[0], kernels[0].c_str(),
            kernels[1].c_str(), nn::cpu::amx_int8_conv_pays(k, out_c, rows) ? "true" : "false");
        std::fflush(stdout);
      }
  return 0;
}
