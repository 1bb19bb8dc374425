// nnbench_quick: median latency of one model on one delegate list, plus load time and an
// optional per-step profile. A quick harness for engine work, not the peer benchmark.
//
//   nnbench_quick assets/models/selfie_segmentation.tflite --threads 2 --runs 200
//   nnbench_quick model.onnx --delegates reference --runs 5
//   nnbench_quick model.tflite --profile   # where the time goes, per op
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.h"
#include "nn/import/import.h"
#include "nn/percentile.h"
#include "nn/runtime/session.h"

namespace {

// CPU time of the calling thread: with one thread it approximates the latency the run
// would have on an idle machine (time spent preempted by other processes is left out).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnbench_quick: median latency of a model on the nnpipe engine"};
  std::string model_path;
  std::string delegates = "cpu";
  int threads = 1, runs = 100, warmup = 10, top = 25;
  bool profile = false, explain = false;
  app.add_option("model", model_path, "model file (.nnapi, .tflite, .onnx)")->required()->check(CLI::ExistingFile);
  app.add_option("--delegates", delegates,
                 "comma-separated preference list (auto, nnapi, vulkan, cpu, reference)");
  app.add_option("--threads", threads, "threads (1 = no pool)");
  app.add_option("--runs", runs, "timed runs");
  app.add_option("--warmup", warmup, "untimed runs first");
  app.add_flag("--profile", profile, "time each step (one XNNPACK runtime per op) and print the top ones");
  app.add_option("--top", top, "profile rows to print");
  app.add_flag("--explain", explain, "print the partition report");
  NN_PARSE_COMMAND_LINE(app, argc, argv);

  auto t_load = std::chrono::steady_clock::now();
  const double c_load = thread_cpu_ms();
  auto loaded = nn::load_model(model_path);
  const double load_cpu_ms = thread_cpu_ms() - c_load;
  if (!loaded.is_ok()) {
    std::fprintf(stderr, "nnbench_quick: %s: %s\n", model_path.c_str(), loaded.status().to_string().c_str());
    return nn::tools::kExitFailed;
  }
  const double load_ms = ms_since(t_load);
  std::shared_ptr<const nn::Model> model = std::move(loaded).value();

  nn::SessionOptions options;
  options.cpu = nn::CpuOptions::from_environment();  // NN_NO_* A/B switches (bench/ab.py)
  options.delegates.clear();
  for (size_t pos = 0; pos <= delegates.size();) {
    size_t comma = delegates.find(',', pos);
    if (comma == std::string::npos) comma = delegates.size();
    if (comma > pos) options.delegates.push_back(delegates.substr(pos, comma - pos));
    pos = comma + 1;
  }
  options.threads = threads;
  options.profile = profile;
  auto t_open = std::chrono::steady_clock::now();
  const double c_open = thread_cpu_ms();
  auto opened = nn::Session::open(model, options);
  const double open_cpu_ms = thread_cpu_ms() - c_open;
  if (!opened.is_ok()) {
    std::fprintf(stderr, "nnbench_quick: open: %s\n", opened.status().to_string().c_str());
    return nn::tools::kExitFailed;
  }
  const double open_ms = ms_since(t_open);
  auto& session = *opened;
  if (explain) std::printf("%s", session->report().to_string().c_str());

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (size_t i = 0; i < session->num_inputs(); ++i) {
    if (session->input_desc(i).type != nn::OperandType::TENSOR_FLOAT32) continue;
    float* in = session->input_f32(i);
    for (size_t k = 0; k < nn::num_elements(session->input_desc(i).dims); ++k) in[k] = dist(rng);
  }
  for (int i = 0; i < warmup; ++i) {
    nn::Status s = session->run();
    if (!s.is_ok()) {
      std::fprintf(stderr, "nnbench_quick: run: %s\n", s.to_string().c_str());
      return nn::tools::kExitFailed;
    }
  }
  std::vector<double> times, cpu_times;
  std::map<std::string, std::vector<double>> step_times;
  std::vector<std::string> step_order;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_ms();
    nn::Status s = session->run();
    cpu_times.push_back(thread_cpu_ms() - c0);
    times.push_back(ms_since(t0));
    if (!s.is_ok()) {
      std::fprintf(stderr, "nnbench_quick: run: %s\n", s.to_string().c_str());
      return nn::tools::kExitFailed;
    }
    if (profile)
      for (const auto& st : session->step_timings()) {
        if (!step_times.count(st.label)) step_order.push_back(st.label);
        step_times[st.label].push_back(st.ms);
      }
  }
  std::printf("model %s: %zu ops (%s)\n", model_path.c_str(), model->operations.size(),
              model->op_summary().c_str());
  std::printf(
      "delegates %s, threads %d: load %.2f ms (cpu %.2f), open (plan + compile + pack) %.2f ms (cpu %.2f)\n",
      delegates.c_str(), threads, load_ms, load_cpu_ms, open_ms, open_cpu_ms);
  std::printf("latency over %d runs: median %.3f ms, min %.3f ms, p90 %.3f ms\n", runs,
              nn::percentile(times, 50), nn::percentile(times, 0), nn::percentile(times, 90));
  std::printf("calling thread CPU time: median %.3f ms (with --threads 1: the latency without preemption)\n",
              nn::percentile(cpu_times, 50));
  if (profile) {
    struct Row {
      std::string label;
      double median;
    };
    std::vector<Row> rows;
    double total = 0;
    for (const auto& label : step_order) {
      rows.push_back({label, nn::percentile(step_times[label], 50)});
      total += rows.back().median;
    }
    std::map<std::string, double> by_type;
    for (const Row& r : rows) {
      // "op 12 CONV_2D [xnnpack]" -> "CONV_2D [xnnpack]"
      std::string key = r.label;
      if (key.rfind("op ", 0) == 0) {
        size_t sp = key.find(' ', 3);
        if (sp != std::string::npos) key = key.substr(sp + 1);
      }
      by_type[key] += r.median;
    }
    std::printf("profile (sum of step medians %.3f ms; steps run as separate XNNPACK runtimes):\n", total);
    std::vector<std::pair<std::string, double>> types(by_type.begin(), by_type.end());
    std::sort(types.begin(), types.end(), [](auto& a, auto& b) { return a.second > b.second; });
    for (const auto& [k, v] : types) std::printf("  %-40s %8.3f ms %5.1f%%\n", k.c_str(), v, 100 * v / total);
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.median > b.median; });
    std::printf("top steps:\n");
    for (int i = 0; i < top && i < static_cast<int>(rows.size()); ++i)
      std::printf("  %-60s %8.3f ms\n", rows[i].label.c_str(), rows[i].median);
  }
  return 0;
}
