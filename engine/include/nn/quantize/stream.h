// Post-training quantization of a streaming audio model (nn/audio/stream.h): each stage
// calibrated on what it sees when the float stream runs over real audio, through the same
// front end the nndenoise element uses (framing, rFFT magnitude, masked inverse FFT) with
// its recurrent state carried from hop to hop.
#pragma once

#include <memory>
#include <vector>

#include "nn/audio/stream.h"
#include "nn/audio/wav.h"
#include "nn/quantize/quantize.h"

namespace nn::quantize {

struct StreamQuantizeOptions {
  QuantizeOptions stage;     // for every stage
  size_t hop_stride = 4;     // every hop_stride-th hop of the clips is a calibration sample
  size_t max_samples = 1500; // per stage, spread over the clips (hop_stride grows to fit)
};

struct StreamQuantizeReport {
  size_t hops = 0;  // hops the float stream ran over the clips
  std::vector<QuantizeReport> stages;
  std::string to_string() const;
};

// The stream's stages quantized (the framing unchanged), calibrated on `clips` (mono or
// multi-channel at the model's rate; each channel a stream of its own, starting from zero
// state as the element does).
Result<std::shared_ptr<const audio::StreamModel>> quantize_stream(const std::shared_ptr<const audio::StreamModel>& model,
                                                                  const std::vector<audio::AudioBuffer>& clips,
                                                                  const StreamQuantizeOptions& options,
                                                                  StreamQuantizeReport* report = nullptr);

}  // namespace nn::quantize
