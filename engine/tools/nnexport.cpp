// nnexport: any model the engine loads (.nnapi, .tflite, .onnx) -> an ONNX file that other
// runtimes run, in the source model's input/output layout.
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "cli.h"

#include "nn/export/onnx_export.h"
#include "nn/import/import.h"

int main(int argc, char** argv) {
  CLI::App app{
      "nnexport: write a model (.nnapi, .tflite or .onnx) as an ONNX file (opset " +
      std::to_string(nn::kOnnxExportOpset) +
      ", NCHW inside, inputs and outputs in the source model's layout) for ONNX Runtime, OpenCV DNN "
      "and other peers. A quantized model is written as a QDQ graph (QuantizeLinear / DequantizeLinear).\n"
      "Example: nnexport assets/models/selfie_segmentation.tflite -o assets/models/selfie_segmentation.onnx"};
  std::string input, output;
  bool quiet = false;
  app.add_option("model", input, "model to export (.nnapi, .tflite or .onnx)")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", output, "the .onnx file to write")->required();
  app.add_flag("-q,--quiet", quiet, "print only errors");
  NN_PARSE_COMMAND_LINE(app, argc, argv);

  if (std::filesystem::path(output).extension() != ".onnx") {
    std::fprintf(stderr, "nnexport: %s: the output must end in .onnx\n", output.c_str());
    return 2;
  }
  if (std::filesystem::exists(input) && std::filesystem::exists(output) &&
      std::filesystem::equivalent(input, output)) {
    std::fprintf(stderr, "nnexport: %s: refusing to overwrite the input\n", output.c_str());
    return 2;
  }
  auto model = nn::load_model(input);
  if (!model) {
    std::fprintf(stderr, "nnexport: %s\n", nn::tools::with_path(input, model.status().to_string()).c_str());
    return 1;
  }
  nn::Status s = nn::export_onnx(**model, output);
  if (!s.is_ok()) {
    std::fprintf(stderr, "nnexport: %s: %s\n", input.c_str(), s.to_string().c_str());
    return 1;
  }
  if (!quiet) {
    const nn::Model& m = **model;
    std::printf("%s -> %s (%zu IR operations: %s)\n", input.c_str(), output.c_str(), m.operations.size(),
                m.op_summary().c_str());
  }
  return 0;
}
