// nnsegment's front end alone: one RGBA frame shrunk to the selfie model's 256x256 input
// with each sampling, as the element does it (MediaPipe's: nn::image::resample; area: the
// plugin's shrink_area), median of --runs, one OpenCV thread.
//   build/bench/nnfrontend [--runs 50] [--sizes 1280x720,1920x1080,3840x2160]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <opencv2/core.hpp>

#include "imageops.h"
#include "nn/image/preprocess.h"

namespace {

template <typename F>
double median_ms(int runs, F&& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nnsegment's front end: frame -> 256x256 model input, per sampling"};
  int runs = 50;
  std::string sizes = "1280x720,1920x1080,3840x2160";
  app.add_option("--runs", runs, "timed runs per size")->check(CLI::Range(1, 100000));
  app.add_option("--sizes", sizes, "WxH,... frame sizes");
  CLI11_PARSE(app, argc, argv);
  cv::setNumThreads(1);
  std::stringstream list(sizes);
  for (std::string item; std::getline(list, item, ',');) {
    int w = 0, h = 0;
    if (std::sscanf(item.c_str(), "%dx%d", &w, &h) != 2 || w < 2 || h < 2) {
      std::fprintf(stderr, "nnfrontend: --sizes: \"%s\" is not WxH\n", item.c_str());
      return 2;
    }
    cv::Mat frame(h, w, CV_8UC4), out(256, 256, CV_8UC4), small;
    cv::randu(frame, 0, 256);
    const nn::image::ImageView view{frame.data, w, h, frame.step[0], 4};
    const double mp = median_ms(runs, [&] {
      (void)nn::image::resample(view, nn::image::Sampling::kMediaPipe, 256, 256, out.data, out.step[0]);
    });
    const double area = median_ms(runs, [&] { nn::plugins::shrink_area(frame, small, cv::Size(256, 256)); });
    std::printf("%5dx%-5d RGBA -> 256x256: mediapipe %.2f ms, area %.2f ms\n", w, h, mp, area);
  }
  return 0;
}
