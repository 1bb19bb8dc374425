// Streaming audio models: a model in stages with recurrent state, framed in blocks and
// hops (DTLN: rFFT magnitude -> stage 1 -> spectral mask -> iFFT -> stage 2 -> overlap-add).
// One .nnapi file holds every stage and the framing (engine/format/SPEC.md, "Streaming
// models"), so an element reads all of it from the file and knows nothing of one model.
// The engine owns the framing, the FFTs and the state; callers push samples, take samples.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/format/stream_file.h"
#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "nn/status.h"

namespace nn::audio {

// Framing, as the file states it.
struct StreamInfo {
  int sample_rate = 0;      // Hz; the only rate the model takes
  int block = 0;            // samples each step analyses (the window)
  int hop = 0;              // new samples per step
  int latency_samples = 0;  // algorithmic delay: output sample n is input sample n - latency
  int num_stages = 0;
  std::string summary;      // one line for tools and stats: stages, transforms, states
  std::string description;  // the file's free text: which model, where from
};

// A loaded streaming model: its stages (IR models) and how they are wired.
class StreamModel {
 public:
  virtual ~StreamModel() = default;
  virtual const StreamInfo& info() const = 0;
  virtual size_t num_stages() const = 0;
  virtual std::shared_ptr<const Model> stage(size_t i) const = 0;
  virtual const StreamDescription& description() const = 0;  // the framing as the file gives it
};

// Loads a streaming .nnapi file. A file that is not a streaming audio model (the selfie
// model, say) is refused: "<path>: not a streaming audio model: <why>".
Result<std::shared_ptr<const StreamModel>> load_stream_model(const std::string& path);
// A streaming model from its parts (tests, tools that build one in memory); validated as
// a file would be.
Result<std::shared_ptr<const StreamModel>> make_stream_model(const StreamDescription& description,
                                                             std::vector<std::shared_ptr<Model>> stages);

struct StreamOptions {
  SessionOptions session;          // delegates, threads for every stage
  float attenuation_limit_db = 0;  // the most any bin is turned down; 0 = no limit
  // Called with each stage's session once its inputs are written, before it runs (its
  // input_f32(k) are what the stage sees: post-training quantization calibrates on them).
  std::function<void(size_t stage, Session& session)> on_stage_inputs;
};

// One channel's stream: framing buffers, recurrent state and the stages' sessions.
// Not thread-safe: one per channel, driven by one thread at a time.
class StreamProcessor {
 public:
  virtual ~StreamProcessor() = default;
  static Result<std::unique_ptr<StreamProcessor>> open(std::shared_ptr<const StreamModel> model,
                                                       const StreamOptions& options = {});

  virtual const StreamInfo& info() const = 0;
  // Takes exactly info().hop new samples, writes info().hop processed samples (the
  // stream delayed by latency_samples). Non-finite input samples are taken as 0; if the
  // state or output turns non-finite the stream is reset and this hop's output is the
  // delayed input (counted in nonfinite_resets()).
  virtual Status process_hop(const float* in, float* out) = 0;
  // Advances the framing by one hop without inference (the caller passes this hop
  // through itself); the recurrent state is kept, the overlap-add tail decays normally.
  virtual void skip_hop(const float* in) = 0;
  // The same, and writes what a bypassed hop should sound like in its place: the input
  // delayed by latency_samples (so a crossfade between it and process_hop's output
  // lines up sample for sample).
  virtual void skip_hop(const float* in, float* delayed_in) = 0;
  // Zeroes state and buffers, as at the start of a stream (DISCONT, FLUSH).
  virtual void reset() = 0;
  virtual void set_attenuation_limit_db(float db) = 0;

  virtual double last_hop_ms() const = 0;       // inference + transforms of the last hop
  virtual uint64_t nonfinite_resets() const = 0;
  virtual uint64_t nonfinite_samples() const = 0;   // NaN / Inf input samples taken as 0
  virtual std::string delegate_summary() const = 0;  // "cpu" or "stage 1: cpu, stage 2: cpu"
};

}  // namespace nn::audio
