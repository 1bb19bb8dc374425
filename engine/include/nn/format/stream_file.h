// Streaming models in a .nnapi file (version 1.1, SPEC.md "Streaming models"): the
// stages, each a whole model, and a generic description of the framing around them: the
// rate, block and hop, the windows, which transform of the block feeds each stage input,
// what each stage output means, and which state output feeds which state input next hop.
// The engine interprets it (nn/audio/stream.h); nothing in code knows one model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn {

enum class StreamWindow : uint32_t {
  kNone = 0,      // rectangular
  kHann = 1,      // periodic Hann: 0.5 - 0.5 cos(2 pi n / block)
  kSqrtHann = 2,  // its square root (analysis and synthesis together make a Hann)
};

// What the engine writes into a stage input before the stage runs.
enum class StageInputSource : uint32_t {
  kRfftMagnitude = 1,    // |rFFT(windowed block)|: block / 2 + 1 values
  kTimeBlock = 2,        // the windowed block: block values
  kMaskedTimeBlock = 3,  // irFFT(rFFT(windowed block) x the newest spectral mask): block values
  kState = 4,            // recurrent state: the stage's output `state_output` of the previous hop
};

// What a stage output means to the engine.
enum class StageOutputRole : uint32_t {
  kUnused = 0,
  kSpectralMask = 1,  // a gain per rFFT bin (block / 2 + 1 values), floored by the attenuation limit
  kTimeBlock = 2,     // block samples to window, scale and overlap-add (the stream's output)
  kState = 3,         // fed back into a kState input of the same stage next hop
};

struct StageInputBinding {
  StageInputSource source = StageInputSource::kTimeBlock;
  uint32_t state_output = 0;  // kState only: the output of this stage that feeds it
};

struct StreamStage {
  std::string name;
  std::vector<StageInputBinding> inputs;  // one per model input, in the model's order
  std::vector<StageOutputRole> outputs;   // one per model output
};

struct StreamDescription {
  std::string description;  // free text: which model, where from
  uint32_t sample_rate = 0;
  uint32_t block = 0;
  uint32_t hop = 0;
  StreamWindow analysis_window = StreamWindow::kNone;
  StreamWindow synthesis_window = StreamWindow::kNone;
  float output_gain = 1.f;  // times each output block before overlap-add
  std::vector<StreamStage> stages;

  // Algorithmic delay of the framing: block - hop (output sample n is input n - latency).
  uint32_t latency_samples() const { return block - hop; }
  uint32_t bins() const { return block / 2 + 1; }
};

const char* stream_window_name(StreamWindow w);          // "none", "hann", "sqrt_hann"
const char* stage_input_source_name(StageInputSource s);  // "rfft_magnitude", ...
const char* stage_output_role_name(StageOutputRole r);    // "spectral_mask", ...

// Checks the description alone (rates, sizes, names, state pairs, a source for every
// transform) and then against the stages' models (counts, float32, element counts).
Status validate_stream(const StreamDescription& d, const std::vector<const Model*>& stages);

// One line: "16000 Hz, block 512, hop 128 (latency 384), windows none/none, 2 stages: ..."
std::string stream_summary(const StreamDescription& d);

struct StreamFile {
  StreamDescription stream;
  std::vector<std::shared_ptr<Model>> stages;  // validated; constants point into the mapping
};

// Validates every stage model and the description, then writes one file (atomically).
Status save_stream_file(const StreamDescription& d, const std::vector<const Model*>& stages,
                        const std::string& path);
// Refuses anything not a valid streaming file, naming the path and what is wrong; a plain
// model file gives "<path>: not a streaming model: it has no STREAM section (a single
// model; nnrun runs it)".
Result<StreamFile> load_stream_file(const std::string& path);
Result<StreamFile> load_stream_buffer(std::span<const uint8_t> bytes);
// True when the bytes are a .nnapi file with a STREAM section (header and table only).
bool is_stream_file(std::span<const uint8_t> bytes);

// Reads the framing from a TOML description (assets/streams/*.toml; SPEC.md shows the
// keys). Errors name the file and the key.
Result<StreamDescription> parse_stream_toml(const std::string& path);

}  // namespace nn
