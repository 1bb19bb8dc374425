// Audio file I/O through libsndfile, and whole-signal streaming (nnrun, tests).
#include <sndfile.h>

#include <algorithm>
#include <chrono>

#include "nn/audio/wav.h"

namespace nn::audio {

Result<AudioBuffer> read_audio(const std::string& path) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  if (!f) return Status(StatusCode::kIoError, path + ": cannot open: " + sf_strerror(nullptr));
  if (info.channels < 1 || info.channels > 64 || info.samplerate < 1 || info.frames < 0) {
    sf_close(f);
    return Status(StatusCode::kInvalidArgument, path + ": " + std::to_string(info.channels) + " channels at " +
                                                    std::to_string(info.samplerate) + " Hz is not usable");
  }
  AudioBuffer a;
  a.sample_rate = info.samplerate;
  a.channels = info.channels;
  a.samples.resize(static_cast<size_t>(info.frames) * static_cast<size_t>(info.channels));
  const sf_count_t got = sf_readf_float(f, a.samples.data(), info.frames);
  sf_close(f);
  a.samples.resize(static_cast<size_t>(std::max<sf_count_t>(got, 0)) * static_cast<size_t>(info.channels));
  return a;
}

Status write_wav(const std::string& path, const AudioBuffer& audio) {
  SF_INFO info{};
  info.samplerate = audio.sample_rate;
  info.channels = audio.channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!f) return {StatusCode::kIoError, path + ": cannot create: " + sf_strerror(nullptr)};
  const sf_count_t frames = static_cast<sf_count_t>(audio.frames());
  const sf_count_t put = sf_writef_float(f, audio.samples.data(), frames);
  const int closed = sf_close(f);
  if (put != frames || closed != 0) return {StatusCode::kIoError, path + ": write failed"};
  return Status::ok();
}

Result<AudioBuffer> process_audio(const std::shared_ptr<const StreamModel>& model, const AudioBuffer& in,
                                  const StreamOptions& options, bool compensate_latency, StreamRunStats* stats) {
  const StreamInfo& si = model->info();
  if (in.sample_rate != si.sample_rate)
    return Status(StatusCode::kInvalidArgument, std::to_string(in.sample_rate) + " Hz, the model takes " +
                                                    std::to_string(si.sample_rate) +
                                                    " Hz only (resample first, e.g. sox in.wav -r " +
                                                    std::to_string(si.sample_rate) + " out.wav)");
  if (in.channels < 1) return Status(StatusCode::kInvalidArgument, "no channels");
  const size_t channels = static_cast<size_t>(in.channels), frames = in.frames();
  const size_t hop = static_cast<size_t>(si.hop);
  const size_t skip = compensate_latency ? static_cast<size_t>(si.latency_samples) : 0;
  const size_t hops = (frames + skip + hop - 1) / hop;
  AudioBuffer out;
  out.sample_rate = in.sample_rate;
  out.channels = in.channels;
  out.samples.assign(frames * channels, 0.f);
  std::vector<float> x(hop), y(hop);
  for (size_t c = 0; c < channels; ++c) {
    auto proc = StreamProcessor::open(model, options);
    if (!proc.is_ok()) return proc.status();
    for (size_t h = 0; h < hops; ++h) {
      for (size_t i = 0; i < hop; ++i) {
        const size_t n = h * hop + i;
        x[i] = n < frames ? in.samples[n * channels + c] : 0.f;
      }
      const auto t0 = std::chrono::steady_clock::now();
      NN_RETURN_IF_ERROR((*proc)->process_hop(x.data(), y.data()));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (stats) {
        stats->hop_ms.push_back(ms);
        stats->total_ms += ms;
        ++stats->hops;
      }
      for (size_t i = 0; i < hop; ++i) {
        const size_t n = h * hop + i;
        if (n >= skip && n - skip < frames) out.samples[(n - skip) * channels + c] = y[i];
      }
    }
    if (stats) {
      stats->nonfinite_resets += (*proc)->nonfinite_resets();
      stats->delegates = (*proc)->delegate_summary();
    }
  }
  return out;
}

}  // namespace nn::audio
