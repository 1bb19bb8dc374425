// nnconvert: a TFLite or ONNX model -> a .nnapi file; several models plus a stream
// description (--stream) -> one streaming .nnapi file (engine/format/SPEC.md).
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "nn/format/nnapi_file.h"
#include "nn/format/stream_file.h"
#include "nn/import/import.h"

namespace {

// Stages from their source files, the framing from the description: one streaming file.
int convert_stream(const std::vector<std::string>& inputs, const std::string& stream_path, std::string output,
                   bool quiet) {
  auto desc = nn::parse_stream_toml(stream_path);
  if (!desc) {
    std::fprintf(stderr, "nnconvert: %s\n", desc.status().to_string().c_str());
    return 2;
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
      std::fprintf(stderr, "nnconvert: %s: %s\n", in.c_str(), model.status().to_string().c_str());
      return 1;
    }
    models.push_back(*model);
    views.push_back(models.back().get());
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
      ->required();
  app.add_option("--stream", stream, "stream description (TOML: rate, block, hop, what feeds each stage)");
  app.add_option("-o,--output", output, "the .nnapi file to write (default: input with .nnapi)");
  app.add_option("--task", task, "metadata: what the model is for (segmentation, classification, ...)");
  app.add_option("--input-color", color, "metadata: input colour order (RGB or BGR)");
  app.add_option("--mean", mean, "metadata: per-channel mean subtracted from 0..255 pixels")->expected(3);
  app.add_option("--std", stdv, "metadata: per-channel divisor after the mean")->expected(3);
  app.add_option("--output-meaning", meaning, "metadata: what the first output means");
  app.add_flag("-q,--quiet", quiet, "print only errors");
  CLI11_PARSE(app, argc, argv);
  if (!stream.empty()) return convert_stream(inputs, stream, output, quiet);
  if (inputs.size() != 1) {
    std::fprintf(stderr, "nnconvert: %zu models given: several models make one streaming file only with --stream\n",
                 inputs.size());
    return 2;
  }
  input = inputs[0];

  std::string ext = std::filesystem::path(input).extension().string();
  if (ext != ".tflite" && ext != ".onnx" && ext != ".pt") {
    std::fprintf(stderr, "nnconvert: %s: expected a .tflite, .onnx or .pt file, got '%s'\n", input.c_str(),
                 ext.c_str());
    return 2;
  }
  auto model = nn::load_model(input);
  if (!model) {
    std::fprintf(stderr, "nnconvert: %s: %s\n", input.c_str(), model.status().to_string().c_str());
    return 1;
  }
  nn::Model& m = **model;
  if (!task.empty()) m.metadata.task = task;
  if (!color.empty()) m.metadata.input_color = color;
  if (!mean.empty()) m.metadata.input_mean = mean;
  if (!stdv.empty()) m.metadata.input_std = stdv;
  if (!meaning.empty()) m.metadata.output_meaning = meaning;
  if (output.empty()) output = std::filesystem::path(input).replace_extension(".nnapi").string();
  nn::Status s = nn::save_nnapi_file(m, output);
  if (!s.is_ok()) {
    std::fprintf(stderr, "nnconvert: %s: %s\n", output.c_str(), s.to_string().c_str());
    return 1;
  }
  if (!quiet) {
    std::printf("%s -> %s\n", input.c_str(), output.c_str());
    std::printf("  %zu operations: %s\n", m.operations.size(), m.op_summary().c_str());
    for (size_t i = 0; i < m.inputs.size(); ++i) {
      const nn::Operand& o = m.operands[m.inputs[i]];
      std::printf("  input %zu '%s' %s %s\n", i, o.name.c_str(), std::string(nn::operand_type_name(o.type)).c_str(),
                  nn::dims_to_string(o.dims).c_str());
    }
    for (size_t i = 0; i < m.outputs.size(); ++i) {
      const nn::Operand& o = m.operands[m.outputs[i]];
      std::printf("  output %zu '%s' %s %s\n", i, o.name.c_str(), std::string(nn::operand_type_name(o.type)).c_str(),
                  nn::dims_to_string(o.dims).c_str());
    }
  }
  return 0;
}
