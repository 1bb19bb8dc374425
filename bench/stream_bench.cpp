// nnstream_bench: what one hop of a streaming audio model costs, as nndenoise pays it
// (StreamProcessor::process_hop on one thread), with per-hop percentiles and the real-time
// factor, then the parts: each stage's session alone, the state copy, and the block FFTs
// through FFTW3f (what the engine uses) beside OpenCV's dft.
//   nnstream_bench build/models/dtln.nnapi --hops 20000
#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "audio/real_fft.h"
#include "nn/audio/stream.h"

namespace {

using Clock = std::chrono::steady_clock;

// This thread's CPU time: what a hop costs the core, whoever else shares it.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

struct Summary {
  double p50, p90, p99, max, mean;
};

Summary summarize(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {percentile(v, 50), percentile(v, 90), percentile(v, 99), percentile(v, 100), sum / v.size()};
}

// Median time of `fn` over `reps` calls, in microseconds.
template <typename Fn>
double median_us(int reps, Fn&& fn) {
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t[i] = ms_since(t0) * 1000.0;
  }
  return percentile(t, 50);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnstream_bench: per-hop cost of a streaming audio model (process_hop), its stages and FFTs"};
  std::string path, delegate = "cpu";
  int hops = 20000, threads = 1;
  float gain = 1.f;
  bool json = false;
  app.add_option("model", path, "streaming .nnapi file (nnconvert ... --stream)")->required();
  app.add_option("--hops", hops, "hops to time")->check(CLI::Range(100, 10000000));
  app.add_option("-d,--delegate", delegate, "delegate for every stage");
  app.add_option("-t,--threads", threads, "threads per stage")->check(CLI::Range(1, 64));
  app.add_option("--gain", gain, "input scale: 0 is silence, 1e-4 a quiet room (recurrent state near 0)");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  auto model = nn::audio::load_stream_model(path);
  if (!model) {
    std::fprintf(stderr, "nnstream_bench: %s\n", model.status().to_string().c_str());
    return 1;
  }
  const nn::audio::StreamInfo& info = (*model)->info();
  nn::audio::StreamOptions options;
  options.session.delegates = {delegate};
  options.session.threads = threads;
  options.session.cpu = nn::CpuOptions::from_environment();
  const auto open0 = Clock::now();
  auto proc = nn::audio::StreamProcessor::open(*model, options);
  const double open_ms = ms_since(open0);
  if (!proc) {
    std::fprintf(stderr, "nnstream_bench: %s\n", proc.status().to_string().c_str());
    return 1;
  }
  const size_t hop = static_cast<size_t>(info.hop), block = static_cast<size_t>(info.block);
  // Pink-ish noise with a slow envelope: the model sees changing input, as in use.
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.f, 0.1f);
  std::vector<float> in(hop), out(hop);
  float lp = 0;
  for (int i = 0; i < 200; ++i) {  // warm-up: caches, first-run allocations
    for (float& v : in) v = gain * g(rng);
    (void)(*proc)->process_hop(in.data(), out.data());
  }
  std::vector<double> hop_ms;
  hop_ms.reserve(static_cast<size_t>(hops));
  const double cpu0 = thread_cpu_ms();
  for (int h = 0; h < hops; ++h) {
    const float env = 0.5f + 0.5f * std::sin(static_cast<float>(h) * 0.01f);
    for (float& v : in) {
      lp = 0.9f * lp + g(rng);
      v = gain * env * lp;
    }
    const auto t0 = Clock::now();
    nn::Status s = (*proc)->process_hop(in.data(), out.data());
    hop_ms.push_back(ms_since(t0));
    if (!s.is_ok()) {
      std::fprintf(stderr, "nnstream_bench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  const double cpu_per_hop = (thread_cpu_ms() - cpu0) / hops;
  const Summary total = summarize(hop_ms);
  const double hop_audio_ms = 1000.0 * static_cast<double>(hop) / info.sample_rate;

  // The parts, each alone (so their sum is a little above the whole: warm caches are not shared).
  std::vector<double> stage_us;
  double state_copy_us = 0;
  for (size_t s = 0; s < (*model)->num_stages(); ++s) {
    nn::SessionOptions so = options.session;
    auto session = nn::Session::open((*model)->stage(s), so);
    if (!session) continue;
    for (size_t k = 0; k < (*session)->num_inputs(); ++k)
      std::memset((*session)->input_data(k), 0, (*session)->input_desc(k).byte_size());
    stage_us.push_back(median_us(5000, [&] { (void)(*session)->run(); }));
    const nn::StreamStage& st = (*model)->description().stages[s];
    for (size_t k = 0; k < st.inputs.size(); ++k)
      if (st.inputs[k].source == nn::StageInputSource::kState)
        state_copy_us += median_us(5000, [&] {
          std::memcpy((*session)->input_data(k), (*session)->output_data(st.inputs[k].state_output),
                      (*session)->input_desc(k).byte_size());
        });
  }
  nn::audio::RealFft fft(block);
  std::unique_ptr<float[], nn::audio::FftwFree> x(nn::audio::fft_alloc_floats(block)),
      y(nn::audio::fft_alloc_floats(block));
  std::unique_ptr<std::complex<float>[], nn::audio::FftwFree> X(nn::audio::fft_alloc_complex(block / 2 + 1));
  for (size_t i = 0; i < block; ++i) x[i] = g(rng);
  const double fftw_fwd = median_us(20000, [&] { fft.forward(x.get(), X.get()); });
  const double fftw_inv = median_us(20000, [&] {
    fft.forward(x.get(), X.get());
    fft.inverse(X.get(), y.get());
  }) - fftw_fwd;
  cv::Mat xm(1, static_cast<int>(block), CV_32F, x.get()), Xm, ym;
  const double cv_fwd = median_us(20000, [&] { cv::dft(xm, Xm, cv::DFT_COMPLEX_OUTPUT); });
  const double cv_inv = median_us(20000, [&] { cv::dft(Xm, ym, cv::DFT_INVERSE | cv::DFT_REAL_OUTPUT | cv::DFT_SCALE); });

  if (json) {
    nlohmann::json j;
    j["model"] = path;
    j["stream"] = info.summary;
    j["delegate"] = (*proc)->delegate_summary();
    j["threads"] = threads;
    j["hops"] = hops;
    j["gain"] = gain;
    j["hop_ms"] = {{"p50", total.p50}, {"p90", total.p90}, {"p99", total.p99}, {"max", total.max}, {"mean", total.mean}};
    j["real_time_factor"] = total.mean / hop_audio_ms;
    j["cpu_ms_per_hop"] = cpu_per_hop;
    j["real_time_factor_cpu"] = cpu_per_hop / hop_audio_ms;
    j["open_ms"] = open_ms;
    j["stage_us"] = stage_us;
    j["state_copy_us"] = state_copy_us;
    j["fft_us"] = {{"fftw_forward", fftw_fwd}, {"fftw_inverse", fftw_inv}, {"opencv_forward", cv_fwd},
                   {"opencv_inverse", cv_inv}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s\n  %s; delegate %s, %d thread(s)\n", path.c_str(), info.summary.c_str(),
              (*proc)->delegate_summary().c_str(), threads);
  std::printf("StreamProcessor::open (one channel: sessions, plans, buffers): %.1f ms\n", open_ms);
  std::printf("process_hop over %d hops: p50 %.4f ms, p90 %.4f ms, p99 %.4f ms, max %.4f ms, mean %.4f ms\n", hops,
              total.p50, total.p90, total.p99, total.max, total.mean);
  std::printf("real-time factor %.4f (mean wall-clock hop / %.1f ms of audio); by this thread's CPU time %.4f ms "
              "per hop, %.4f\n",
              total.mean / hop_audio_ms, hop_audio_ms, cpu_per_hop, cpu_per_hop / hop_audio_ms);
  for (size_t s = 0; s < stage_us.size(); ++s) std::printf("  stage %zu session run: %.1f us\n", s + 1, stage_us[s]);
  std::printf("  state copies (all stages): %.3f us\n", state_copy_us);
  std::printf("  %zu-point real FFT: FFTW3f forward %.2f us, inverse %.2f us; OpenCV dft forward %.2f us, inverse %.2f us\n",
              block, fftw_fwd, fftw_inv, cv_fwd, cv_inv);
  return 0;
}
