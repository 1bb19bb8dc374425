// Small OpenCV helpers shared by the plugin's C++ cores.
#pragma once

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "mask_sampling.h"  // mask_to_grid: a mask back onto the frame

namespace nn::plugins {

// Averages factor x factor blocks (2 or 4) of a CV_8UC4 image in one pass (AVX2), into
// (cols / factor) x (rows / factor); a trailing partial block is left out. False (dst
// untouched) for other types or factors, or without AVX2.
bool reduce_rgba(const cv::Mat& src, cv::Mat& dst, int factor);

// Shrinks with area averaging, fast: while the image is more than twice the target, block
// averages (4-channel: reduce_rgba, by 4 when the target allows) or a bilinear resize to
// exactly half size (which averages 2x2 blocks, like INTER_AREA, at a fraction of
// INTER_AREA's cost on non-integer factors); INTER_AREA does the rest, or INTER_LINEAR
// with final = cv::INTER_LINEAR where a little aliasing does not matter (the remaining
// factor is under 2; 720p -> 427x240: 0.9 instead of 4.0 ms).
void shrink_area(const cv::Mat& src, cv::Mat& dst, cv::Size target, int final = cv::INTER_AREA);

}  // namespace nn::plugins
