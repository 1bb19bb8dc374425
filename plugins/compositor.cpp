// Compositor: mask upsampling with a fast guided filter, background blur at low resolution,
// and the full-resolution blend.
#include "compositor.h"
#include "cpu_time.h"
#include "imageops.h"

#include <algorithm>
#include <atomic>
#include <thread>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <vector>

#include <opencv2/core/hal/intrin.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace nn::plugins {

namespace {

// Guided filter window: at least this many frame pixels, and wide enough to span the
// model's soft edge (a few mask cells). Its regularization (luma in 0..1): a smaller eps
// follows luma edges more closely but also copies texture into the alpha.
constexpr double kGuidedMinRadius = 8.0;
constexpr double kGuidedCellsRadius = 2.5;
constexpr double kGuidedEps = 1e-3;
// The guided filter puts a step at the luma edge but leaves both sides a little grey (its
// output is a box-smoothed mask in flat regions); a contrast gain around 0.5 turns that
// into a crisp edge. Measured on a disc behind a 24x18 mask: half-transparent pixels
// 8700 (bilinear) -> 12200 (guided filter alone) -> 1100 (guided filter + gain 2).
constexpr float kRefineGain = 2.f;

int gray_code(const PackedLayout& l) {
  const bool rgb = l.r == 0;
  if (l.channels == 4) return rgb ? cv::COLOR_RGBA2GRAY : cv::COLOR_BGRA2GRAY;
  return rgb ? cv::COLOR_RGB2GRAY : cv::COLOR_BGR2GRAY;
}

// out = q + (p - q) * a / 255, rounded the way pmulhrsw does it (the SIMD rows below):
// ((p - q) * 128 * y + 2^14) >> 15 with y = a + (a >> 7), 0..256. y / 256 is within half a
// level of a / 255 and exact at 0 and 255, so a = 255 gives p and a = 0 gives q.
inline uint8_t blend_value(int p, int q, int a) {
  const int y = a + (a >> 7);
  return static_cast<uint8_t>(q + (((p - q) * 128 * y + 16384) >> 15));
}
inline void blend_byte(uint8_t& p, uint8_t q, uint8_t a) { p = blend_value(p, q, a); }

// p[i] = blend_value(p[i], q[i], a[i]) over a row of bytes (a plane of a YUV frame, or a
// packed row with its alpha repeated per channel), with OpenCV's universal intrinsics:
// (p * y + q * (256 - y) + 128) >> 8 in 16-bit lanes, which is blend_value's arithmetic
// (q + floor(((p - q) * y + 128) / 256)) and never overflows (a convex combination of
// bytes times 256, plus 128).
void blend_plane_row(uint8_t* p, const uint8_t* q, const uint8_t* a, int n) {
  int i = 0;
#if CV_SIMD
  using namespace cv;
  const v_uint16 full = vx_setall_u16(256), half = vx_setall_u16(128);
  for (; i + v_uint8::nlanes <= n; i += v_uint8::nlanes) {
    v_uint16 p0, p1, q0, q1, a0, a1;
    v_expand(vx_load(p + i), p0, p1);
    v_expand(vx_load(q + i), q0, q1);
    v_expand(vx_load(a + i), a0, a1);
    a0 = a0 + (a0 >> 7);
    a1 = a1 + (a1 >> 7);
    const v_uint16 r0 = (v_mul_wrap(p0, a0) + v_mul_wrap(q0, full - a0) + half) >> 8;
    const v_uint16 r1 = (v_mul_wrap(p1, a1) + v_mul_wrap(q1, full - a1) + half) >> 8;
    v_store(p + i, v_pack(r0, r1));
  }
#endif
  for (; i < n; ++i) blend_byte(p[i], q[i], a[i]);
}

// A 4-channel pixel's luma x 128, in integers (pmaddubsw weights, 0.299 / 0.587 / 0.114 as
// 38 / 75 / 15 of 128): the alpha of the fast guided filter needs no more precision.
constexpr int kLumaR = 38, kLumaG = 75, kLumaB = 15;
inline int luma128(const uint8_t* px, const PackedLayout& l) {
  return kLumaR * px[l.r] + kLumaG * px[l.g] + kLumaB * px[l.b];
}
// alpha * 255 = A * luma + B (luma 0..255), clamped and truncated.
inline uint8_t alpha_from_luma128(int l128, const float* ab) {
  const float v = ab[0] * (l128 * (1.f / 128.f)) + ab[1];
  return static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
}

// The AVX2/FMA row functions below (alpha, 2x upsampling, blend); elsewhere OpenCV and the
// scalar loops do the same work.
bool simd_rows_available() {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2;
#else
  return false;
#endif
}

// alpha[x] = clamp(A * luma[x] + B) with (A, B) = ab[x >> shift]: the coefficients serve
// blocks of 2 (shift 1) or 4 (shift 2) pixels each way.
inline void alpha_row_scalar(const uint8_t* l, const float* ab, uint8_t* out, int from, int width, int shift) {
  for (int x = from; x < width; ++x) {
    const float v = ab[2 * (x >> shift)] * l[x] + ab[2 * (x >> shift) + 1];
    out[x] = static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
  }
}
#if defined(__x86_64__)
// The A and B of 8 pixels from x on (x a multiple of 8): 4 coefficient pairs (shift 1) or 2
// (shift 2), each repeated over its pixels.
__attribute__((target("avx2"), always_inline)) inline void coefficients8(const float* ab, int x, int shift,
                                                                          __m256* a, __m256* b) {
  if (shift == 1) {
    const __m256 pairs = _mm256_loadu_ps(ab + x);
    *a = _mm256_permutevar8x32_ps(pairs, _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6));
    *b = _mm256_permutevar8x32_ps(pairs, _mm256_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7));
  } else {
    const __m256 pairs = _mm256_castps128_ps256(_mm_loadu_ps(ab + x / 2));
    *a = _mm256_permutevar8x32_ps(pairs, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2));
    *b = _mm256_permutevar8x32_ps(pairs, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
  }
}

