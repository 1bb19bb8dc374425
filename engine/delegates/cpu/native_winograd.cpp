// NativeWinograd (native_winograd.h): per block of output tiles, the input transform into
// the scratch, (m + 2)^2 GEMMs on NativeConv's micro-kernels, the output transform with the
// bias and the epilogue. Blocks are sized so one block's buffers stay in L2, and threads
// take blocks from a shared counter (each thread its own slot of the scratch).
#include "delegates/cpu/native_winograd.h"

#include <pthreadpool.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

namespace nn::cpu {

namespace {

// What the transforms need to know about a run.
struct WinogradGeometry {
  NativeConvShape shape;
  size_t tiles_h, tiles_w;  // per polyphase sub-image (the whole image at dilation 1)
  size_t block;            // tiles per block (rows of each GEMM)
  size_t in_pad, out_pad;  // channels rounded up to the vector width
};

}  // namespace

#if NN_NATIVE_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
namespace wino_avx512 {
namespace {
struct Ops {
  using V = __m512;
  using Epi = EpilogueAvx512;
  static constexpr size_t kLanes = 16;
  static constexpr bool kAvx512 = true;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 set1(float x) { return _mm512_set1_ps(x); }
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 loadn(const float* p, size_t n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
  static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static void storen(float* p, __m512 v, size_t n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
};
#include "delegates/cpu/native_winograd_transforms.inc"
}  // namespace
}  // namespace wino_avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace wino_avx2 {
namespace {
struct Ops {
  using V = __m256;
  using Epi = EpilogueAvx2;
  static constexpr size_t kLanes = 8;
  static constexpr bool kAvx512 = false;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 set1(float x) { return _mm256_set1_ps(x); }
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 loadn(const float* p, size_t n) { return _mm256_maskload_ps(p, lane_mask(n)); }
  static void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void storen(float* p, __m256 v, size_t n) { store_first(p, v, n); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
  static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
};
#include "delegates/cpu/native_winograd_transforms.inc"
}  // namespace
}  // namespace wino_avx2
#pragma GCC pop_options
#else
namespace wino_scalar {
namespace {
struct Ops {
  using V = float;
  struct Epi {
    explicit Epi(const Epilogue& e) : e(e) {}
    float operator()(float v, float r) const { return apply_epilogue(e, v, r); }
    Epilogue e;
  };
  static constexpr size_t kLanes = 1;
  static constexpr bool kAvx512 = false;
  static float zero() { return 0.f; }
  static float set1(float x) { return x; }
  static float load(const float* p) { return *p; }
  static float loadn(const float* p, size_t) { return *p; }
  static void store(float* p, float v) { *p = v; }
  static void storen(float* p, float v, size_t) { *p = v; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static float fma(float a, float b, float c) { return std::fma(a, b, c); }
};
#include "delegates/cpu/native_winograd_transforms.inc"
}  // namespace
}  // namespace wino_scalar
#endif

namespace {

// G, the filter transform of F(m x m, 3 x 3): (m + 2) x 3.
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

// One block's buffers stay in L2 (Zen 4: 1 MB per core, shared with the weights' panels
// the GEMMs stream).
constexpr size_t kBlockBytes = size_t(384) << 10;
constexpr size_t kFilterBytesInL2 = size_t(1) << 20;
// The split pays only for filters that do not stay in L3 beside the rest of a run: at 2
// threads it lost 7% on googlenet (3.6 MB of filters at 14x14) and squeezenet (2.4 MB at
// 13x13), where two blocks read them from L3 and the split's second job and the other
// core's transformed tiles cost more; resnet's 9.4 MB at 14x14 tied.
constexpr size_t kSplitFilterBytes = size_t(16) << 20;
// With split_panels_, one transform-domain point's input for all tiles (a GEMM's A, which
// every panel of that point reads again) stays within this.
constexpr size_t kPointBytes = size_t(1) << 20;

// Output tiles of F(m x m): at dilation d, per each of the d_h x d_w polyphase sub-images
// (pixels y * d_h + a, x * d_w + b), tiled as the ceil(out / d)-sized one.
size_t tile_count(const NativeConvShape& s, size_t m) {
  const size_t sub_h = (s.out_h + s.dilation_h - 1) / s.dilation_h, sub_w = (s.out_w + s.dilation_w - 1) / s.dilation_w;
  return size_t(s.batch) * s.dilation_h * s.dilation_w * ((sub_h + m - 1) / m) * ((sub_w + m - 1) / m);
}

// Panels PackedGemm cuts out_c into (its rule).
size_t gemm_panels(size_t out_c, const NativeIsa& isa) {
  const size_t width = isa.avx512 && out_c > 16 ? 32 : 16;
  return (out_c + width - 1) / width;
}

// Whether F(m x m)'s filters outweigh twice the transformed input and GEMM output of all
// tiles (and kSplitFilterBytes), one point's input for all tiles staying within kPointBytes: where
// the threads split the filters' panels over one block of all tiles. (At 1x, resnet50's
// 128 -> 128 convs at 28x28, 2.4 MB of filters for 1.8 MB of tiles, ran 0-10% slower split.)
bool filters_outweigh_tiles(const NativeConvShape& s, size_t m) {
  const size_t points = (m + 2) * (m + 2);
  const size_t tiles = tile_count(s, m);
  const size_t filter_bytes = points * s.in_c * s.out_c * sizeof(float);
  return filter_bytes >= kSplitFilterBytes && filter_bytes >= 2 * tiles * points * (s.in_c + s.out_c) * sizeof(float) &&
         tiles * s.in_c * sizeof(float) <= kPointBytes;
}

}  // namespace

bool NativeWinograd::supports(const NativeConvShape& s) {
  return s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dilation_h >= 1 &&
         s.dilation_w >= 1 && s.out_h > 0 && s.out_w > 0 && s.in_c > 0 && s.out_c > 0;
}

NativeWinograd::NativeWinograd(const NativeConvShape& shape, const float* filter, const float* bias,
                               const Epilogue& epilogue, size_t slots, uint32_t output_tile,
                               const NativeIsa& isa, bool panel_split)
    : shape_(shape),
      epilogue_(epilogue),
      avx512_(isa.avx512),
      m_(output_tile == 2 ? 2 : 4),
      slots_(std::max<size_t>(1, slots)) {
  if (!supports(shape)) return;
#if NN_NATIVE_X86
  const size_t lanes = avx512_ ? 16 : 8, rows = NativeConv::tile_pixels(isa);
#else
  const size_t lanes = 1, rows = 6;
#endif
  const size_t a = m_ + 2, points = a * a;
  in_pad_ = (shape.in_c + lanes - 1) / lanes * lanes;
  out_pad_ = (shape.out_c + lanes - 1) / lanes * lanes;
  const size_t sub_h = (shape.out_h + shape.dilation_h - 1) / shape.dilation_h;
  const size_t sub_w = (shape.out_w + shape.dilation_w - 1) / shape.dilation_w;
  tiles_h_ = (sub_h + m_ - 1) / m_, tiles_w_ = (sub_w + m_ - 1) / m_;
  tiles_ = tile_count(shape, m_);
  // Tiles per block: what fits kBlockBytes in whole micro-tiles of GEMM rows, at least one
  // micro-tile. Each block streams all (m + 2)^2 transformed filters: where those outgrow
  // L2, at least 16 tiles (256 output pixels for F(4x4)) read them per pass, so they cost
  // no more per pixel than the direct conv's 64-pixel tiles reading a quarter the bytes.
  // Fewer where that leaves a thread without a block.
  const size_t per_tile = points * (in_pad_ + out_pad_) * sizeof(float);
  // Few tiles for large filters (512 -> 512 at 28x28 or 14x14, FCN's 2048 -> 512 head):
  // every block of tiles streams all the filters from L3 or memory, 4 blocks of 49 tiles
  // 4 x 37 MB, and two threads taking blocks stream twice the bytes in the same time. There
  // all tiles go through the GEMMs as one block and threads split the filters' panels
  // (split_panels_): each filter byte is read once per run, however many threads.
  split_panels_ = panel_split && filters_outweigh_tiles(shape, m_);
  size_t block = std::max(rows, kBlockBytes / per_tile / rows * rows);
  if (points * shape.in_c * shape.out_c * sizeof(float) > kFilterBytesInL2)
    block = std::max(block, (size_t(16) + rows - 1) / rows * rows);
  const size_t per_slot = (tiles_ + slots_ - 1) / slots_;
  block = std::min(block, (per_slot + rows - 1) / rows * rows);
  if (slots_ > 1) {
    // As many blocks per slot, of near-equal size: whole micro-tiles left a short last
    // block (49 tiles in 16 + 16 + 16 + 1), so one thread ran 32 tiles and the other 17.
    const size_t blocks = ((tiles_ + block - 1) / block + slots_ - 1) / slots_ * slots_;
    block = (tiles_ + blocks - 1) / blocks;
  }
  block_ = std::max<size_t>(1, std::min(block, tiles_));
  // Only where the blocks would stream the filters more than once (one block of 16 tiles on
  // 1 thread: the panels' order of work was ~10% slower, the filters read once either way).
  split_panels_ = split_panels_ && block_ < tiles_;
  if (split_panels_) {  // one block, one buffer all threads share
    block_ = tiles_;
    const size_t panels = gemm_panels(shape.out_c, isa);
    // Two items per thread, each a run of panels: an item walks every point's input for all
    // tiles (MBs, from L3) once, so fewer, longer items read it fewer times (vgg11's 512 ->
    // 512 at 28x28 on 2 threads: 3.8 ms a panel per item, 3.1-3.4 ms with 4 or 2 items).
    panel_group_ = std::max<size_t>(1, (panels + 2 * slots_ - 1) / (2 * slots_));
    slots_ = 1;
  }
  slot_floats_ = (points * block_ * (in_pad_ + out_pad_) + 15) / 16 * 16;

  // U = G g G^T per (output, input) channel pair, in double, as (m + 2)^2 matrices in_c x out_c.
  const size_t in_c = shape.in_c, out_c = shape.out_c;
  std::vector<float> u(points * in_c * out_c);
  for (size_t o = 0; o < out_c; ++o)
    for (size_t c = 0; c < in_c; ++c) {
      double g[3][3], gg[6][3];  // the filter, then G g
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 3; ++x) g[y][x] = filter[((o * 3 + y) * 3 + x) * in_c + c];
      for (size_t i = 0; i < a; ++i)
        for (int x = 0; x < 3; ++x) {
          double sum = 0;
          for (int y = 0; y < 3; ++y) sum += (m_ == 4 ? kG4[i][y] : kG2[i][y]) * g[y][x];
          gg[i][x] = sum;
        }
      for (size_t i = 0; i < a; ++i)
        for (size_t j = 0; j < a; ++j) {
          double sum = 0;
          for (int x = 0; x < 3; ++x) sum += gg[i][x] * (m_ == 4 ? kG4[j][x] : kG2[j][x]);
          u[((i * a + j) * in_c + c) * out_c + o] = float(sum);
        }
    }
  auto gemm = std::make_unique<PackedGemm>(points, in_c, out_c, u.data(), isa);
  if (!gemm->ok()) return;
  gemm_ = std::move(gemm);
  // packed_ holds the bias, zero-padded to out_pad_ (a whole vector per load).
  AlignedFloats packed = allocate_floats(out_pad_);
  if (!packed) return;
  if (bias) std::copy_n(bias, out_c, packed.get());
  packed_ = std::move(packed);
}

size_t NativeWinograd::scratch_bytes() const {
  return slots_ * slot_floats_ * sizeof(float);
}

struct NativeWinograd::Task {
  const NativeWinograd* op;
  WinogradGeometry geometry;
  const float* input;
  const float* residual;
  float* output;
  float* scratch;
  size_t blocks;
  std::atomic<size_t> next{0};  // the next block a slot takes
};

namespace {

template <int kM>
void run_block(const NativeWinograd::Task& t, const PackedGemm& gemm, const float* bias,
               const Epilogue& epilogue, bool avx512, size_t block, float* v) {
  const WinogradGeometry& g = t.geometry;
  const size_t points = size_t(kM + 2) * (kM + 2);
  const size_t tiles = g.tiles_h * g.tiles_w * g.shape.batch * g.shape.dilation_h * g.shape.dilation_w;
  const size_t t0 = block * g.block, count = std::min(g.block, tiles - t0);
  float* mm = v + points * g.block * g.in_pad;
#if NN_NATIVE_X86
  avx512 ? wino_avx512::transform_input<kM>(g, t.input, t0, count, v)
         : wino_avx2::transform_input<kM>(g, t.input, t0, count, v);
#else
  (void)avx512;
  wino_scalar::transform_input<kM>(g, t.input, t0, count, v);
#endif
  for (size_t p = 0; p < points; ++p)
    gemm.multiply(p, count, v + p * g.block * g.in_pad, g.in_pad, mm + p * g.block * g.out_pad, g.out_pad);
#if NN_NATIVE_X86
  avx512 ? wino_avx512::transform_output<kM>(g, mm, t0, count, bias, epilogue, t.residual, t.output, 0,
                                             g.shape.out_c)
         : wino_avx2::transform_output<kM>(g, mm, t0, count, bias, epilogue, t.residual, t.output, 0,
                                           g.shape.out_c);
#else
  wino_scalar::transform_output<kM>(g, mm, t0, count, bias, epilogue, t.residual, t.output, 0, g.shape.out_c);
#endif
}

// split_panels_, first job: tile t of all tiles into v (one block: t is its row).
template <int kM>
void transform_tile(const NativeWinograd::Task& t, bool avx512, size_t tile) {
  const WinogradGeometry& g = t.geometry;
  float* v = t.scratch + tile * g.in_pad;
#if NN_NATIVE_X86
  avx512 ? wino_avx512::transform_input<kM>(g, t.input, tile, 1, v)
         : wino_avx2::transform_input<kM>(g, t.input, tile, 1, v);
#else
  (void)avx512;
  wino_scalar::transform_input<kM>(g, t.input, tile, 1, v);
#endif
}

// split_panels_, second job: panel j of every point's GEMM over all tiles, then its
// channels of every output tile.
template <int kM>
void run_panel(const NativeWinograd::Task& t, const PackedGemm& gemm, const float* bias, const Epilogue& epilogue,
               bool avx512, size_t j) {
  const WinogradGeometry& g = t.geometry;
  const size_t points = size_t(kM + 2) * (kM + 2), tiles = g.block;
  const float* v = t.scratch;
  float* mm = t.scratch + points * tiles * g.in_pad;
  const size_t j1 = std::min(gemm.panels(), (j + 1) * t.op->panel_group());
  j *= t.op->panel_group();
  for (size_t p = 0; p < points; ++p)
    gemm.multiply(p, tiles, v + p * tiles * g.in_pad, g.in_pad, mm + p * tiles * g.out_pad, g.out_pad, j, j1);
  const size_t c0 = j * gemm.panel_width(), c1 = j1 * gemm.panel_width();
#if NN_NATIVE_X86
  avx512 ? wino_avx512::transform_output<kM>(g, mm, 0, tiles, bias, epilogue, t.residual, t.output, c0, c1)
         : wino_avx2::transform_output<kM>(g, mm, 0, tiles, bias, epilogue, t.residual, t.output, c0, c1);
#else
  (void)avx512;
  wino_scalar::transform_output<kM>(g, mm, 0, tiles, bias, epilogue, t.residual, t.output, c0, c1);
#endif
}

}  // namespace

void NativeWinograd::run(const NativeArgs& args) const {
  Task task;
  task.op = this;
  task.geometry = {shape_, tiles_h_, tiles_w_, block_, in_pad_, out_pad_};
  task.input = args.input;
  task.residual = args.residual ? args.residual : args.output;
  task.output = args.output;
  task.scratch = static_cast<float*>(args.scratch);
  task.blocks = (tiles_ + block_ - 1) / block_;
  if (split_panels_) return run_split_panels(task, args.pool);
  // Each slot takes blocks until none is left: a block's numbers do not depend on who runs it.
  auto slot = [](void* ctx, size_t s) {
    Task& t = *static_cast<Task*>(ctx);
    const NativeWinograd& op = *t.op;
    float* v = t.scratch + s * op.slot_floats_;
    for (size_t b; (b = t.next.fetch_add(1, std::memory_order_relaxed)) < t.blocks;) {
      if (op.m_ == 4)
        run_block<4>(t, *op.gemm_, op.packed_.get(), op.epilogue_, op.avx512_, b, v);
      else
        run_block<2>(t, *op.gemm_, op.packed_.get(), op.epilogue_, op.avx512_, b, v);
    }
  };
  const size_t threads = args.pool ? pthreadpool_get_threads_count(args.pool) : 1;
  const size_t slots = std::min({slots_, threads, task.blocks});
  if (slots <= 1) return slot(&task, 0);
  pthreadpool_parallelize_1d(args.pool, slot, &task, slots, 0);
}

void NativeWinograd::run_split_panels(Task& task, pthreadpool_t pool) const {
  auto tile = [](void* ctx, size_t i) {
    const Task& t = *static_cast<const Task*>(ctx);
    t.op->m_ == 4 ? transform_tile<4>(t, t.op->avx512_, i) : transform_tile<2>(t, t.op->avx512_, i);
  };
  auto panel = [](void* ctx, size_t j) {
    const Task& t = *static_cast<const Task*>(ctx);
    const NativeWinograd& op = *t.op;
    op.m_ == 4 ? run_panel<4>(t, *op.gemm_, op.packed_.get(), op.epilogue_, op.avx512_, j)
               : run_panel<2>(t, *op.gemm_, op.packed_.get(), op.epilogue_, op.avx512_, j);
  };
  // The pool's first job ends when every tile is transformed: then each panel's GEMMs read
  // them all.
  for_each_row(pool, tiles_, tile, &task);
  for_each_row(pool, (gemm_->panels() + panel_group_ - 1) / panel_group_, panel, &task);
}

bool winograd_pays(const NativeConvShape& s, int threads, bool panel_split) {
  const size_t tiles = tile_count(s, 4);
  const size_t in_c = s.in_c, out_c = s.out_c;
  // Below 16 channels the vectors and the GEMMs' panels run part empty (not measured). A
  // 16-column GEMM on a long input (out_c 16, in_c >= 64) lost to the direct conv's k = 9 in_c
  // (0.86-0.95 on AVX-512). Every tile streams the transformed filters, 36 in_c out_c floats:
  // a map with few tiles per thread for its filters (512 -> 256 or -> 512 at 7x7, 512 -> 512
  // at 14x14 on 2 threads, each thread streaming all 37 MB) lost or tied.
  // Where the threads split the filters' panels (filters_outweigh_tiles), each filter byte is
  // read once per run at any thread count: the 1-thread rule.
  const size_t sharing = panel_split && filters_outweigh_tiles(s, 4) ? 1 : size_t(std::max(1, threads));
  // Dilated: the sub-images' tiles hold at least 3/4 output pixels (as 7x7 and 14x14 maps
  // do undilated). A map not much wider than the dilation (deeplab's ASPP, dilation 12 on
  // 16x16) leaves sub-images of 1-2 pixels, whose tiles compute mostly nothing.
  const bool filled = (s.dilation_h == 1 && s.dilation_w == 1) || size_t(s.batch) * s.out_h * s.out_w * 4 >= tiles * 48;
  return NativeWinograd::supports(s) && in_c >= 16 && out_c >= 16 && (out_c >= 32 || in_c <= 32) && filled &&
         tiles * 16384 >= in_c * out_c * sharing;
}

uint32_t winograd_choice(const NativeConvShape& s, int threads, bool panel_split, const NativeIsa& isa, bool f2,
                         bool dilated) {
  // Dilated convs: F(4x4) where winograd_pays, F(2x2) not measured there.
  if (s.dilation_h > 1 || s.dilation_w > 1) return dilated && winograd_pays(s, threads, panel_split) ? 4 : 0;
  const bool f4 = winograd_pays(s, threads, panel_split);
  const size_t in_c = s.in_c, out_c = s.out_c, pairs = in_c * out_c;
  if (!f2 || !NativeWinograd::supports(s) || in_c < 16 || out_c < 16 || (out_c < 32 && in_c > 32))
    return f4 ? 4 : 0;
  const size_t t = size_t(std::max(1, threads)), rows = NativeConv::tile_pixels(isa);
  const size_t tiles4 = tile_count(s, 4);
  // F(2x2)'s threads split its filters' panels: each filter byte read once per run.
  const bool split2 = panel_split && filters_outweigh_tiles(s, 2);
  // Fewer F(4x4) tiles per thread than a micro-tile has rows (7x7 and 8x8 maps): F(4x4)'s
  // GEMMs run part empty and lost to the direct conv by 1.3-3x (AVX-512; filters cold).
  // F(2x2)'s 16 tiles fill them: on one thread it beat the k-blocked AVX-512 direct conv only
  // for deep filters (512 -> 512, 448 -> 384; tied at 256 -> 256, lost at 192 -> 384), the
  // AVX2 direct conv from 48 -> 128 up. At 2 threads the direct conv won, but for F(2x2)
  // with split panels on AVX2 (512 -> 512).
  // Half-width AVX-512 cores (Zen 4: a zmm FMA takes two cycles) run the direct conv at half
  // a full-width core's rate while the transforms cost about the same, so at 2+ threads they
  // keep Winograd where full-width cores leave it: F(2x2) with split panels here, as AVX2.
  const bool half_width = isa.avx512 && isa.half_width;
  if (tiles4 < rows * t) {
    if (t == 1) {
      if (pairs >= (isa.avx512 ? size_t(131072) : size_t(6144))) return 2;
      return isa.avx512 ? 0 : f4 ? 4 : 0;
    }
    return split2 && (!isa.avx512 || half_width) ? 2 : 0;
  }
  // At 2+ threads, fewer than two micro-tiles of F(4x4) tiles per thread (13x13 and 14x14
  // maps) in blocks of tiles: each thread's blocks stream all of F(4x4)'s filters (36 in_c
  // out_c floats, from memory); F(2x2)'s are 2.25x smaller and its 49 tiles fill the GEMMs.
  // Wide filters the k-blocked AVX-512 direct conv reads once, fastest of the three (256 ->
  // 256). Where F(4x4) splits its panels, F(2x2) must too (384 -> 384: F(4x4) split won).
  const bool split4 = panel_split && filters_outweigh_tiles(s, 4);
  // Half-width AVX-512: F(4x4) itself, there about twice as fast as F(2x2) or the direct
  // conv on resnet's 14x14 256 -> 256 (bench/README.md, "Half-width AVX-512").
  if (f4 && t > 1 && tiles4 < 2 * rows * t && (!split4 || split2))
    return half_width ? 4 : isa.avx512 && !split2 && pairs >= 65536 ? 0 : 2;
  return f4 ? 4 : 0;
}

}  // namespace nn::cpu
