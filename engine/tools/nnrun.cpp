// nnrun: run a model (.nnapi, .tflite or .onnx) and report outputs and timing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "npy.h"
#include "tensor_io.h"

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(idx)), hi = static_cast<size_t>(std::ceil(idx));
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

std::string layout_of(const std::vector<std::string>& layouts, size_t i) {
  return i < layouts.size() ? layouts[i] : std::string();
}

int fail(const std::string& what) {
  std::fprintf(stderr, "nnrun: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nnrun: run a model and print its outputs and timing.\n"
      "Inputs and saved outputs use the source model's layout (NCHW for ONNX images).\n"
      "Example: nnrun selfie.nnapi --input messi5.jpg --runs 50 --threads 2 --json"};
  std::string model_path, delegate = "auto", save_dir;
  std::vector<std::string> inputs;
  bool random = false, json = false, explain = false;
  int threads = 1, runs = 10, warmup = 3;
  app.add_option("model", model_path, "model file: .nnapi, .tflite or .onnx")->required();
  app.add_option("-i,--input", inputs, "input file per model input: an image (.jpg/.png) or a tensor (.npy)");
  app.add_flag("--random", random, "use deterministic random inputs");
  app.add_option("--save-outputs", save_dir, "write each output as DIR/output_<i>.npy");
  app.add_option("-t,--threads", threads, "CPU threads, at most the cores; 0 = the cores idle now")
      ->check(CLI::Range(0, 64));
  app.add_option("-d,--delegate", delegate, "delegate preference: auto, cpu, vulkan, nnapi, reference, or a "
                                            "comma-separated list")
      ->check(CLI::IsMember({"auto", "cpu", "vulkan", "nnapi", "reference"}) | CLI::Validator([](std::string& s) {
                return s.find(',') != std::string::npos ? std::string() : std::string("not a list");
              }, "LIST"));
  app.add_option("-r,--runs", runs, "timed runs")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed runs first")->check(CLI::Range(0, 10000));
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--explain", explain, "print which delegate runs each op, and why ops fell back");
  CLI11_PARSE(app, argc, argv);

  auto loaded = nn::load_model(model_path);
  if (!loaded) return fail(model_path + ": " + loaded.status().to_string());
  std::shared_ptr<nn::Model> model = std::move(loaded).value();
  if (!random && inputs.empty()) return fail("give --input FILE (one per model input) or --random");
  if (!inputs.empty() && inputs.size() != model->inputs.size())
    return fail("the model has " + std::to_string(model->inputs.size()) + " inputs, got " +
                std::to_string(inputs.size()) + " --input files");

  nn::SessionOptions options;
  options.threads = threads;
  options.delegates.clear();
  for (size_t p = 0, q; p <= delegate.size(); p = q + 1) {
    q = delegate.find(',', p);
    if (q == std::string::npos) q = delegate.size();
    options.delegates.push_back(delegate.substr(p, q - p));
  }
  auto opened = nn::Session::open(model, options);
  if (!opened) return fail(opened.status().to_string());
  std::unique_ptr<nn::Session> session = std::move(opened).value();

  for (size_t i = 0; i < session->num_inputs(); ++i) {
    const nn::Operand& desc = session->input_desc(i);
    if (random) {
      nn::tools::random_input(desc, 1234 + static_cast<uint32_t>(i), session->input_data(i));
      continue;
    }
    std::string ext = std::filesystem::path(inputs[i]).extension().string();
    nn::Status s;
    if (ext == ".npy") {
      auto arr = nn::tools::read_npy(inputs[i]);
      if (!arr) return fail(arr.status().message());
      s = nn::tools::npy_to_input(*arr, desc, layout_of(model->metadata.input_source_layouts, i),
                                  session->input_data(i));
    } else {
      s = nn::tools::image_to_input(inputs[i], *model, i, session->input_data(i));
    }
    if (!s.is_ok()) return fail(inputs[i] + ": " + s.message());
  }

  for (int k = 0; k < warmup; ++k)
    if (nn::Status s = session->run(); !s.is_ok()) return fail(s.to_string());
  std::vector<double> times;
  for (int k = 0; k < runs; ++k) {
    if (nn::Status s = session->run(); !s.is_ok()) return fail(s.to_string());
    times.push_back(session->last_run_ms());
  }

  std::string delegate_used;
  for (const auto& p : session->report().partitions)
    if (delegate_used.find(p.delegate) == std::string::npos)
      delegate_used += (delegate_used.empty() ? "" : "+") + p.delegate;

  nlohmann::json j;
  j["model"] = model_path;
  j["runs"] = runs;
  j["threads"] = session->report().threads;
  j["delegate"] = delegate_used;
  j["median_ms"] = percentile(times, 50);
  j["p90_ms"] = percentile(times, 90);
  j["p99_ms"] = percentile(times, 99);
  j["min_ms"] = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
  j["outputs"] = nlohmann::json::array();
  for (size_t i = 0; i < session->num_outputs(); ++i) {
    const nn::Operand& desc = session->output_desc(i);
    std::string layout = layout_of(model->metadata.output_source_layouts, i);
    nn::Dims shape = nn::tools::source_dims(desc, layout);
    nlohmann::json o;
    o["name"] = desc.name;
    o["shape"] = shape;
    o["type"] = std::string(nn::operand_type_name(desc.type));
    if (desc.type == nn::OperandType::TENSOR_FLOAT32) {
      const float* p = session->output_f32(i);
      size_t n = nn::num_elements(desc.dims);
      double sum = 0, mn = INFINITY, mx = -INFINITY;
      for (size_t e = 0; e < n; ++e) {
        sum += p[e];
        mn = std::min<double>(mn, p[e]);
        mx = std::max<double>(mx, p[e]);
      }
      o["mean"] = n ? sum / static_cast<double>(n) : 0.0;
      o["min"] = mn;
      o["max"] = mx;
    }
    if (!save_dir.empty()) {
      std::filesystem::create_directories(save_dir);
      std::string path = save_dir + "/output_" + std::to_string(i) + ".npy";
      nn::Status s = nn::tools::write_npy(path, nn::tools::output_to_npy(desc, layout, session->output_data(i)));
      if (!s.is_ok()) return fail(s.message());
      o["saved"] = path;
    }
    j["outputs"].push_back(o);
  }
  if (explain) j["plan"] = session->report().to_string();

  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %zu ops on %s, %d thread(s)\n", model_path.c_str(), model->operations.size(),
              delegate_used.c_str(), session->report().threads);
  if (explain) std::printf("%s", session->report().to_string().c_str());
  for (const auto& o : j["outputs"]) {
    std::printf("output '%s' %s shape %s", o["name"].get<std::string>().c_str(),
                o["type"].get<std::string>().c_str(), o["shape"].dump().c_str());
    if (o.contains("mean"))
      std::printf(" mean %.6g min %.6g max %.6g", o["mean"].get<double>(), o["min"].get<double>(),
                  o["max"].get<double>());
    if (o.contains("saved")) std::printf(" -> %s", o["saved"].get<std::string>().c_str());
    std::printf("\n");
  }
  std::printf("latency over %d runs: median %.3f ms, p90 %.3f ms, p99 %.3f ms, min %.3f ms\n", runs,
              j["median_ms"].get<double>(), j["p90_ms"].get<double>(), j["p99_ms"].get<double>(),
              j["min_ms"].get<double>());
  return 0;
}
