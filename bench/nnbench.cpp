// nnbench: nnpipe's engine benchmark. For each model x threads x delegate: load time
// (mmap + compile/pack), then median/p90/p99 latency after warm-up. Prints a table, or
// JSON with --json (bench/run.py reads it).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "model_flops.h"
#include "nn/import/import.h"
#include "nn/percentile.h"
#include "nn/runtime/session.h"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnbench: engine latency per model x threads x delegate (medians after warm-up).\n"
               "Example: nnbench assets/models/*.nnapi --threads 1,2 --delegates cpu --runs 100"};
  std::vector<std::string> models;
  std::vector<int> threads = {1, 2};
  std::vector<std::string> delegates = {"cpu"};
  int runs = 100, warmup = 20, min_ms = 0;
  bool json = false;
  app.add_option("models", models, "model files (.nnapi preferred: load time then means mmap + pack)")->required();
  app.add_option("--threads", threads, "thread counts")->delimiter(',');
  app.add_option("--delegates", delegates, "delegates (cpu, reference, vulkan, nnapi, auto)")->delimiter(',');
  app.add_option("--runs", runs, "timed runs")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs first")->check(CLI::Range(0, 100000));
  app.add_option("--min-time-ms", min_ms, "keep running past --runs until this much time is spent");
  app.add_flag("--json", json, "print JSON");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json results = nlohmann::json::array();
  int failures = 0;
  for (const std::string& path : models) {
    for (const std::string& delegate : delegates) {
      for (int t : threads) {
        auto t0 = std::chrono::steady_clock::now();
        auto model = nn::load_model(path);
        double load_ms = ms_since(t0);
        if (!model) {
          std::fprintf(stderr, "nnbench: %s: %s\n", path.c_str(), model.status().to_string().c_str());
          ++failures;
          continue;
        }
        nn::SessionOptions options;
        options.cpu = nn::CpuOptions::from_environment();
        options.delegates = {delegate};
        options.threads = t;
        auto t1 = std::chrono::steady_clock::now();
        auto session = nn::Session::open(*model, options);
        double open_ms = ms_since(t1);
        if (!session) {
          std::fprintf(stderr, "nnbench: %s on %s: %s\n", path.c_str(), delegate.c_str(),
                       session.status().to_string().c_str());
          ++failures;
          continue;
        }
        nn::Session& s = **session;
        for (size_t i = 0; i < s.num_inputs(); ++i) {
          const nn::Operand& d = s.input_desc(i);
          if (d.type == nn::OperandType::TENSOR_FLOAT32) {
            float* p = s.input_f32(i);
            for (size_t e = 0; e < nn::num_elements(d.dims); ++e) p[e] = 0.5f + 0.5f * std::sin(0.37f * e);
          }
        }
        bool ok = true;
        for (int k = 0; k < warmup && ok; ++k) ok = s.run().is_ok();
        std::vector<double> times;
        auto start = std::chrono::steady_clock::now();
        while (ok && (static_cast<int>(times.size()) < runs || ms_since(start) < min_ms)) {
          nn::Status st = s.run();
          if (!st.is_ok()) {
            std::fprintf(stderr, "nnbench: %s: %s\n", path.c_str(), st.to_string().c_str());
            ok = false;
            break;
          }
          times.push_back(s.last_run_ms());
        }
        if (!ok) {
          ++failures;
          continue;
        }
        std::string used;
        for (const auto& p : s.report().partitions)
          if (used.find(p.delegate) == std::string::npos) used += (used.empty() ? "" : "+") + p.delegate;
        nlohmann::json r;
        r["model"] = std::filesystem::path(path).stem().string();
        r["path"] = path;
        r["delegate"] = delegate;
        r["delegates_used"] = used;
        r["partitions"] = s.report().partitions.size();
        r["threads"] = t;
        r["runs"] = times.size();
        r["median_ms"] = nn::percentile(times, 50);
        r["p90_ms"] = nn::percentile(times, 90);
        r["p99_ms"] = nn::percentile(times, 99);
        r["load_ms"] = load_ms;
        r["open_ms"] = open_ms;
        r["flops"] = nn::bench::model_flops(**model);
        results.push_back(r);
        if (!json)
          std::printf("%-36s %-9s %d thr  median %8.3f ms  p90 %8.3f  p99 %8.3f  load %6.2f ms + open %6.2f ms  %s\n",
                      r["model"].get<std::string>().c_str(), delegate.c_str(), t, r["median_ms"].get<double>(),
                      r["p90_ms"].get<double>(), r["p99_ms"].get<double>(), load_ms, open_ms, used.c_str());
      }
    }
  }
  if (json) std::printf("%s\n", results.dump(2).c_str());
  return failures ? 1 : 0;
}
