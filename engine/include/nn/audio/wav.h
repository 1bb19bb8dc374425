// Audio files for tools and tests (libsndfile: WAV, FLAC, ... by content), and running a
// whole multi-channel signal through a streaming model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/audio/stream.h"
#include "nn/status.h"

namespace nn::audio {

struct AudioBuffer {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> samples;  // interleaved, frames x channels
  size_t frames() const { return channels > 0 ? samples.size() / static_cast<size_t>(channels) : 0; }
};

// Errors name the file: "<path>: cannot open: <libsndfile's reason>".
Result<AudioBuffer> read_audio(const std::string& path);
// A 32-bit float WAV (no clipping, no requantization).
Status write_wav(const std::string& path, const AudioBuffer& audio);

struct StreamRunStats {
  uint64_t hops = 0;
  uint64_t nonfinite_resets = 0;
  std::vector<double> hop_ms;  // per hop, every channel
  double total_ms = 0;
  std::string delegates;  // the processors' delegate_summary()
};

// Runs every channel through its own processor (independent state). The audio's rate
// must be the model's ("<rate> Hz, the model takes <rate> Hz"). With compensate_latency
// the output lines up with the input (the first latency_samples are dropped and the
// tail is flushed with zeros), else it is the raw stream, delayed by latency_samples.
// Either way the output has as many frames as the input.
Result<AudioBuffer> process_audio(const std::shared_ptr<const StreamModel>& model, const AudioBuffer& in,
                                  const StreamOptions& options, bool compensate_latency,
                                  StreamRunStats* stats = nullptr);

}  // namespace nn::audio