__attribute__((target("avx2,fma"))) void alpha_row_avx2(const uint8_t* l, const float* ab, uint8_t* out, int width,
                                                        int shift) {
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.f);
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    __m256 ca, cb;
    coefficients8(ab, x, shift, &ca, &cb);
    const __m256 luma =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(l + x))));
    __m256 v = _mm256_fmadd_ps(ca, luma, cb);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i i32 = _mm256_cvttps_epi32(v);  // truncation, as the scalar cast
    const __m128i i16 = _mm_packus_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), _mm_packus_epi16(i16, i16));
  }
  alpha_row_scalar(l, ab, out, x, width, shift);
}
// The luma weights of `l` as pmaddubsw's per-byte multipliers of a 4-byte pixel.
__attribute__((target("avx2"), always_inline)) inline __m256i luma_weights(const PackedLayout& l) {
  uint8_t w[4] = {0, 0, 0, 0};
  w[l.r] = kLumaR, w[l.g] = kLumaG, w[l.b] = kLumaB;
  return _mm256_set1_epi32(static_cast<int>(w[0] | w[1] << 8 | w[2] << 16 | static_cast<uint32_t>(w[3]) << 24));
}
// The alphas of 8 packed 4-byte pixels (int32 lanes, 0..255): luma in two integer
// multiply-adds, then clamp(A * luma + B) with (A, B) = ab[x / 2] (4 coefficient pairs,
// half-resolution). The same arithmetic as alpha_from_luma128.
__attribute__((target("avx2,fma"), always_inline)) inline __m256i alpha8(__m256i px, __m256i weights,
                                                                        const float* ab, int x, int shift) {
  const __m256i l128 = _mm256_madd_epi16(_mm256_maddubs_epi16(px, weights), _mm256_set1_epi16(1));
  const __m256 luma = _mm256_mul_ps(_mm256_cvtepi32_ps(l128), _mm256_set1_ps(1.f / 128.f));
  __m256 ca, cb;
  coefficients8(ab, x, shift, &ca, &cb);
  __m256 a = _mm256_fmadd_ps(ca, luma, cb);
  a = _mm256_min_ps(_mm256_max_ps(a, _mm256_setzero_ps()), _mm256_set1_ps(255.f));
  return _mm256_cvttps_epi32(a);
}

// The same for a 4-channel frame row, its luma computed on the fly: no frame-sized luma
// image is written and read back.
__attribute__((target("avx2,fma"))) void alpha_row_rgba_avx2(const uint8_t* px, const PackedLayout& layout,
                                                             const float* ab, uint8_t* out, int width, int shift) {
  const __m256i weights = luma_weights(layout);
  int x = 0;
  for (; x + 8 <= width; x += 8) {
    const __m256i i32 =
        alpha8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + 4 * x)), weights, ab, x, shift);
    const __m128i i16 = _mm_packus_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), _mm_packus_epi16(i16, i16));
  }
  for (; x < width; ++x) out[x] = alpha_from_luma128(luma128(px + 4 * x, layout), ab + 2 * (x >> shift));
}
#endif
void alpha_row(const uint8_t* l, const float* ab, uint8_t* out, int width, int shift) {
#if defined(__x86_64__)
  if (simd_rows_available()) return alpha_row_avx2(l, ab, out, width, shift);
#endif
  alpha_row_scalar(l, ab, out, 0, width, shift);
}

