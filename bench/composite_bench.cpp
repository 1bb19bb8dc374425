// nncomposite: nnbackground's compositing alone (plugins/compositor.cpp), timed per mode,
// frame size and OpenCV thread count, stage by stage. The frame is messi5.jpg scaled to
// cover the size (a real photo: the guided filter and the blur see real edges), the mask a
// soft ellipse at the selfie model's 256x256.
//
//   build/bench/nncomposite [--sizes 720,1080] [--runs 60] [--threads 1,2] [--image messi5.jpg]
//
// Prints per row the median and p90 wall time of process() and the calling thread's CPU
// time per stage (with 1 thread that is all the work; with more, cv::parallel_for_'s
// helpers run part of the alpha and blend elsewhere).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "compositor.h"

namespace {

using nn::plugins::BackgroundMode;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5)];
}

struct Mode {
  const char* name;
  BackgroundMode mode;
  bool refine;
  bool fast = false;  // CompositorSettings::fast, every frame (the blur redone every third)
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nncomposite: nnbackground's compositor timed per stage"};
  std::vector<int> sizes{720, 1080}, threads{1, 2};
  int runs = 60;
  std::string image = "assets/media/messi5.jpg";
  app.add_option("--sizes", sizes, "frame heights (16:9)")->delimiter(',');
  app.add_option("--threads", threads, "OpenCV thread counts")->delimiter(',');
  app.add_option("--runs", runs, "timed runs per row (after 5 warm-up runs)")->check(CLI::Range(1, 100000));
  app.add_option("--image", image, "the frame's picture");
  CLI11_PARSE(app, argc, argv);

  const cv::Mat photo = cv::imread(image, cv::IMREAD_COLOR);
  if (photo.empty()) {
    std::fprintf(stderr, "nncomposite: cannot read %s\n", image.c_str());
    return 2;
  }
  cv::Mat mask(256, 256, CV_32F, cv::Scalar(0));
  cv::ellipse(mask, cv::Point(128, 150), cv::Size(60, 110), 0, 0, 360, cv::Scalar(1), cv::FILLED);
  cv::GaussianBlur(mask, mask, cv::Size(0, 0), 3);

  const Mode modes[] = {{"blur", BackgroundMode::kBlur, true},
                        {"blur refine=false", BackgroundMode::kBlur, false},
                        {"blur fast", BackgroundMode::kBlur, true, true},
                        {"color", BackgroundMode::kColor, true},
                        {"image", BackgroundMode::kImage, true}};
  std::printf("| size | mode | threads | wall p50 ms | wall p90 ms | work | alpha | background | blend (CPU ms, calling thread) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int h : sizes) {
    const int w = (h * 16 / 9 + 1) / 2 * 2;
    cv::Mat rgba;
    nn::plugins::cover_and_convert(photo, {3, 2, 1, 0, -1}, cv::Size(w, h), {4, 0, 1, 2, 3}, rgba);
    nn::plugins::MaskView mv;
    mv.width = mv.height = 256;
    mv.stride = 256 * sizeof(float);
    mv.data = mask.data;
    mv.frame_width = w, mv.frame_height = h;
    mv.rect_w = w, mv.rect_h = h;
    for (const Mode& m : modes) {
      for (int t : threads) {
        cv::setNumThreads(t);
        nn::plugins::Compositor comp;
        if (m.mode == BackgroundMode::kImage && !comp.set_image(image)) return 2;
        nn::plugins::CompositorSettings s;
        s.mode = m.mode;
        s.refine = m.refine;
        s.fast = m.fast;
        std::vector<double> wall, work, alpha, bg, blend;
        cv::Mat frame;
        for (int i = 0; i < runs + 5; ++i) {
          rgba.copyTo(frame);  // process() composites in place
          const auto t0 = std::chrono::steady_clock::now();
          comp.process(frame, {4, 0, 1, 2, 3}, mv, s);
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          if (i < 5) continue;
          const auto& st = comp.last_stage_times();
          wall.push_back(ms), work.push_back(st.work_ms), alpha.push_back(st.alpha_ms);
          bg.push_back(st.background_ms), blend.push_back(st.blend_ms);
        }
        std::printf("| %dx%d | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", w, h, m.name, t,
                    percentile(wall, 50), percentile(wall, 90), percentile(work, 50), percentile(alpha, 50),
                    percentile(bg, 50), percentile(blend, 50));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
