// The mask's way back to the frame: resampling a model-resolution mask onto frame pixels
// through GstNnMaskMeta's rect. nnsegment's output-mode=mask/alpha and nnbackground's
// compositor both go through it, so the picture and the mask output agree.
//
// For a stretched input (the rect is the frame) it is exactly what MediaPipe's
// TensorsToSegmentationCalculator does on the CPU for confidence masks: cv::resize with
// INTER_LINEAR, pixel centres aligned ((x + 0.5) * in / out - 0.5), values kept as floats.
// With MediaPipe's front end (nn/image/preprocess.h, Sampling::kMediaPipe) nnsegment's
// masks are then MediaPipe's own (tests/plugins/fidelity_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace nn::plugins {

// Resamples a float mask that covers the rectangle (rx, ry, rw, rh) of a fw x fh frame
// (GstNnMaskMeta's mapping) onto a grid of `out` cells spanning the frame. Bilinear
// between cell centres. When the frame lies inside the rectangle (stretch, letterbox),
// cells that see no frame pixel -- letterbox padding -- are never read: the frame's own
// border cells repeat instead. A rectangle smaller than the frame leaves 0 outside it.
inline void mask_to_grid(const cv::Mat& mask, double rx, double ry, double rw, double rh, int fw, int fh,
                         cv::Size out, cv::Mat& dst) {
  const double kx = mask.cols / rw, ky = mask.rows / rh;  // mask cells per frame pixel
  const bool covers = rx <= 0.5 && ry <= 0.5 && rx + rw >= fw - 0.5 && ry + rh >= fh - 0.5;
  cv::Rect cells(0, 0, mask.cols, mask.rows);
  if (covers) {
    // Cells whose area overlaps the frame; 1e-6 keeps exact boundaries from adding a cell.
    const int x0 = std::clamp(static_cast<int>(std::floor(-rx * kx + 1e-6)), 0, mask.cols - 1);
    const int y0 = std::clamp(static_cast<int>(std::floor(-ry * ky + 1e-6)), 0, mask.rows - 1);
    const int x1 = std::clamp(static_cast<int>(std::ceil((fw - rx) * kx - 1e-6)), x0 + 1, mask.cols);
    const int y1 = std::clamp(static_cast<int>(std::ceil((fh - ry) * ky - 1e-6)), y0 + 1, mask.rows);
    cells = cv::Rect(x0, y0, x1 - x0, y1 - y0);
  }
  // The common case, a mask stretched over exactly the frame (nnsegment's resize=stretch):
  // the mapping below is cv::resize's own, at a fifth of warpAffine's cost.
  if (std::abs(rx) < 1e-6 && std::abs(ry) < 1e-6 && std::abs(rw - fw) < 1e-6 && std::abs(rh - fh) < 1e-6) {
    cv::resize(mask, dst, out, 0, 0, cv::INTER_LINEAR);
    return;
  }
  // grid x -> frame x (edges) -> mask u (centres): u = ((x + .5) * fw / out.w - rx) * kx - .5
  const double sx = static_cast<double>(fw) / out.width, sy = static_cast<double>(fh) / out.height;
  const cv::Matx23d inv(sx * kx, 0, (0.5 * sx - rx) * kx - 0.5 - cells.x,  //
                        0, sy * ky, (0.5 * sy - ry) * ky - 0.5 - cells.y);
  cv::warpAffine(mask(cells), dst, cv::Mat(inv), out, cv::INTER_LINEAR | cv::WARP_INVERSE_MAP,
                 covers ? cv::BORDER_REPLICATE : cv::BORDER_CONSTANT, cv::Scalar(0));
}

}  // namespace nn::plugins
