// nnrun: run a model (.nnapi, .tflite or .onnx) and report outputs and timing; a
// streaming audio model (.nnapi with stages) runs over an audio file instead.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "nn/audio/stream.h"
#include "nn/audio/wav.h"
#include "nn/format/stream_file.h"
#include "model_flops.h"
#include "nn/import/import.h"
#include "nn/percentile.h"
#include "nn/runtime/session.h"
#include "npy.h"
#include "tensor_io.h"

namespace {

std::string layout_of(const std::vector<std::string>& layouts, size_t i) {
  return i < layouts.size() ? layouts[i] : std::string();
}

int fail(const std::string& what, int code = nn::tools::kExitFailed) {
  std::fprintf(stderr, "nnrun: %s\n", what.c_str());
  return code;
}

// A .nnapi file whose section table has a STREAM section.
bool is_stream_path(const std::string& path) {
  if (std::filesystem::path(path).extension() != ".nnapi") return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  std::vector<uint8_t> bytes;
  uint8_t chunk[65536];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) bytes.insert(bytes.end(), chunk, chunk + n);
  std::fclose(f);
  return nn::is_stream_file(bytes);
}

// A streaming audio model over an audio file: one processor per channel, the output
// written as DIR/output_0.wav (32-bit float), timing per hop.
int run_stream(const std::string& model_path, const std::vector<std::string>& inputs, const std::string& save_dir,
               const nn::SessionOptions& session, bool keep_latency, float attenuation_db, bool json) {
  auto model = nn::audio::load_stream_model(model_path);
  if (!model) return fail(model.status().to_string());
  const nn::audio::StreamInfo& info = (*model)->info();
  if (inputs.size() != 1)
    return fail(model_path + " is a streaming audio model: give one --input audio file (" +
                std::to_string(info.sample_rate) + " Hz, any channel count)",
                nn::tools::kExitUsage);
  auto audio = nn::audio::read_audio(inputs[0]);
  if (!audio) return fail(audio.status().to_string());
  nn::audio::StreamOptions options;
  options.session = session;
  options.attenuation_limit_db = attenuation_db;
  nn::audio::StreamRunStats stats;
  auto out = nn::audio::process_audio(*model, *audio, options, !keep_latency, &stats);
  if (!out) return fail(nn::tools::with_path(inputs[0], out.status().to_string()));
  std::string saved;
  if (!save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(save_dir, ec);
    saved = (std::filesystem::path(save_dir) / "output_0.wav").string();
    nn::Status s = nn::audio::write_wav(saved, *out);
    if (!s.is_ok()) return fail(s.to_string());
  }
  const std::string& delegates = stats.delegates;
  const double audio_ms = 1000.0 * static_cast<double>(audio->frames()) / info.sample_rate;
  const double hop_audio_ms = 1000.0 * info.hop / info.sample_rate;
  const double p50 = nn::percentile(stats.hop_ms, 50), p99 = nn::percentile(stats.hop_ms, 99);
  const double rtf = stats.hops ? (stats.total_ms / static_cast<double>(stats.hops)) / hop_audio_ms : 0;
  if (json) {
    nlohmann::json j;
    j["model"] = model_path;
    j["stream"] = info.summary;
    j["input"] = inputs[0];
    j["channels"] = audio->channels;
    j["seconds"] = audio_ms / 1000.0;
    j["delegate"] = delegates;
    j["hops"] = stats.hops;
    j["hop_ms"] = {{"p50", p50}, {"p99", p99}, {"max", nn::percentile(stats.hop_ms, 100)}};
    j["real_time_factor"] = rtf;
    j["nonfinite_resets"] = stats.nonfinite_resets;
    j["latency_samples"] = info.latency_samples;
    j["latency_compensated"] = !keep_latency;
    if (!saved.empty()) j["output"] = saved;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %s\n", model_path.c_str(), info.summary.c_str());
  std::printf("%s: %d channel(s), %.2f s at %d Hz; delegate %s\n", inputs[0].c_str(), audio->channels,
              audio_ms / 1000.0, audio->sample_rate, delegates.c_str());
  std::printf("%llu hops: per hop p50 %.3f ms, p99 %.3f ms, max %.3f ms; real-time factor %.4f (one core per channel)\n",
              static_cast<unsigned long long>(stats.hops), p50, p99, nn::percentile(stats.hop_ms, 100), rtf);
  if (stats.nonfinite_resets)
    std::printf("non-finite state or output: %llu resets\n", static_cast<unsigned long long>(stats.nonfinite_resets));
  if (!saved.empty())
    std::printf("wrote %s (%s)\n", saved.c_str(),
                keep_latency ? ("delayed by " + std::to_string(info.latency_samples) + " samples").c_str()
                             : "latency compensated: lined up with the input");
  return 0;
}

// "3 CONV_2D+RELU": an op and the ops fused into it.
std::string ops_text(const nn::Model& m, const std::vector<uint32_t>& ops) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i)
    s += (i ? "+" : std::to_string(ops[i]) + " ") + std::string(nn::operation_type_name(m.operations[ops[i]].type));
  return s;
}