// One row of 4-channel pixels blended over the background row q, 8 pixels per step, each
// pixel's alpha computed from its own luma on the way (alpha8): the frame is read once and
// no alpha image is written. The alpha is widened to each channel's 16-bit lane by a byte
// shuffle, and the blend is one pmulhrsw per lane (blend_value's arithmetic).
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void blend_rgba_row_fused(uint8_t* p, const uint8_t* q, const float* ab,
                                                              const PackedLayout& layout, int pixels, int shift) {
  const __m256i weights = luma_weights(layout), zero = _mm256_setzero_si256();
  // Pixels 0, 1 (lane 0) / 4, 5 (lane 1) and 2, 3 / 6, 7: unpacklo / unpackhi's order.
  const __m256i spread_lo = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 4, 5, 4, 5, 4, 5, 4, 5,  //
                                             0, 1, 0, 1, 0, 1, 0, 1, 4, 5, 4, 5, 4, 5, 4, 5);
  const __m256i spread_hi = _mm256_setr_epi8(8, 9, 8, 9, 8, 9, 8, 9, 12, 13, 12, 13, 12, 13, 12, 13,  //
                                             8, 9, 8, 9, 8, 9, 8, 9, 12, 13, 12, 13, 12, 13, 12, 13);
  int x = 0;
  for (; x + 8 <= pixels; x += 8) {
    const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * x));
    const __m256i g = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 4 * x));
    const __m256i a = alpha8(f, weights, ab, x, shift);
    const __m256i y = _mm256_add_epi32(a, _mm256_srli_epi32(a, 7));  // 0..256
    const __m256i glo = _mm256_unpacklo_epi8(g, zero), ghi = _mm256_unpackhi_epi8(g, zero);
    const __m256i dlo = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_unpacklo_epi8(f, zero), glo), 7);
    const __m256i dhi = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_unpackhi_epi8(f, zero), ghi), 7);
    const __m256i lo = _mm256_add_epi16(glo, _mm256_mulhrs_epi16(dlo, _mm256_shuffle_epi8(y, spread_lo)));
    const __m256i hi = _mm256_add_epi16(ghi, _mm256_mulhrs_epi16(dhi, _mm256_shuffle_epi8(y, spread_hi)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 4 * x), _mm256_packus_epi16(lo, hi));
  }
  for (; x < pixels; ++x) {
    const uint8_t a = alpha_from_luma128(luma128(p + 4 * x, layout), ab + 2 * (x >> shift));
    for (int c = 0; c < 4; ++c) blend_byte(p[4 * x + c], q[4 * x + c], a);
  }
}
// Row y of a 2x bilinear upsampling of a 4-channel image (pixel centres aligned, edges
// replicated): 0.75 of the nearest source row/column and 0.25 of the next, computed as
// avg(a, avg(a, b)) on bytes. near / next: source rows y / 2 and its neighbour on y's side;
// out gets 2 * half_w pixels; tmp holds half_w + 2 pixels.
__attribute__((target("avx2"))) void upsample2x_rgba_row(const uint8_t* near, const uint8_t* next, int half_w,
                                                         uint8_t* tmp, uint8_t* out) {
  const int bytes = 4 * half_w;
  uint8_t* v = tmp + 4;  // v[-1] and v[half_w] are the replicated edges
  int i = 0;
  for (; i + 32 <= bytes; i += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(near + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(next + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), _mm256_avg_epu8(a, _mm256_avg_epu8(a, b)));
  }
  for (; i < bytes; ++i) v[i] = static_cast<uint8_t>((near[i] + ((near[i] + next[i] + 1) >> 1) + 1) >> 1);
  std::memcpy(v - 4, v, 4);
  std::memcpy(v + bytes, v + bytes - 4, 4);
  int x = 0;
  for (; x + 4 <= half_w; x += 4) {  // 4 source pixels -> 8 output pixels
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + 4 * x));
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + 4 * x - 4));
    const __m128i r = _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + 4 * x + 4));
    const __m128i even = _mm_avg_epu8(c, _mm_avg_epu8(c, l)), odd = _mm_avg_epu8(c, _mm_avg_epu8(c, r));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * x), _mm_unpacklo_epi32(even, odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * x + 16), _mm_unpackhi_epi32(even, odd));
  }
  for (; x < half_w; ++x)
    for (int k = 0; k < 4; ++k) {
      const int c = v[4 * x + k], l = v[4 * x - 4 + k], r = v[4 * x + 4 + k];
      out[8 * x + k] = static_cast<uint8_t>((c + ((c + l + 1) >> 1) + 1) >> 1);
      out[8 * x + 4 + k] = static_cast<uint8_t>((c + ((c + r + 1) >> 1) + 1) >> 1);
    }
}
#endif

// The background blur: after make_blurred_background's halvings sigma is under 4 work
// pixels, where OpenCV's separable float Gaussian (a 4-channel image in one call) costs
// half of three box passes (whose sums OpenCV keeps in double).
void gaussian(cv::Mat& m, double sigma) {
  if (sigma < 0.5) return;
  cv::GaussianBlur(m, m, cv::Size(0, 0), sigma, sigma, cv::BORDER_REFLECT);
}

}  // namespace

namespace {

// Scale to cover, then crop the middle.
void cover(const cv::Mat& src, cv::Size size, cv::Mat& dst) {
  const double sc =
      std::max(static_cast<double>(size.width) / src.cols, static_cast<double>(size.height) / src.rows);
  const int cw = std::max(size.width, static_cast<int>(std::ceil(src.cols * sc)));
  const int ch = std::max(size.height, static_cast<int>(std::ceil(src.rows * sc)));
  cv::Mat covered;
  if (cw == src.cols && ch == src.rows)
    covered = src;
  else
    cv::resize(src, covered, cv::Size(cw, ch), 0, 0, sc < 1.0 ? cv::INTER_AREA : cv::INTER_LINEAR);
  dst = covered(cv::Rect((cw - size.width) / 2, (ch - size.height) / 2, size.width, size.height));
}

}  // namespace

void cover_and_convert(const cv::Mat& src, const PackedLayout& from, cv::Size size, const PackedLayout& to,
                       cv::Mat& dst) {
  cv::Mat covered;
  cover(src, size, covered);
  dst.create(size, CV_8UC(to.channels));
  if (to.channels == 4) dst.setTo(cv::Scalar::all(255));
  std::vector<int> pairs = {from.r, to.r, from.g, to.g, from.b, to.b};
  if (to.alpha >= 0 && from.alpha >= 0) pairs.insert(pairs.end(), {from.alpha, to.alpha});
  cv::mixChannels(&covered, 1, &dst, 1, pairs.data(), pairs.size() / 2);
}

