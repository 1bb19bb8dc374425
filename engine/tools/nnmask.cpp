// nnmask: run a segmentation model on one image and write the mask (and a composite).
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "cli.h"
#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "tensor_io.h"

int main(int argc, char** argv) {
  CLI::App app{
      "nnmask: segment one image with a person-segmentation model.\n"
      "Writes the mask (8-bit PNG at the image's size) and, with --composite, the image with\n"
      "its background blurred.\n"
      "Example: nnmask assets/models/selfie_segmentation.nnapi assets/media/messi5.jpg -o mask.png"};
  std::string model_path, image_path, mask_path, composite_path, delegate = "auto";
  int threads = 2;
  app.add_option("model", model_path, "segmentation model (.nnapi, .tflite or .onnx)")->required()->check(CLI::ExistingFile);
  app.add_option("image", image_path, "image to segment")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", mask_path, "mask PNG to write")->required();
  app.add_option("--composite", composite_path, "also write the image with its background blurred");
  app.add_option("-d,--delegate", delegate, "auto, cpu, vulkan, nnapi or reference");
  app.add_option("-t,--threads", threads, "CPU threads")->check(CLI::Range(1, 64));
  NN_PARSE_COMMAND_LINE(app, argc, argv);
  // OpenCV's own "[ WARN ]" lines (imread on a missing file, ...) would repeat, in its words,
  // the error this tool reports; errors still come back as return values.
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);

  auto model = nn::load_model(model_path);
  if (!model) {
    std::fprintf(stderr, "nnmask: %s\n", nn::tools::with_path(model_path, model.status().to_string()).c_str());
    return nn::tools::kExitFailed;
  }
  const nn::Model& m = **model;
  const nn::Operand& out = m.operands[m.outputs.at(0)];
  if (out.type != nn::OperandType::TENSOR_FLOAT32 || out.dims.size() != 4 || out.dims[3] != 1) {
    std::fprintf(stderr, "nnmask: %s: output 0 is %s, not a [1,H,W,1] mask\n", model_path.c_str(),
                 nn::dims_to_string(out.dims).c_str());
    return nn::tools::kExitFailed;
  }
  nn::SessionOptions options;
  options.cpu = nn::CpuOptions::from_environment();
  options.delegates = {delegate};
  options.threads = threads;
  auto session = nn::Session::open(*model, options);
  if (!session) {
    std::fprintf(stderr, "nnmask: %s\n", session.status().to_string().c_str());
    return nn::tools::kExitFailed;
  }
  if (nn::Status s = nn::tools::image_to_input(image_path, m, 0, (*session)->input_data(0)); !s.is_ok()) {
    std::fprintf(stderr, "nnmask: %s\n", nn::tools::with_path(image_path, s.message()).c_str());
    return nn::tools::kExitFailed;
  }
  if (nn::Status s = (*session)->run(); !s.is_ok()) {
    std::fprintf(stderr, "nnmask: %s\n", s.to_string().c_str());
    return nn::tools::kExitFailed;
  }
  cv::Mat image = cv::imread(image_path, cv::IMREAD_COLOR);
  cv::Mat small(static_cast<int>(out.dims[1]), static_cast<int>(out.dims[2]), CV_32F,
                const_cast<float*>((*session)->output_f32(0)));
  cv::Mat mask;
  cv::resize(small, mask, image.size(), 0, 0, cv::INTER_LINEAR);
  cv::Mat mask8;
  mask.convertTo(mask8, CV_8U, 255.0);
  if (!cv::imwrite(mask_path, mask8)) {
    std::fprintf(stderr, "nnmask: cannot write %s\n", mask_path.c_str());
    return nn::tools::kExitFailed;
  }
  double mean = cv::mean(mask)[0];
  std::printf("%s: mask %dx%d -> %s (mean %.3f, %.2f ms on %s)\n", image_path.c_str(), image.cols, image.rows,
              mask_path.c_str(), mean, (*session)->last_run_ms(), delegate.c_str());
  if (!composite_path.empty()) {
    cv::Mat blurred, fg, bg, alpha3;
    cv::GaussianBlur(image, blurred, cv::Size(0, 0), 12);
    cv::cvtColor(mask, alpha3, cv::COLOR_GRAY2BGR);
    image.convertTo(fg, CV_32FC3);
    blurred.convertTo(bg, CV_32FC3);
    cv::Mat comp = fg.mul(alpha3) + bg.mul(cv::Scalar(1, 1, 1) - alpha3);
    comp.convertTo(comp, CV_8UC3);
    if (!cv::imwrite(composite_path, comp)) {
      std::fprintf(stderr, "nnmask: cannot write %s\n", composite_path.c_str());
      return nn::tools::kExitFailed;
    }
    std::printf("composite -> %s\n", composite_path.c_str());
  }
  return 0;
}
