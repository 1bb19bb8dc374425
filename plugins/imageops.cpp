// Fast block-average reduction of 4-channel frames (see imageops.h).
#include "imageops.h"

#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nn::plugins {

namespace {

#if defined(__x86_64__)
bool avx2_available() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// Averages horizontally adjacent pixel pairs of 16 RGBA pixels (a: 0..7, b: 8..15) into 8.
__attribute__((target("avx2"), always_inline)) inline __m256i pair_average(__m256i a, __m256i b) {
  const __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0x88));
  const __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0xDD));
  // Lanes hold pairs [0,1 | 4,5] and [2,3 | 6,7] of the 8 results: restore their order.
  return _mm256_permute4x64_epi64(_mm256_avg_epu8(even, odd), 0xD8);
}

__attribute__((target("avx2"), always_inline)) inline __m256i load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// One output row of a factor-2 or factor-4 reduction: rows[0..factor) are the source rows.
// Pixels past the last multiple of 8 outputs are averaged exactly in scalar code.
__attribute__((target("avx2"))) void reduce_row(const uint8_t* const* rows, int factor, int out_w, uint8_t* out) {
  int x = 0;
  if (factor == 2) {
    for (; x + 8 <= out_w; x += 8) {
      const uint8_t *r0 = rows[0] + 8 * x, *r1 = rows[1] + 8 * x;
      const __m256i v0 = _mm256_avg_epu8(load(r0), load(r1));
      const __m256i v1 = _mm256_avg_epu8(load(r0 + 32), load(r1 + 32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * x), pair_average(v0, v1));
    }
  } else {
    for (; x + 8 <= out_w; x += 8) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i) {
        const size_t at = 16 * size_t(x) + 32 * i;
        v[i] = _mm256_avg_epu8(_mm256_avg_epu8(load(rows[0] + at), load(rows[1] + at)),
                               _mm256_avg_epu8(load(rows[2] + at), load(rows[3] + at)));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * x),
                          pair_average(pair_average(v[0], v[1]), pair_average(v[2], v[3])));
    }
  }
  const int n = factor * factor;
  for (; x < out_w; ++x)
    for (int c = 0; c < 4; ++c) {
      int sum = 0;
      for (int dy = 0; dy < factor; ++dy)
        for (int dx = 0; dx < factor; ++dx) sum += rows[dy][4 * (factor * x + dx) + c];
      out[4 * x + c] = static_cast<uint8_t>((sum + n / 2) / n);
    }
}
#endif

}  // namespace

bool reduce_rgba(const cv::Mat& src, cv::Mat& dst, int factor) {
#if defined(__x86_64__)
  if (src.type() != CV_8UC4 || (factor != 2 && factor != 4) || !avx2_available()) return false;
  const int out_w = src.cols / factor, out_h = src.rows / factor;
  if (out_w < 1 || out_h < 1) return false;
  cv::Mat out(out_h, out_w, CV_8UC4);
  for (int y = 0; y < out_h; ++y) {
    const uint8_t* rows[4];
    for (int i = 0; i < factor; ++i) rows[i] = src.ptr<uint8_t>(factor * y + i);
    reduce_row(rows, factor, out_w, out.ptr<uint8_t>(y));
  }
  dst = out;
  return true;
#else
  (void)src, (void)dst, (void)factor;
  return false;
#endif
}

namespace {
thread_local ShrinkMemo* active_memo = nullptr;
}  // namespace

ShrinkMemo::ShrinkMemo() : outer_(active_memo) { active_memo = this; }
ShrinkMemo::~ShrinkMemo() { active_memo = outer_; }
ShrinkMemo* ShrinkMemo::active() { return active_memo; }

const cv::Mat* ShrinkMemo::find(const cv::Mat& src, int factor) const {
  for (const Step& s : steps_)
    if (s.data == src.data && s.size == src.size() && s.step == src.step[0] && s.type == src.type() &&
        s.factor == factor) {
      ++hits_;
      return &s.result;
    }
  return nullptr;
}

void ShrinkMemo::add(const cv::Mat& src, int factor, const cv::Mat& result) {
  steps_.push_back({src.data, src.size(), src.step[0], src.type(), factor, result});
}

int work_factor(int frame_width) {
  // An integer factor keeps the block averages (and INTER_AREA) on their fast paths.
  constexpr double kWorkWidth = 480.0;
  return std::max(1, static_cast<int>(std::ceil(frame_width / kWorkWidth - 0.01)));
}

cv::Size work_size(cv::Size frame) {
  const double f = work_factor(frame.width);
  return cv::Size(std::max(1, static_cast<int>(std::lround(frame.width / f))),
                  std::max(1, static_cast<int>(std::lround(frame.height / f))));
}

void make_work_image(const cv::Mat& frame, cv::Mat& dst) {
  shrink_area(frame, dst, work_size(frame.size()), cv::INTER_LINEAR);
}

void make_yuv_work_image(const cv::Mat& y, const cv::Mat& u, const cv::Mat& v, cv::Mat& dst) {
  const cv::Size ws = work_size(y.size());
  cv::Mat planes[3];
  shrink_area(y, planes[0], ws, cv::INTER_LINEAR);
  if (v.empty()) {
    cv::Mat uv;
    shrink_area(u, uv, ws, cv::INTER_LINEAR);
    cv::split(uv, planes + 1);
  } else {
    shrink_area(u, planes[1], ws, cv::INTER_LINEAR);
    shrink_area(v, planes[2], ws, cv::INTER_LINEAR);
  }
  cv::merge(planes, 3, dst);
}

void shrink_area(const cv::Mat& src, cv::Mat& dst, cv::Size target, int final) {
  if (src.cols <= target.width || src.rows <= target.height) {
    cv::resize(src, dst, target, 0, 0, cv::INTER_LINEAR);
    return;
  }
  ShrinkMemo* memo = ShrinkMemo::active();
  cv::Mat cur = src, smaller;
  while (cur.cols >= 2 * target.width && cur.rows >= 2 * target.height && cur.cols >= 2 && cur.rows >= 2) {
    // 4-channel frames: block averages in one pass over the source (two halvings at once
    // when the target allows); others: a bilinear resize to exactly half size.
    const int factor = cur.cols >= 4 * target.width && cur.rows >= 4 * target.height ? 4 : 2;
    if (const cv::Mat* done = memo ? memo->find(cur, factor) : nullptr) {
      cur = *done;
      continue;
    }
    if (!reduce_rgba(cur, smaller, factor))
      cv::resize(cur, smaller, cv::Size(cur.cols / 2, cur.rows / 2), 0, 0, cv::INTER_LINEAR);
    // Keyed by the factor asked for: the same source and factor always take the same step.
    if (memo) memo->add(cur, factor, smaller);
    cur = smaller;
    smaller = cv::Mat();
  }
  if (cur.size() == target) {
    if (cur.data == src.data)
      src.copyTo(dst);
    else
      dst = cur;
    return;
  }
  cv::resize(cur, dst, target, 0, 0, final);
}

}  // namespace nn::plugins