Status Compositor::set_image(const std::string& path) {
  cv::Mat img;
  try {
    img = cv::imread(path, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    return Status(StatusCode::kIoError, path + ": " + e.what());
  }
  if (img.empty())
    return Status(StatusCode::kIoError, path + ": cannot read image (missing, unreadable or not an image)");
  image_bgr_ = img;
  image_scaled_ = cv::Mat();
  image_scaled_key_ = -1;
  return Status::ok();
}

const cv::Mat& Compositor::scaled_image(const cv::Size& size, const PackedLayout& layout) {
  const int key = layout.channels * 16 + layout.r;
  if (image_scaled_key_ == key && image_scaled_size_ == size) return image_scaled_;
  cv::Mat crop;
  cover(image_bgr_, size, crop);
  const bool rgb = layout.r == 0;
  if (layout.channels == 4)
    cv::cvtColor(crop, image_scaled_, rgb ? cv::COLOR_BGR2RGBA : cv::COLOR_BGR2BGRA);
  else if (rgb)
    cv::cvtColor(crop, image_scaled_, cv::COLOR_BGR2RGB);
  else
    crop.copyTo(image_scaled_);
  image_scaled_size_ = size;
  image_scaled_key_ = key;
  return image_scaled_;
}

void Compositor::make_work_alpha(const cv::Mat& frame, const PackedLayout& layout, const MaskView& mask,
                                 const CompositorSettings& s, bool refine, bool need_small) {
  const int fw = frame.cols, fh = frame.rows;
  const double scale = work_factor(fw);
  const cv::Size ws = work_size(frame.size());
  // The work image (only the guided filter and the blur read it): the one nnsegment made
  // and the meta carries when it is what we would make (same size; the element checked the
  // format), else shrunk here.
  if (need_small) {
    if (mask.small_data && mask.small_width == ws.width && mask.small_height == ws.height &&
        mask.small_stride >= static_cast<size_t>(ws.width) * frame.channels()) {
      small_ = cv::Mat(ws, frame.type(), const_cast<void*>(mask.small_data), mask.small_stride);
      small_shared_ = true;
    } else {
      make_work_image(frame, small_);
      small_shared_ = false;
    }
  }

  // The mask, resampled onto the work grid through the meta's rect. The rect refers to a
  // frame of mask.frame_width x frame_height; rescale it if this frame differs.
  cv::Mat maskf;
  const cv::Mat raw(mask.height, mask.width, mask.is_float ? CV_32F : CV_8U, const_cast<void*>(mask.data),
                    mask.stride);
  if (mask.is_float)
    maskf = raw;
  else
    raw.convertTo(maskf, CV_32F, 1.0 / 255.0);
  const double fsx = mask.frame_width > 0 ? static_cast<double>(fw) / mask.frame_width : 1.0;
  const double fsy = mask.frame_height > 0 ? static_cast<double>(fh) / mask.frame_height : 1.0;
  const double rx = mask.rect_x * fsx, ry = mask.rect_y * fsy, rw = mask.rect_w * fsx, rh = mask.rect_h * fsy;
  mask_to_grid(maskf, rx, ry, rw, rh, fw, fh, ws, coarse_mask_);
  if (s.feather > 0) {
    const double sigma = s.feather / scale;
    if (sigma >= 0.3)
      cv::GaussianBlur(coarse_mask_, coarse_mask_, cv::Size(0, 0), sigma, sigma, cv::BORDER_REPLICATE);
  }

  coef_small_.create(ws, CV_32FC2);
  if (!refine) {  // alpha * 255 = 0 * luma + mask * 255 (+0.5: the blend truncates)
    small_alpha_ = coarse_mask_;
    for (int y = 0; y < ws.height; ++y) {
      const float* m = coarse_mask_.ptr<float>(y);
      float* ab = coef_small_.ptr<float>(y);
      for (int x = 0; x < ws.width; ++x) ab[2 * x] = 0.f, ab[2 * x + 1] = m[x] * 255.f + 0.5f;
    }
    return;
  }
  // Guided filter (He et al.): the alpha is locally a linear function of luma, a*I + b,
  // so it follows the frame's edges where the coarse mask is uncertain. Its four box sums
  // (I, p, I*I, I*p) run as one 4-channel box filter and its two (a, b) as one 2-channel
  // one; everything else is one pass per step over the work grid (1080p: 480x270).
  const double cell = std::max(rw / std::max(1, mask.width), rh / std::max(1, mask.height));
  const double radius = std::max(kGuidedMinRadius, kGuidedCellsRadius * cell);
  const int r = std::max(1, static_cast<int>(std::lround(radius / scale)));
  const int n = small_.channels();
  const float wr = 0.299f / 255.f, wg = 0.587f / 255.f, wb = 0.114f / 255.f;
  small_luma_.create(ws, CV_32F);
  guide_stats_.create(ws, CV_32FC4);
  for (int y = 0; y < ws.height; ++y) {
    const uint8_t* px = small_.ptr<uint8_t>(y);
    const float* p = coarse_mask_.ptr<float>(y);
    float* lum = small_luma_.ptr<float>(y);
    float* q = guide_stats_.ptr<float>(y);
    for (int x = 0; x < ws.width; ++x) {
      const uint8_t* c = px + n * x;
      const float I = wr * c[layout.r] + wg * c[layout.g] + wb * c[layout.b];
      lum[x] = I;
      q[4 * x] = I, q[4 * x + 1] = p[x], q[4 * x + 2] = I * I, q[4 * x + 3] = I * p[x];
    }
  }
  const cv::Size window(2 * r + 1, 2 * r + 1);
  cv::boxFilter(guide_stats_, guide_means_, CV_32F, window, cv::Point(-1, -1), true, cv::BORDER_REPLICATE);
  guide_ab_.create(ws, CV_32FC2);
  for (int y = 0; y < ws.height; ++y) {
    const float* m = guide_means_.ptr<float>(y);
    float* ab = guide_ab_.ptr<float>(y);
    for (int x = 0; x < ws.width; ++x) {
      const float mI = m[4 * x], mp = m[4 * x + 1], mII = m[4 * x + 2], mIp = m[4 * x + 3];
      const float a = (mIp - mI * mp) / (mII - mI * mI + static_cast<float>(kGuidedEps));
      ab[2 * x] = a, ab[2 * x + 1] = mp - a * mI;
    }
  }
  cv::boxFilter(guide_ab_, guide_ab_mean_, CV_32F, window, cv::Point(-1, -1), true, cv::BORDER_REPLICATE);
  // The refined alpha at work size (the blur's weights) and the coefficients for the
  // full-resolution frame: alpha * 255 = A * luma + B with luma in 0..255, the contrast
  // gain and the offsets folded in (+0.5: the blend truncates).
  small_alpha_.create(ws, CV_32F);
  for (int y = 0; y < ws.height; ++y) {
    const float* ab = guide_ab_mean_.ptr<float>(y);
    const float* lum = small_luma_.ptr<float>(y);
    float* al = small_alpha_.ptr<float>(y);
    float* folded = coef_small_.ptr<float>(y);
    for (int x = 0; x < ws.width; ++x) {
      const float A = ab[2 * x], B = ab[2 * x + 1];
      al[x] = std::min(std::max((A * lum[x] + B - 0.5f) * kRefineGain + 0.5f, 0.f), 1.f);
      folded[2 * x] = A * kRefineGain;
      folded[2 * x + 1] = ((B - 0.5f) * kRefineGain + 0.5f) * 255.f + 0.5f;
    }
  }
}

void Compositor::make_blurred_background(const CompositorSettings& s, int frame_width) {
  // The blur runs on the work grid (1920 -> 480 px wide), halved while sigma stays at 2
  // cells or more: a blur of sigma S has no detail finer than ~S/2, and each halving
  // quarters the blur's cost (1080p, sigma 16: 240 px wide).
  double sigma = s.blur_sigma * small_.cols / frame_width;
  cv::Mat img8 = small_, alpha = small_alpha_;
  while (sigma >= 4.0 && img8.cols >= 64 && img8.rows >= 64) {
    cv::Mat half_img, half_alpha;
    cv::resize(img8, half_img, cv::Size(img8.cols / 2, img8.rows / 2), 0, 0, cv::INTER_LINEAR);
    cv::resize(alpha, half_alpha, half_img.size(), 0, 0, cv::INTER_LINEAR);
    img8 = half_img;
    alpha = half_alpha;
    sigma /= 2;
  }
  const cv::Size bs = img8.size();
  const int n = img8.channels();
  // Blur the background only: weight pixels by (1 - alpha) and renormalize, so the person
  // does not bleed a halo into the blurred background around them. The small floor on the
  // weight makes deep-inside-the-person areas fall back to a plain blur instead of 0/0.
  constexpr float kMinWeight = 0.02f;
  weighted_.create(bs, CV_32FC(n));  // members: a 2 MB allocation per 1080p frame otherwise
  weight_.create(bs, CV_32F);
  cv::Mat& weighted = weighted_;
  cv::Mat& weight = weight_;
  for (int y = 0; y < bs.height; ++y) {
    const uint8_t* src = img8.ptr<uint8_t>(y);
    const float* a = alpha.ptr<float>(y);
    float* dst = weighted.ptr<float>(y);
    float* w = weight.ptr<float>(y);
    for (int x = 0; x < bs.width; ++x) {
      const float wx = std::max(1.f - a[x], kMinWeight);
      w[x] = wx;
      for (int c = 0; c < n; ++c) dst[x * n + c] = src[x * n + c] * wx;
    }
  }
  gaussian(weighted, sigma);
  gaussian(weight, sigma);
  small_bg_.create(bs, small_.type());
  for (int y = 0; y < bs.height; ++y) {
    const float* src = weighted.ptr<float>(y);
    const float* w = weight.ptr<float>(y);
    uint8_t* dst = small_bg_.ptr<uint8_t>(y);
    for (int x = 0; x < bs.width; ++x) {
      const float inv = 1.f / std::max(w[x], 1e-6f);
      for (int c = 0; c < n; ++c) dst[x * n + c] = cv::saturate_cast<uint8_t>(src[x * n + c] * inv);
    }
  }
}

int Compositor::coefficient_shift(int frame_width) {
  return work_factor(frame_width) >= 8 ? 2 : 1;
}

void Compositor::upsample_coefficients(int fw, int fh, int shift) {
  const int block = 1 << shift;
  cv::resize(coef_small_, coef_full_, cv::Size((fw + block - 1) / block, (fh + block - 1) / block), 0, 0,
             cv::INTER_LINEAR);
}

template <class Body>
void Compositor::parallel_rows(int rows, const Body& body) {
  if (serial_) {
    body(cv::Range(0, rows));
    return;
  }
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> helper_ns{0};
  cv::parallel_for_(cv::Range(0, rows), [&](const cv::Range& range) {
    const bool helper = std::this_thread::get_id() != caller;
    const double t0 = helper ? thread_cpu_ms() : 0.0;
    body(range);
    if (helper) helper_ns += static_cast<int64_t>((thread_cpu_ms() - t0) * 1e6);
  });
  times_.helper_ms += static_cast<double>(helper_ns.load()) * 1e-6;
}

Compositor::Call::Call(Compositor& c) : c_(c), t_(thread_cpu_ms()) {
  c_.times_ = {};
  c_.small_shared_ = false;
}

Compositor::Call::~Call() {
  if (c_.small_shared_) c_.small_.release();
}

double Compositor::Call::lap() {
  const double now = thread_cpu_ms(), d = now - t_;
  t_ = now;
  return d;
}

void Compositor::process(cv::Mat& frame, const PackedLayout& layout, const MaskView& mask,
                         const CompositorSettings& s) {
  const int fw = frame.cols, fh = frame.rows;
  Call call(*this);
  serial_ = s.serial;
  const bool video_ok = s.mode == BackgroundMode::kVideo && s.background &&
                        s.background->size() == frame.size() && s.background->type() == frame.type();
  const bool blurs = s.mode == BackgroundMode::kBlur || (s.mode == BackgroundMode::kVideo && !video_ok);
  const BlurKey key{frame.size(), frame.type(), layout.r, s.blur_sigma};
  const bool reuse_blur = blurs && s.fast && blur_key_ == key && blur_reuses_ < kMaxBackgroundReuse;
  last_reused_ = reuse_blur;
  const bool refine = s.refine && !s.fast;
  make_work_alpha(frame, layout, mask, s, refine, refine || (blurs && !reuse_blur));
  times_.work_ms = call.lap();

  // Full-resolution alpha: the guided filter's coefficients upsampled and applied to the
  // frame's own luma (the "fast guided filter"), or the plain upsampled mask. Every loop
  // here runs over contiguous rows of one type so the compiler vectorizes it.
  // A 4-channel frame's alpha is computed row by row inside the blend below (its luma on
  // the fly too): no frame-sized alpha is written and read back, and the frame is read
  // once. Only mode=transparent into an alpha channel keeps the alpha as an image.
  const bool writes_alpha_channel = s.mode == BackgroundMode::kTransparent && layout.alpha >= 0;
  const bool alpha_in_blend = layout.channels == 4 && simd_rows_available() && !writes_alpha_channel;
  if (!alpha_in_blend) alpha_.create(fh, fw, CV_8UC1);
  const bool fused_luma = layout.channels == 4 && simd_rows_available();
  if (!fused_luma) cv::cvtColor(frame, luma_, gray_code(layout));
  // The coefficients are smooth over many frame pixels (box-filtered twice on the work
  // grid, or the feathered mask): they are upsampled to half the frame size and each value
  // serves a 2x2 block (a third of the full-size resize's time; the luma stays full
  // resolution), or at 4K and wider (a work grid 8x smaller than the frame) to a quarter,
  // each serving 4x4 (still twice the work grid's resolution; 4 MB instead of 16).
  const int shift = coefficient_shift(fw);
  upsample_coefficients(fw, fh, shift);
  if (!alpha_in_blend) parallel_rows(fh, [&](const cv::Range& rows) {
    for (int y = rows.start; y < rows.end; ++y) {
      const float* ab = coef_full_.ptr<float>(y >> shift);
#if defined(__x86_64__)
      if (fused_luma) {
        alpha_row_rgba_avx2(frame.ptr<uint8_t>(y), layout, ab, alpha_.ptr<uint8_t>(y), fw, shift);
        continue;
      }
#endif
      alpha_row(luma_.ptr<uint8_t>(y), ab, alpha_.ptr<uint8_t>(y), fw, shift);
    }
  });
  times_.alpha_ms = call.lap();

  if (writes_alpha_channel) {
    const int from_to[] = {0, layout.alpha};
    cv::mixChannels(&alpha_, 1, &frame, 1, from_to, 1);
    return;
  }

  // The background, at frame resolution (or half, see kBlur) and in the frame's channel layout.
  const int nc = layout.channels;
  bool half_size_bg = false;
  const cv::Mat* bg = nullptr;
  switch (s.mode) {
    case BackgroundMode::kVideo:
      if (video_ok) {
        bg = s.background;
        break;
      }
      [[fallthrough]];  // no background frame yet: blur
    case BackgroundMode::kBlur:
      half_size_bg = nc == 4 && simd_rows_available();
      if (reuse_blur) {  // a fast frame: the background a recent frame blurred
        ++blur_reuses_;
        bg = &background_;
        break;
      }
      make_blurred_background(s, fw);
      blur_key_ = key;
      blur_reuses_ = 0;
      if (half_size_bg) {
        // Upsampled to half the frame size here and the last 2x row by row inside the blend:
        // a frame-sized background is never written (1080p: 8 MB less traffic per frame).
        cv::resize(small_bg_, background_, cv::Size((fw + 1) / 2, (fh + 1) / 2), 0, 0, cv::INTER_LINEAR);
      } else {
        cv::resize(small_bg_, background_, frame.size(), 0, 0, cv::INTER_LINEAR);
      }
      bg = &background_;
      break;
    case BackgroundMode::kImage:
      if (has_image()) {
        bg = &scaled_image(frame.size(), layout);
        break;
      }
      [[fallthrough]];  // no image: black
    case BackgroundMode::kColor:
    case BackgroundMode::kTransparent: {  // transparent without an alpha channel: over black
      cv::Scalar color(0, 0, 0, 255);
      if (s.mode == BackgroundMode::kColor) {
        color[layout.r] = (s.color_argb >> 16) & 0xFF;
        color[layout.g] = (s.color_argb >> 8) & 0xFF;
        color[layout.b] = s.color_argb & 0xFF;
        if (layout.alpha >= 0) color[layout.alpha] = (s.color_argb >> 24) & 0xFF;
      }
      if (background_.size() != frame.size() || background_.type() != frame.type() ||
          background_color_ != color) {
        background_.create(frame.size(), frame.type());
        background_.setTo(color);
        background_color_ = color;
        blur_key_ = {};
      }
      bg = &background_;
      break;
    }
  }
  if (s.mode != BackgroundMode::kColor) background_color_ = cv::Scalar::all(-1);
  times_.background_ms = call.lap();

  // out = (frame * a + bg * (255 - a)) / 255 on every byte, alpha replicated per channel.
  // Alpha bytes blend too: 255 over 255 stays opaque; a translucent colour shows through.
#if defined(__x86_64__)
  if (alpha_in_blend) {  // 4 channels with the SIMD rows (see above)
    parallel_rows(fh, [&](const cv::Range& rows) {
      thread_local std::vector<uint8_t> up, tmp;
      for (int y = rows.start; y < rows.end; ++y) {
        const uint8_t* q = bg->ptr<uint8_t>(y);
        if (half_size_bg) {
          const int hw = bg->cols, j = y / 2;
          const int k = std::clamp(y % 2 ? j + 1 : j - 1, 0, bg->rows - 1);
          up.resize(8 * static_cast<size_t>(hw) + 32);
          tmp.resize(4 * static_cast<size_t>(hw) + 40);
          upsample2x_rgba_row(bg->ptr<uint8_t>(j), bg->ptr<uint8_t>(k), hw, tmp.data(), up.data());
          q = up.data();
        }
        blend_rgba_row_fused(frame.ptr<uint8_t>(y), q, coef_full_.ptr<float>(y >> shift), layout, fw, shift);
      }
    });
    times_.blend_ms = call.lap();
    return;
  }
#endif
  (void)half_size_bg;
  const int from_to4[] = {0, 0, 0, 1, 0, 2, 0, 3};
  alpha_n_.create(frame.size(), frame.type());
  cv::mixChannels(&alpha_, 1, &alpha_n_, 1, from_to4, nc);
  const int row_bytes = fw * nc;
  parallel_rows(fh, [&, row_bytes](const cv::Range& rows) {
    for (int y = rows.start; y < rows.end; ++y)
      blend_plane_row(frame.ptr<uint8_t>(y), bg->ptr<uint8_t>(y), alpha_n_.ptr<uint8_t>(y), row_bytes);
  });
  times_.blend_ms = call.lap();
}

namespace {

// The colour matrix's constants for RGB (0..255) -> Y'CbCr in the stream's range.
struct YuvMatrix {
  float kr, kg, kb, y_gain, y_off, c_gain;
  explicit YuvMatrix(const YuvFrame& f)
      : kr(static_cast<float>(f.kr)),
        kg(static_cast<float>(1.0 - f.kr - f.kb)),
        kb(static_cast<float>(f.kb)),
        y_gain(f.full_range ? 1.f : 219.f / 255.f),
        y_off(f.full_range ? 0.f : 16.f),
        c_gain(f.full_range ? 1.f : 224.f / 255.f) {}
  void convert(float r, float g, float b, float* y, float* cb, float* cr) const {
    const float l = kr * r + kg * g + kb * b;
    *y = y_off + y_gain * l;
    *cb = 128.f + c_gain * (b - l) / (2.f * (1.f - kb));
    *cr = 128.f + c_gain * (r - l) / (2.f * (1.f - kr));
  }
};

}  // namespace

void rgb_to_yuv420(const cv::Mat& rgb, const PackedLayout& layout, const YuvFrame& like, cv::Mat& y, cv::Mat& u,
                   cv::Mat& v) {
  const YuvMatrix m(like);
  const int w = rgb.cols, h = rgb.rows, n = rgb.channels();
  y.create(h, w, CV_8UC1);
  cv::Mat cb(h, w, CV_32F), cr(h, w, CV_32F);
  for (int r = 0; r < h; ++r) {
    const uint8_t* px = rgb.ptr<uint8_t>(r);
    uint8_t* yr = y.ptr<uint8_t>(r);
    float* br = cb.ptr<float>(r);
    float* rr = cr.ptr<float>(r);
    for (int x = 0; x < w; ++x) {
      float yy;
      m.convert(px[n * x + layout.r], px[n * x + layout.g], px[n * x + layout.b], &yy, br + x, rr + x);
      yr[x] = cv::saturate_cast<uint8_t>(yy);
    }
  }
  const cv::Size half((w + 1) / 2, (h + 1) / 2);
  cv::Mat cbs, crs;
  cv::resize(cb, cbs, half, 0, 0, cv::INTER_AREA);
  cv::resize(cr, crs, half, 0, 0, cv::INTER_AREA);
  cbs.convertTo(u, CV_8U);
  crs.convertTo(v, CV_8U);
}

void Compositor::process_yuv(const YuvFrame& f, const MaskView& mask, const CompositorSettings& s) {
  const int fw = f.width, fh = f.height, cw = (fw + 1) / 2, ch = (fh + 1) / 2;
  Call call(*this);
  serial_ = s.serial;
  cv::Mat luma(fh, fw, CV_8UC1, f.y, f.y_stride);
  const bool video_ok = s.mode == BackgroundMode::kVideo && s.background && s.background->rows == fh &&
                        s.background->cols == fw && s.background->type() == CV_8UC3;
  const bool blurs = s.mode == BackgroundMode::kBlur || (s.mode == BackgroundMode::kVideo && !video_ok);
  // type -2 / -3: a YUV frame (I420 / NV12), which a packed frame's key never matches.
  const BlurKey key{cv::Size(fw, fh), f.nv12 ? -3 : -2, 0, s.blur_sigma};
  const bool reuse_blur = blurs && s.fast && blur_key_ == key && blur_reuses_ < kMaxBackgroundReuse;
  last_reused_ = reuse_blur;
  const bool refine = s.refine && !s.fast;
  const bool need_small = refine || (blurs && !reuse_blur);
  if (need_small) {
    const cv::Size ws = work_size(cv::Size(fw, fh));
    if (mask.small_data && mask.small_width == ws.width && mask.small_height == ws.height &&
        mask.small_stride >= static_cast<size_t>(ws.width) * 3) {
      small_ = cv::Mat(ws, CV_8UC3, const_cast<void*>(mask.small_data), mask.small_stride);
      small_shared_ = true;
    } else {
      const cv::Mat u = f.nv12 ? cv::Mat(ch, cw, CV_8UC2, f.u, f.u_stride) : cv::Mat(ch, cw, CV_8UC1, f.u, f.u_stride);
      const cv::Mat v = f.nv12 ? cv::Mat() : cv::Mat(ch, cw, CV_8UC1, f.v, f.v_stride);
      make_yuv_work_image(luma, u, v, small_);
    }
  }
  // The guided filter's luma is channel 0 of the work image, Y itself (r = g = b = 0: the
  // luma weights add up to 1), and the full-resolution alpha is A * Y + B.
  const PackedLayout y_only{3, 0, 0, 0, -1};
  make_work_alpha(luma, y_only, mask, s, refine, false);
  times_.work_ms = call.lap();

  const cv::Size half(cw, ch);
  const int shift = coefficient_shift(fw);
  upsample_coefficients(fw, fh, shift);
  times_.alpha_ms = call.lap();

  // The background's planes, at the frame's Y and chroma sizes.
  const auto planes_from_rgb = [&](const cv::Mat& rgb, const PackedLayout& layout) {
    rgb_to_yuv420(rgb, layout, f, bg_y_, bg_u_, bg_v_);
  };
  const PackedLayout rgb_layout{3, 0, 1, 2, -1};
  if (s.mode == BackgroundMode::kVideo && video_ok) {
    planes_from_rgb(*s.background, rgb_layout);
    bg_yuv_key_ = 0;
    blur_key_ = {};
  } else if (blurs) {
    if (!reuse_blur) {
      make_blurred_background(s, fw);
      cv::Mat parts[3];
      cv::split(small_bg_, parts);
      cv::resize(parts[0], bg_y_, cv::Size(fw, fh), 0, 0, cv::INTER_LINEAR);
      cv::resize(parts[1], bg_u_, half, 0, 0, cv::INTER_LINEAR);
      cv::resize(parts[2], bg_v_, half, 0, 0, cv::INTER_LINEAR);
      blur_key_ = key;
      blur_reuses_ = 0;
      bg_yuv_key_ = 0;
    } else {
      ++blur_reuses_;
    }
  } else {
    // Colour, image (black without one), transparent (black): kept while the key holds.
    const bool image = s.mode == BackgroundMode::kImage && has_image();
    const uint32_t argb = s.mode == BackgroundMode::kColor ? s.color_argb : 0xFF000000u;
    const uint64_t k = (image ? (uint64_t{1} << 63) | (static_cast<uint64_t>(image_scaled_key_ + 1) << 32)
                              : (uint64_t{1} << 62) | argb) ^
                       (static_cast<uint64_t>(fw) << 40) ^ (static_cast<uint64_t>(fh) << 20) ^
                       static_cast<uint64_t>(std::lround(f.kr * 1e4)) ^ (f.full_range ? 7u : 0u);
    if (bg_yuv_key_ != k || bg_y_.size() != cv::Size(fw, fh)) {
      if (image) {
        planes_from_rgb(scaled_image(cv::Size(fw, fh), rgb_layout), rgb_layout);
      } else {
        float yy, cb, cr;
        YuvMatrix(f).convert((argb >> 16) & 0xFF, (argb >> 8) & 0xFF, argb & 0xFF, &yy, &cb, &cr);
        bg_y_.create(fh, fw, CV_8UC1);
        bg_y_.setTo(cv::saturate_cast<uint8_t>(yy));
        bg_u_.create(half, CV_8UC1);
        bg_u_.setTo(cv::saturate_cast<uint8_t>(cb));
        bg_v_.create(half, CV_8UC1);
        bg_v_.setTo(cv::saturate_cast<uint8_t>(cr));
      }
      bg_yuv_key_ = k;
      blur_key_ = {};
    }
  }
  if (f.nv12 && (bg_yuv_key_ == 0 || bg_uv_.size() != half)) {
    const cv::Mat uv[2] = {bg_u_, bg_v_};
    cv::merge(uv, 2, bg_uv_);
  }
  times_.background_ms = call.lap();

  // One pass per chroma row j: the alphas of Y rows 2j and 2j + 1 (from the frame's own Y,
  // before it is blended), those rows blended, then chroma row j with the mean of the 2x2
  // luma alphas it covers (edges repeat on odd sizes). No alpha image is written.
  parallel_rows(ch, [&](const cv::Range& rows) {
    thread_local std::vector<uint8_t> alpha0, alpha1, alpha_c, pairs;
    alpha0.resize(fw), alpha1.resize(fw), alpha_c.resize(cw);
    for (int j = rows.start; j < rows.end; ++j) {
      const int y0 = 2 * j, y1 = std::min(2 * j + 1, fh - 1);
      const float* ab = coef_full_.ptr<float>(y0 >> shift);  // rows 2j and 2j + 1 share it
      alpha_row(f.y + y0 * f.y_stride, ab, alpha0.data(), fw, shift);
      const uint8_t* a0 = alpha0.data();
      const uint8_t* a1 = a0;
      if (y1 != y0) {
        alpha_row(f.y + y1 * f.y_stride, ab, alpha1.data(), fw, shift);
        a1 = alpha1.data();
      }
      blend_plane_row(f.y + y0 * f.y_stride, bg_y_.ptr<uint8_t>(y0), a0, fw);
      if (y1 != y0) blend_plane_row(f.y + y1 * f.y_stride, bg_y_.ptr<uint8_t>(y1), a1, fw);
      uint8_t* a = alpha_c.data();
      const int full_pairs = fw / 2;
      for (int i = 0; i < full_pairs; ++i)
        a[i] = static_cast<uint8_t>((a0[2 * i] + a0[2 * i + 1] + a1[2 * i] + a1[2 * i + 1] + 2) >> 2);
      if (full_pairs < cw) a[full_pairs] = static_cast<uint8_t>((a0[fw - 1] + a1[fw - 1] + 1) >> 1);
      if (f.nv12) {
        pairs.resize(2 * static_cast<size_t>(cw));
        for (int i = 0; i < cw; ++i) pairs[2 * i] = pairs[2 * i + 1] = a[i];
        blend_plane_row(f.u + j * f.u_stride, bg_uv_.ptr<uint8_t>(j), pairs.data(), 2 * cw);
      } else {
        blend_plane_row(f.u + j * f.u_stride, bg_u_.ptr<uint8_t>(j), a, cw);
        blend_plane_row(f.v + j * f.v_stride, bg_v_.ptr<uint8_t>(j), a, cw);
      }
    }
  });
  times_.blend_ms = call.lap();
}

}  // namespace nn::plugins