// --explain, compact: the partitions, each distinct fallback reason once with its ops, and
// per kernel of the CPU delegate the ops it runs.
std::string compact_explain(const nn::Model& m, const nn::PlanReport& r, const std::vector<nn::StepTiming>& kernels) {
  std::string s = "requested: ";
  for (size_t i = 0; i < r.requested.size(); ++i) s += (i ? ", " : "") + r.requested[i];
  s += "\n";
  for (const auto& u : r.unavailable) s += "unavailable: " + u + "\n";
  for (const auto& d : r.delegate_info) s += "delegate " + d + "\n";  // nnapi: its library, level, devices
  for (size_t p = 0; p < r.partitions.size(); ++p) {
    const auto& ops = r.partitions[p].op_indices;
    s += "partition " + std::to_string(p) + ": " + r.partitions[p].delegate + ", " + std::to_string(ops.size()) + " ops";
    if (!ops.empty())
      s += " (op " + std::to_string(*std::min_element(ops.begin(), ops.end())) + ".." +
           std::to_string(*std::max_element(ops.begin(), ops.end())) + ")";
    s += "\n";
  }
  std::vector<std::pair<std::string, std::vector<uint32_t>>> groups;  // reason or kernel -> ops, first seen first
  auto add = [&](const std::string& key, uint32_t op) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(op);
  };
  auto list = [&](const std::vector<uint32_t>& ops, size_t max) {
    std::string t;
    for (size_t i = 0; i < ops.size() && i < max; ++i)
      t += (i ? ", " : "") + std::to_string(ops[i]) + " " + std::string(nn::operation_type_name(m.operations[ops[i]].type));
    if (ops.size() > max) t += ", ... " + std::to_string(ops.size() - max) + " more";
    return t;
  };
  for (const auto& op : r.ops)
    if (!op.fallback_reason.empty()) add("stay on " + op.delegate + ": " + op.fallback_reason, op.op_index);
  for (const auto& [reason, ops] : groups)
    s += std::to_string(ops.size()) + (ops.size() == 1 ? " op " : " ops ") + reason + " (" + list(ops, 8) + ")\n";
  if (!kernels.empty()) {
    s += "cpu kernels:\n";
    std::vector<std::pair<std::string, std::vector<std::string>>> by_kernel;
    for (const auto& k : kernels) {
      auto it = std::find_if(by_kernel.begin(), by_kernel.end(), [&](const auto& g) { return g.first == k.kernel; });
      if (it == by_kernel.end()) it = by_kernel.insert(by_kernel.end(), {k.kernel, {}});
      it->second.push_back(ops_text(m, k.ops));
    }
    for (const auto& [kernel, ops] : by_kernel) {
      s += "  " + kernel + " (" + std::to_string(ops.size()) + "): ";
      for (size_t i = 0; i < ops.size(); ++i) s += (i ? ", " : "") + ops[i];
      s += "\n";
    }
  }
  return s;
}

struct ProfileRow {
  std::string kernel, ops;
  double ms = 0, flops = 0;
  // With a pool: median CPU ms per thread on the step, caller's wait ms, jobs (serial ones).
  std::vector<double> busy_ms;
  double wait_ms = 0, jobs = 0, serial_jobs = 0;
  // Sum of the threads' busy time over threads x wall: 1 when every thread worked the whole step.
  double efficiency() const {
    double sum = 0;
    for (double b : busy_ms) sum += b;
    return busy_ms.empty() || ms <= 0 ? 0 : sum / (double(busy_ms.size()) * ms);
  }
};

