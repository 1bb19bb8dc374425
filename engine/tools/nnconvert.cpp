// nnconvert: a TFLite or ONNX model -> a .nnapi file; several models plus a stream
// description (--stream) -> one streaming .nnapi file (engine/format/SPEC.md); with
// --quantize int8, post-training quantization calibrated on a folder of images
// (nn/quantize/quantize.h), or of WAV files for a streaming audio model (nn/quantize/stream.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <opencv2/core/utils/logger.hpp>

#include "cli.h"

#include "nn/format/nnapi_file.h"
#include "nn/format/stream_file.h"
#include "nn/import/import.h"
#include "nn/audio/wav.h"
#include "nn/quantize/quantize.h"
#include "nn/quantize/stream.h"
#include "calibration_set.h"
#include "tensor_io.h"

namespace {

struct QuantizeArgs {
  std::string type, calibration, method = "percentile";
  bool per_tensor = false;
  double percentile = 99.99, max_op_error = 0.25, max_op_output_error = 0.01, max_output_error = 0;
  std::string range_margin = "auto", weight_rounding = "nearest";
  bool no_bias_correction = false, no_latency = false;
  size_t limit = 0, error_samples = 8, budget_lookahead = 4, video_frames = 30;
  int threads = 1;
  std::string delegate = "cpu";
  std::vector<uint32_t> keep_float;
};

// The library's options from the command line's, or the exit code of what is wrong.
int quantize_options(const QuantizeArgs& args, nn::quantize::QuantizeOptions* opt) {
  if (args.type != "int8") {
    std::fprintf(stderr, "nnconvert: --quantize %s: only int8 is supported\n", args.type.c_str());
    return 2;
  }
  if (args.calibration.empty()) {
    std::fprintf(stderr, "nnconvert: --quantize needs --calibration DIR (images or audio the model will see)\n");
    return 2;
  }
  if (!std::filesystem::is_directory(args.calibration)) {
    std::fprintf(stderr, "nnconvert: --calibration %s: not a directory\n", args.calibration.c_str());
    return 2;
  }
  auto method = nn::quantize::calibration_method_from_name(args.method);
  if (!method) {
    std::fprintf(stderr, "nnconvert: --calibration-method %s: expected minmax, percentile, entropy or mse\n",
                 args.method.c_str());
    return 2;
  }
  auto rounding = nn::quantize::weight_rounding_from_name(args.weight_rounding);
  if (!rounding) {
    std::fprintf(stderr, "nnconvert: --weight-rounding %s: expected nearest or adaptive\n", args.weight_rounding.c_str());
    return 2;
  }
  opt->weight_rounding = *rounding;
  if (args.error_samples == 0) {
    std::fprintf(stderr, "nnconvert: --error-samples must be at least 1\n");
    return 2;
  }
  opt->method = *method;
  opt->percentile = args.percentile;
  opt->per_channel = !args.per_tensor;
  opt->max_op_error = args.max_op_error;
  opt->max_op_output_error = args.max_op_output_error;
  opt->max_output_error = args.max_output_error;
  opt->bias_correction = !args.no_bias_correction;
  opt->error_samples = args.error_samples;
  opt->budget_lookahead = args.budget_lookahead;
  if (args.range_margin != "auto") {
    char* end = nullptr;
    const double m = std::strtod(args.range_margin.c_str(), &end);
    if (end == args.range_margin.c_str() || *end != '\0' || !(m >= 0)) {
      std::fprintf(stderr, "nnconvert: --range-margin %s: expected auto or a fraction >= 0\n", args.range_margin.c_str());
      return 2;
    }
    opt->range_margin = m;
  }
  opt->threads = args.threads;
  opt->delegates = {args.delegate};
  opt->keep_float = args.keep_float;
  return 0;
}

// Quantizes `model` in place per `args`, printing the per-op report unless quiet.
int quantize(std::shared_ptr<nn::Model>& model, const QuantizeArgs& args, bool quiet) {
  nn::quantize::QuantizeOptions opt;
  if (int rc = quantize_options(args, &opt)) return rc;
  const nn::Model& m = *model;
  if (m.inputs.size() != 1) {
    std::fprintf(stderr, "nnconvert: --quantize calibrates models with one input; this one has %zu inputs\n",
                 m.inputs.size());
    return 2;
  }
  auto set = nn::tools::CalibrationSet::open(args.calibration, args.video_frames);
  if (!set) {
    std::fprintf(stderr, "nnconvert: --calibration: %s\n", set.status().to_string().c_str());
    return 1;
  }
  if (args.limit > 0) set->truncate(args.limit);
  if (set->size() == 0) {
    std::fprintf(stderr, "nnconvert: --calibration %s: no .jpg/.jpeg/.png/.bmp images, .npy tensors or videos\n",
                 args.calibration.c_str());
    return 2;
  }
  if (!quiet && set->videos() > 0)
    std::printf("calibration: %zu samples from %s (frames of %zu videos among them)\n", set->size(),
                args.calibration.c_str(), set->videos());
  auto provider = [&](size_t i, std::vector<nn::Tensor>& inputs) -> nn::Status {
    return set->to_input(i, m, 0, inputs[0].data());
  };
  nn::quantize::QuantizeReport report;
  auto q = nn::quantize::quantize_model(m, set->size(), provider, opt, &report);
  if (!q) {
    std::fprintf(stderr, "nnconvert: quantizing: %s\n", q.status().to_string().c_str());
    return 1;
  }
  if (!quiet) std::printf("%s", report.to_string().c_str());
  auto int8 = std::make_shared<nn::Model>(std::move(*q));
  if (!quiet && !args.no_latency) {
    // Whether the int8 model pays where it will run (this CPU, the session's 1 thread).
    auto latency =
        nn::quantize::compare_latency(model, int8, provider, 21, 1, nn::CpuOptions::from_environment());
    if (latency)
      std::printf("%s", latency->to_string().c_str());
    else
      std::fprintf(stderr, "nnconvert: warning: timing the int8 model against the float one: %s\n",
                   latency.status().to_string().c_str());
  }
  model = std::move(int8);
  return 0;
}

// The WAV files of a folder, sorted by name.
std::vector<std::string> calibration_audio(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (e.is_regular_file() && (ext == ".wav" || ext == ".flac")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Quantizes a streaming model's stages in place per `args`, calibrated on the folder's audio.
int quantize_stream(const nn::StreamDescription& desc, std::vector<std::shared_ptr<nn::Model>>& stages,
                    const QuantizeArgs& args, bool quiet) {
  nn::quantize::QuantizeOptions opt;
  if (int rc = quantize_options(args, &opt)) return rc;
  std::vector<std::string> files = calibration_audio(args.calibration);
  if (args.limit > 0 && files.size() > args.limit) files.resize(args.limit);
  if (files.empty()) {
    std::fprintf(stderr, "nnconvert: --calibration %s: no .wav/.flac files (a streaming audio model calibrates on audio)\n",
                 args.calibration.c_str());
    return 2;
  }
  std::vector<nn::audio::AudioBuffer> clips;
  for (const std::string& f : files) {
    auto clip = nn::audio::read_audio(f);
    if (!clip) {
      std::fprintf(stderr, "nnconvert: %s\n", clip.status().to_string().c_str());
      return 1;
    }
    if (clip->sample_rate != static_cast<int>(desc.sample_rate)) {
      std::fprintf(stderr, "nnconvert: %s: %d Hz, the model takes %d Hz (resample the calibration audio)\n", f.c_str(),
                   clip->sample_rate, static_cast<int>(desc.sample_rate));
      return 2;
    }
    clips.push_back(std::move(*clip));
  }
  auto model = nn::audio::make_stream_model(desc, stages);
  if (!model) {
    std::fprintf(stderr, "nnconvert: %s\n", model.status().to_string().c_str());
    return 1;
  }
  nn::quantize::StreamQuantizeOptions so;
  so.stage = opt;
  nn::quantize::StreamQuantizeReport report;
  auto q = nn::quantize::quantize_stream(*model, clips, so, &report);
  if (!q) {
    std::fprintf(stderr, "nnconvert: quantizing: %s\n", q.status().to_string().c_str());
    return 1;
  }
  if (!quiet) std::printf("%s", report.to_string().c_str());
  for (size_t i = 0; i < stages.size(); ++i) stages[i] = std::make_shared<nn::Model>(*(*q)->stage(i));
  return 0;
}

// Stages from their source files, the framing from the description: one streaming file.
// With --quantize, every stage is quantized on the WAV files of the calibration folder
// run through the float stream (nn/quantize/stream.h).
int convert_stream(const std::vector<std::string>& inputs, const std::string& stream_path, std::string output,
                   const QuantizeArgs& qa, bool quiet) {
  auto desc = nn::parse_stream_toml(stream_path);
  if (!desc) {  // the file is there (checked at parse) but is not a stream description
    std::fprintf(stderr, "nnconvert: %s\n", desc.status().to_string().c_str());
    return 1;
  }
  if (desc->stages.size() != inputs.size()) {
    std::fprintf(stderr, "nnconvert: %s describes %zu stages, %zu models given\n", stream_path.c_str(),
                 desc->stages.size(), inputs.size());
    return 2;
  }
  std::vector<std::shared_ptr<nn::Model>> models;
  std::vector<const nn::Model*> views;
  for (const std::string& in : inputs) {
    auto model = nn::load_model(in);
    if (!model) {
      std::fprintf(stderr, "nnconvert: %s\n", nn::tools::with_path(in, model.status().to_string()).c_str());
      return 1;
    }
    models.push_back(*model);
    views.push_back(models.back().get());
  }
  if (!qa.type.empty()) {
    if (int rc = quantize_stream(*desc, models, qa, quiet)) return rc;
    views.clear();
    for (const auto& m : models) views.push_back(m.get());
  }
  if (output.empty()) output = std::filesystem::path(inputs[0]).replace_extension(".nnapi").string();
  nn::Status s = nn::save_stream_file(*desc, views, output);
  if (!s.is_ok()) {
    std::fprintf(stderr, "nnconvert: %s\n", s.to_string().c_str());
    return 1;
  }
  if (!quiet) {
    std::printf("%zu stages -> %s\n  %s\n", inputs.size(), output.c_str(), nn::stream_summary(*desc).c_str());
    for (size_t i = 0; i < models.size(); ++i)
      std::printf("  stage %zu from %s: %zu operations: %s\n", i + 1, inputs[i].c_str(), models[i]->operations.size(),
                  models[i]->op_summary().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Unreadable calibration images and videos are reported once, by us, not also by OpenCV.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
  CLI::App app{
      "nnconvert: convert a TFLite (.tflite) or ONNX (.onnx) model into nnpipe's .nnapi file.\n"
      "Example: nnconvert assets/models/selfie_segmentation.tflite -o selfie.nnapi\n"
      "Streaming (one file, every stage and the framing):\n"
      "  nnconvert dtln_1.tflite dtln_2.tflite --stream assets/streams/dtln.toml -o dtln.nnapi"};
  std::vector<std::string> inputs;
  std::string input, output, task, color, meaning, stream;
  std::vector<float> mean, stdv;
  bool quiet = false;
  app.add_option("input", inputs,
                 "model to convert (.tflite, .onnx, or a PyTorch NNAPI .pt); with --stream, one per stage in order")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--stream", stream, "stream description (TOML: rate, block, hop, what feeds each stage)")
      ->check(CLI::ExistingFile);
  app.add_option("-o,--output", output, "the .nnapi file to write (default: input with .nnapi)");
  app.add_option("--task", task, "metadata: what the model is for (segmentation, classification, ...)");
  app.add_option("--input-color", color, "metadata: input colour order (RGB or BGR)");
  app.add_option("--mean", mean, "metadata: per-channel mean subtracted from 0..255 pixels")->expected(3);
  app.add_option("--std", stdv, "metadata: per-channel divisor after the mean")->expected(3);
  app.add_option("--output-meaning", meaning, "metadata: what the first output means");
  app.add_flag("-q,--quiet", quiet, "print only errors");
  QuantizeArgs qa;
  app.add_option("--quantize", qa.type, "post-training quantization: int8 (needs --calibration)");
  app.add_option("--calibration", qa.calibration,
                 "folder of calibration images and videos (pre-processed as the tools do per the model's metadata), .npy "
                 "input tensors (the source model's layout), or, with --stream, .wav files run through the stream");
  app.add_option("--calibration-method", qa.method, "minmax, percentile, entropy or mse (default percentile)");
  app.add_option("--percentile", qa.percentile, "the percentile method's coverage (default 99.99)");
  bool per_channel = false;
  auto* per_channel_flag =
      app.add_flag("--per-channel", per_channel, "one scale per output channel for conv filters (the default)");
  app.add_flag("--per-tensor", qa.per_tensor, "one scale per conv filter instead of per output channel")
      ->excludes(per_channel_flag);
  app.add_option("--max-op-error", qa.max_op_error,
                 "ops whose output error quantized alone (relative RMS) exceeds this stay float (default 0.25)");
  app.add_option("--max-op-output-error", qa.max_op_output_error,
                 "ops that alone move the model's output 0 by more than this (relative RMS) stay float (default 0.01)");
  app.add_option("--max-output-error", qa.max_output_error,
                 "the whole int8 model's budget: while its output 0 is further than this from the float model's "
                 "(relative RMS on the error samples), the int8 op costing it most returns to float (default 0: none)");
  app.add_option("--budget-lookahead", qa.budget_lookahead,
                 "per budget step, try this many ops (largest own error first) and return the one that helps "
                 "the model most (default 4; 1: the largest)");
  app.add_flag("--no-bias-correction", qa.no_bias_correction,
               "quantize conv/FC biases as they are, without absorbing the mean shift of their int8 filters");
  app.add_option("--weight-rounding", qa.weight_rounding,
                 "how conv/depthwise/FC filters round to int8: nearest (default) or adaptive (each value down or up, "
                 "whichever leaves the op's output error smallest on as many other calibration samples as --error-samples)");
  app.add_option("--range-margin", qa.range_margin,
                 "headroom for inputs calibration did not see: widen every activation range by this fraction, or auto "
                 "(default): per tensor, by how much its range differs between the calibration set's two halves");
  app.add_option("--error-samples", qa.error_samples,
                 "calibration samples (spread over the set) on which errors are measured (default 8)");
  app.add_option("--calibration-limit", qa.limit, "use at most this many calibration samples (sorted by name)");
  app.add_option("--video-frames", qa.video_frames,
                 "frames taken from each video in the calibration folder, evenly spread (default 30)");
  app.add_option("--keep-float", qa.keep_float, "op indices to keep float");
  app.add_flag(
      "--no-latency", qa.no_latency,
      "do not time the int8 model against the float one on this CPU after quantizing (by default both "
      "run 21 alternating times on the cpu delegate, 1 thread, and the medians are printed)");
  app.add_option("--threads", qa.threads, "threads for the calibration runs (default 1)");
  app.add_option("--calibration-delegate", qa.delegate, "where calibration runs the model: cpu (default) or reference");
  NN_PARSE_COMMAND_LINE(app, argc, argv);
  if (!stream.empty()) return convert_stream(inputs, stream, output, qa, quiet);
  if (inputs.size() != 1) {
    std::fprintf(stderr, "nnconvert: %zu models given: several models make one streaming file only with --stream\n",
                 inputs.size());
    return 2;
  }
  input = inputs[0];

  std::string ext = std::filesystem::path(input).extension().string();
  if (ext != ".tflite" && ext != ".onnx" && ext != ".pt" && !(ext == ".nnapi" && !qa.type.empty())) {
    std::fprintf(stderr, "nnconvert: %s: expected a .tflite, .onnx or .pt file (or .nnapi with --quantize), got '%s'\n",
                 input.c_str(), ext.c_str());
    return 2;
  }
  auto model = nn::load_model(input);
  if (!model) {
    std::fprintf(stderr, "nnconvert: %s\n", nn::tools::with_path(input, model.status().to_string()).c_str());
    return 1;
  }
  nn::Model& m = **model;
  if (!task.empty()) m.metadata.task = task;
  if (!color.empty()) m.metadata.input_color = color;
  if (!mean.empty()) m.metadata.input_mean = mean;
  if (!stdv.empty()) m.metadata.input_std = stdv;
  if (!meaning.empty()) m.metadata.output_meaning = meaning;
  if (!qa.type.empty()) {
    if (int rc = quantize(*model, qa, quiet)) return rc;
  }
  nn::Model& out_model = **model;
  if (output.empty()) output = std::filesystem::path(input).replace_extension(".nnapi").string();
  nn::Status s = nn::save_nnapi_file(out_model, output);
  if (!s.is_ok()) {
    std::fprintf(stderr, "nnconvert: %s\n", nn::tools::with_path(output, s.to_string()).c_str());
    return 1;
  }
  if (!quiet) {
    std::printf("%s -> %s\n", input.c_str(), output.c_str());
    std::printf("  %zu operations: %s\n", out_model.operations.size(), out_model.op_summary().c_str());
    for (size_t i = 0; i < out_model.inputs.size(); ++i) {
      const nn::Operand& o = out_model.operands[out_model.inputs[i]];
      std::printf("  input %zu '%s' %s %s\n", i, o.name.c_str(), std::string(nn::operand_type_name(o.type)).c_str(),
                  nn::dims_to_string(o.dims).c_str());
    }
    for (size_t i = 0; i < out_model.outputs.size(); ++i) {
      const nn::Operand& o = out_model.operands[out_model.outputs[i]];
      std::printf("  output %zu '%s' %s %s\n", i, o.name.c_str(), std::string(nn::operand_type_name(o.type)).c_str(),
                  nn::dims_to_string(o.dims).c_str());
    }
  }
  return 0;
}