// The profiled steps' timings over the timed runs, per step.
struct StepSamples {
  std::vector<double> ms, wait_ms, jobs, serial_jobs;
  std::vector<std::vector<double>> busy_ms;  // [thread][run]
  void add(const nn::StepTiming& t) {
    ms.push_back(t.ms), wait_ms.push_back(t.wait_ms), jobs.push_back(t.jobs), serial_jobs.push_back(t.serial_jobs);
    if (busy_ms.size() < t.busy_ms.size()) busy_ms.resize(t.busy_ms.size());
    for (size_t k = 0; k < t.busy_ms.size(); ++k) busy_ms[k].push_back(t.busy_ms[k]);
  }
};

// Medians per profiled step over the timed runs, sorted by time.
std::vector<ProfileRow> profile_rows(const nn::Model& m, const std::vector<nn::StepTiming>& layout,
                                     const std::vector<StepSamples>& samples) {
  std::vector<ProfileRow> rows;
  for (size_t i = 0; i < layout.size(); ++i) {
    ProfileRow r;
    r.kernel = layout[i].kernel.empty() ? layout[i].label : layout[i].kernel;
    r.ops = layout[i].ops.empty() ? layout[i].label : ops_text(m, layout[i].ops);
    const StepSamples& s = samples[i];
    r.ms = nn::percentile(s.ms, 50);
    for (const auto& b : s.busy_ms) r.busy_ms.push_back(nn::percentile(b, 50));
    r.wait_ms = nn::percentile(s.wait_ms, 50);
    r.jobs = nn::percentile(s.jobs, 50);
    r.serial_jobs = nn::percentile(s.serial_jobs, 50);
    for (uint32_t k : layout[i].ops) r.flops += nn::bench::op_flops(m, k);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return a.ms > b.ms; });
  return rows;
}

// "0.512+0.498": each thread's busy ms, the caller's first.
std::string busy_text(const std::vector<double>& busy) {
  std::string s;
  char buf[32];
  for (size_t k = 0; k < busy.size(); ++k) {
    std::snprintf(buf, sizeof(buf), "%s%.3f", k ? "+" : "", busy[k]);
    s += buf;
  }
  return s;
}

void print_profile(const std::vector<ProfileRow>& rows, double run_median_ms) {
  double total_ms = 0, total_flops = 0, total_wait = 0;
  std::vector<double> total_busy;
  for (const auto& r : rows) {
    total_ms += r.ms, total_flops += r.flops, total_wait += r.wait_ms;
    if (total_busy.size() < r.busy_ms.size()) total_busy.resize(r.busy_ms.size());
    for (size_t k = 0; k < r.busy_ms.size(); ++k) total_busy[k] += r.busy_ms[k];
  }
  const bool pool = !total_busy.empty();
  std::printf("profile: %zu steps, median ms of each over the timed runs (whole run median %.3f ms, steps timed "
              "one by one)\n", rows.size(), run_median_ms);
  if (pool)
    std::printf("  eff: the threads' CPU time on the step over threads x its wall time; busy: each thread's CPU "
                "ms (caller first); jobs: pool jobs, (s) of them on the caller alone\n");
  auto gflops = [](double flops, double ms) { return ms > 0 ? flops / (ms * 1e6) : 0.0; };
  if (pool) {
    std::printf("%9s %6s %8s %5s %-17s %-7s  %-34s %s\n", "ms", "%", "GFLOP/s", "eff", "busy ms", "jobs", "kernel",
                "ops");
    for (const auto& r : rows) {
      char jobs[32];
      std::snprintf(jobs, sizeof(jobs), "%g(%g)", r.jobs, r.serial_jobs);
      std::printf("%9.4f %5.1f%% %8.1f %4.0f%% %-17s %-7s  %-34s %s\n", r.ms, total_ms > 0 ? 100 * r.ms / total_ms : 0,
                  gflops(r.flops, r.ms), 100 * r.efficiency(), busy_text(r.busy_ms).c_str(), jobs, r.kernel.c_str(),
                  r.ops.c_str());
    }
    ProfileRow total;
    total.ms = total_ms, total.busy_ms = total_busy;
    std::printf("%9.4f %5.1f%% %8.1f %4.0f%% %-17s %-7s  total (%.3f GFLOP; the caller waited %.3f ms for other "
                "threads)\n", total_ms, 100.0, gflops(total_flops, total_ms), 100 * total.efficiency(),
                busy_text(total_busy).c_str(), "", total_flops / 1e9, total_wait);
  } else {
    std::printf("%9s %6s %8s  %-34s %s\n", "ms", "%", "GFLOP/s", "kernel", "ops");
    for (const auto& r : rows)
      std::printf("%9.4f %5.1f%% %8.1f  %-34s %s\n", r.ms, total_ms > 0 ? 100 * r.ms / total_ms : 0,
                  gflops(r.flops, r.ms), r.kernel.c_str(), r.ops.c_str());
    std::printf("%9.4f %5.1f%% %8.1f  total (%.3f GFLOP)\n", total_ms, 100.0, gflops(total_flops, total_ms),
                total_flops / 1e9);
  }
  std::vector<std::pair<std::string, ProfileRow>> by_kernel;
  for (const auto& r : rows) {
    auto it = std::find_if(by_kernel.begin(), by_kernel.end(), [&](const auto& g) { return g.first == r.kernel; });
    if (it == by_kernel.end()) it = by_kernel.insert(by_kernel.end(), {r.kernel, {}});
    it->second.ms += r.ms, it->second.flops += r.flops, it->second.ops += "x";  // ops: a step count
  }
  std::stable_sort(by_kernel.begin(), by_kernel.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  for (const auto& [kernel, t] : by_kernel)
    std::printf("%9.4f %5.1f%% %8.1f  %-34s %zu steps\n", t.ms, total_ms > 0 ? 100 * t.ms / total_ms : 0,
                gflops(t.flops, t.ms), kernel.c_str(), t.ops.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nnrun: run a model and print its outputs and timing.\n"
      "Inputs and saved outputs use the source model's layout (NCHW for ONNX images).\n"
      "Example: nnrun selfie.nnapi --input messi5.jpg --runs 50 --threads 2 --json\n"
      "Streaming audio: nnrun dtln.nnapi --input noisy.wav --save-outputs out/  (writes out/output_0.wav)"};
  std::string model_path, delegate = "auto", save_dir;
  std::vector<std::string> inputs;
  bool random = false, json = false, explain = false, strict = false, profile = false;
  int threads = 1, runs = 10, warmup = 3;
  app.add_option("model", model_path, "model file: .nnapi, .tflite or .onnx")->required()->check(CLI::ExistingFile);
  app.add_option("-i,--input", inputs,
                 "input file per model input: an image (.jpg/.png) or a tensor (.npy); streaming audio models: "
                 "one audio file (.wav, .flac) at the model's rate")
      ->check(CLI::ExistingFile);
  app.add_flag("--random", random, "use deterministic random inputs");
  app.add_option("--save-outputs", save_dir,
                 "write each output as DIR/output_<i>.npy (streaming audio models: DIR/output_0.wav)");
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
  app.add_flag("--explain", explain,
               "print the partitions, each reason ops fell back (once), and which CPU kernel runs each op");
  app.add_flag("--profile", profile,
               "time each step (op with its fused ops): kernel, median ms, % of the run, GFLOP/s, sorted");
  bool keep_latency = false;
  float attenuation_db = 0;
  app.add_flag("--keep-latency", keep_latency,
               "streaming models: write the raw stream (delayed by the model's latency) instead of lining the "
               "output up with the input");
  app.add_option("--attenuation-limit", attenuation_db,
                 "streaming models: the most (dB) any bin is turned down; 0 = no limit")
      ->check(CLI::Range(0.f, 200.f));
  app.add_flag("--strict-delegates", strict, "fail when a delegate named with -d is unavailable");
  std::string requantize = "nnapi";
  app.add_option("--requantize", requantize,
                 "quant8 reference kernels' rounding: nnapi (NNAPI's fixed point) or fp32 (qnnpack's, as eager "
                 "PyTorch); the nnapi delegate's driver decides its own")
      ->check(CLI::IsMember({"nnapi", "fp32"}));
  NN_PARSE_COMMAND_LINE(app, argc, argv);
  // OpenCV's own "[ WARN ]" lines (imread on a missing file, ...) would repeat, in its words,
  // the error this tool reports; errors still come back as return values.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);

  nn::SessionOptions options;
  options.cpu = nn::CpuOptions::from_environment();  // the NN_NO_* switches of the CPU delegate
  options.threads = threads;
  options.strict_delegates = strict;
  options.requantization = *nn::parse_requantization(requantize);
  options.delegates.clear();
  for (size_t p = 0, q; p <= delegate.size(); p = q + 1) {
    q = delegate.find(',', p);
    if (q == std::string::npos) q = delegate.size();
    options.delegates.push_back(delegate.substr(p, q - p));
  }
  if (is_stream_path(model_path))
    return run_stream(model_path, inputs, save_dir, options, keep_latency, attenuation_db, json);

  auto loaded = nn::load_model(model_path);
  if (!loaded) return fail(nn::tools::with_path(model_path, loaded.status().to_string()));
  std::shared_ptr<nn::Model> model = std::move(loaded).value();
  if (!random && inputs.empty())
    return fail("give --input FILE (one per model input) or --random", nn::tools::kExitUsage);
  if (!inputs.empty() && inputs.size() != model->inputs.size())
    return fail("the model has " + std::to_string(model->inputs.size()) + " inputs, got " +
                std::to_string(inputs.size()) + " --input files", nn::tools::kExitUsage);

  options.profile = profile;
  auto opened = nn::Session::open(model, options);
  if (!opened) return fail(opened.status().to_string());
  std::unique_ptr<nn::Session> session = std::move(opened).value();
  // A delegate asked for by name that is not there is said out loud, not just left to
  // the partition summary.
  for (const std::string& missing : session->report().missing_requested())
    std::fprintf(stderr, "nnrun: warning: requested delegate %s; running on the fallback instead "
                         "(--strict-delegates makes this an error)\n", missing.c_str());

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
    if (!s.is_ok()) return fail(nn::tools::with_path(inputs[i], s.message()));
  }

  for (int k = 0; k < warmup; ++k)
    if (nn::Status s = session->run(); !s.is_ok()) return fail(s.to_string());
  std::vector<double> times;
  std::vector<nn::StepTiming> step_layout;  // --profile: the steps of the first timed run
  std::vector<StepSamples> step_samples;
  for (int k = 0; k < runs; ++k) {
    if (nn::Status s = session->run(); !s.is_ok()) return fail(s.to_string());
    times.push_back(session->last_run_ms());
    if (profile) {
      std::vector<nn::StepTiming> t = session->step_timings();
      if (step_layout.empty()) step_layout = t, step_samples.resize(t.size());
      for (size_t i = 0; i < t.size() && i < step_samples.size(); ++i) step_samples[i].add(t[i]);
    }
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
  j["runtime_fallbacks"] = session->runtime_fallbacks();
  j["median_ms"] = nn::percentile(times, 50);
  j["p90_ms"] = nn::percentile(times, 90);
  j["p99_ms"] = nn::percentile(times, 99);
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
  if (explain) j["plan"] = compact_explain(*model, session->report(), session->kernels());
  std::vector<ProfileRow> rows;
  if (profile) {
    rows = profile_rows(*model, step_layout, step_samples);
    j["profile"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json row = {{"kernel", r.kernel}, {"ops", r.ops}, {"ms", r.ms}, {"flops", r.flops}};
      if (!r.busy_ms.empty())
        row.update({{"busy_ms", r.busy_ms}, {"efficiency", r.efficiency()}, {"jobs", r.jobs},
                    {"serial_jobs", r.serial_jobs}, {"wait_ms", r.wait_ms}});
      j["profile"].push_back(std::move(row));
    }
  }

  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %zu ops on %s, %d thread(s)\n", model_path.c_str(), model->operations.size(),
              delegate_used.c_str(), session->report().threads);
  if (explain) std::printf("%s", compact_explain(*model, session->report(), session->kernels()).c_str());
  if (profile) print_profile(rows, nn::percentile(times, 50));
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
