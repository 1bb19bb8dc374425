// nnpipe's own CPU kernels for the ops that dominate mobile vision models, used by the
// CPU delegate in place of XNNPACK where they pay (measured; bench/README.md):
//
// - NativeConv: dense or grouped convolution as a packed-weight GEMM with an AVX2/FMA 6x16
//   micro-kernel, or AVX-512F 8x32 / 8x16 ones (32-wide panels above 16 output channels)
//   on CPUs that have it (bench/README.md has what each bought on Zen 5). The Debian XNNPACK build (Feb 2022,
//   GCC) spills one accumulator of its f32 5x16 FMA3 GEMM/IGEMM kernels to the stack on every k step, which
//   caps every dense conv at ~35 GFLOP/s on a core that peaks near 100 (a 1x1 conv 32x32x512->512 measured
//   34.6 GFLOP/s).
// - NativeDepthwise: depthwise conv (multiplier 1) on 16-channel AVX-512F or 8-channel AVX2
//   vectors, several output pixels per step.
// - NativeDeconv: transpose conv whose kernel equals its stride (no overlap, no padding),
//   e.g. the 2x upsampling head of the selfie models: per input pixel a few dot products.
// - NativeResize: bilinear resize, two blends per output pixel.
//
// Every kernel applies an Epilogue (native_epilogue.h) before storing, so a following
// RELU*, HARD_SWISH and residual ADD cost no extra pass. Weights are packed once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "delegates/cpu/native_epilogue.h"
#include "ops/resize_taps.h"

typedef struct pthreadpool* pthreadpool_t;

namespace nn::cpu {

// True when this CPU has AVX2 and FMA (the kernels' instruction set).
bool native_conv_supported();
// True when this CPU has AVX-512F (the native kernels' wider variants).
bool native_avx512_enabled();
// This CPU's L1 data cache per core (cpuinfo; 32 KB when it cannot tell).
size_t l1d_bytes();
// This CPU's L2 cache per core (cpuinfo; 256 KB when it cannot tell).
size_t l2_bytes();
// True when this CPU's AVX-512 runs on 256-bit halves (Zen 4: a zmm FMA costs two ymm ones),
// measured once.
bool avx512_half_width();
// True when this CPU has AMX-INT8 and the OS saves its tile state (NativeIsa::amx).
bool amx_int8_cpu();
// amx_int8_cpu() and Linux lets this process use the tiles (asked once, by the first call).
bool amx_int8_usable();

// Which variants the native kernels use: what the CPU has, less what CpuOptions turns off
// (each op is given it when built, so one process can run and test both).
struct NativeIsa {
  bool avx512 = false;      // the AVX-512F kernels, else the AVX2 ones
  bool half_width = false;  // NativeConv on AVX-512: ymm kernels for last panels of 1-8 / 17-24 columns
  bool two_rows = true;     // NativeDepthwise: output rows in pairs
  bool avx2_8_columns = true;  // NativeConv on AVX2: panels of <= 8 valid columns on the 8x8 kernel
  bool avx_vnni = false;       // int8 kernels without AVX-512: AVX-VNNI's ymm vpdpbusd (the CPU has it)
  bool amx = false;            // int8 GEMMs with AVX-512 VNNI: AMX tiles (the CPU has them)
  bool edge_taps = true;       // NativeConv: a dilated stride-1 conv's edge micro-tiles tap by tap
  bool transpose_tiles = true;  // native transposes: 8 x 8 tiles through AVX2 registers
  bool small_image_rows = true;  // NativeConv on a small image: threads split rows where its pixels outweigh its weights
  bool k_block_rows = true;      // NativeConv, k-blocked 1x1, small image: one row piece per thread over every panel
  bool gated_rows = true;        // NativeConv, gated 1x1, one row tile: the gate on its input rows, not its weights
  bool serial_row_tiles = true;  // NativeConv, k-blocked 1x1, one thread: each row tile through every panel
  bool k_blocks = true;         // NativeConv on AVX-512: deep panels in L1-sized slices of k (k_block)
  bool avx2_k_blocks = true;    // NativeConv on AVX2: the same on its 16-wide panels
  bool small_image_im2col = true;  // NativeConv, k-blocked, small image: im2col rows once, one k-blocked pass
  bool grouped_pairs = true;       // AVX-512 grouped convs of <= 16 channels per group: NativeGroupedConv
  bool expand_depthwise_pairs = true;  // NativeExpandDepthwise: its depthwise's row pairs (run_two_rows)
  bool dot_conv = true;        // convs of 1-4 output channels: NativeDotConv (a dot product per pixel)
  bool depthwise_pixel_pairs = true;  // NativeDepthwise, 8 channels on AVX-512: two pixels per zmm
  // All this CPU has (every switch on).
  static NativeIsa best();
  // avx512: allowed; half_width: 1 forced on, 0 forced off, -1 measured (avx512_half_width).
  static NativeIsa with(bool avx512, int half_width, bool two_rows, bool avx2_8_columns = true,
                        bool avx_vnni = true);
};

struct NativeConvShape {
  uint32_t batch = 1, in_h = 0, in_w = 0, in_c = 0;
  uint32_t out_h = 0, out_w = 0, out_c = 0;
  uint32_t kernel_h = 1, kernel_w = 1;
  uint32_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  uint32_t pad_top = 0, pad_left = 0;  // bottom/right padding follows from the output size
  // GROUPED_CONV_2D: in_c and out_c split into this many independent convs (the filter's
  // last axis is in_c / groups).
  uint32_t groups = 1;
};

// x = x / (1 + exp(-x)) over `rows` runs of n floats, `stride` apart: the swish stage of
// an epilogue (native_epilogue.h), on 16 lanes (avx512) or 8.
void swish_inplace(float* data, size_t rows, size_t n, size_t stride, bool avx512);
// x = x * (1 + erf(x / sqrt 2)) / 2 (gelu_approx, native_epilogue.h) the same way: the GELU
// stage; tanh_form: its tanh approximation (gelu_tanh_approx).
void gelu_inplace(float* data, size_t rows, size_t n, size_t stride, bool avx512, bool tanh_form = false);

// body(ctx, row) for every row in [0, rows): on the calling thread without a pool, else
// spread over the pool's threads.
void for_each_row(pthreadpool_t pool, size_t rows, void (*body)(void*, size_t), void* ctx);

using AlignedFloats = std::unique_ptr<float, void (*)(float*)>;
// count floats, 64-byte aligned and zeroed; null when out of memory.
AlignedFloats allocate_floats(size_t count);

// What one run of a native op reads and writes, bound once by the CPU delegate when its
// buffers are known (prepare), so a run is one call with one record.
struct NativeArgs {
  const float* input = nullptr;     // NHWC (NativeAddMean: the ADD's first operand)
  const float* residual = nullptr;  // shaped like the output, added by the epilogue; null when it has
                                    // none (NativeAddMean: the ADD's second operand)
  float* output = nullptr;          // NHWC
  // NativeConv with a scaled input (enable_scaled_input): it reads input * gate (+ gate_sum),
  // gate one value per input channel, the tail of a squeeze-and-excitation block.
  const float* gate = nullptr;
  const float* gate_sum = nullptr;
  // scratch_bytes() of working memory, 64-byte aligned, its contents undefined on entry
  // (the CPU delegate places it in its arena, live only while the op runs).
  void* scratch = nullptr;
  pthreadpool_t pool = nullptr;     // null: run on the caller
};

// One op run by a native kernel, its weights packed once.
class NativeOp {
 public:
  virtual ~NativeOp() = default;
  virtual void run(const NativeArgs& args) const = 0;
  // Bytes of NativeArgs::scratch a run needs.
  virtual size_t scratch_bytes() const { return 0; }
  bool ok() const { return packed_ != nullptr; }

 protected:
  AlignedFloats packed_{nullptr, nullptr};
};

class NativeConv final : public NativeOp {
 public:
  // filter: OHWI [out_c, kernel_h, kernel_w, in_c]; bias: [out_c] or nullptr.
  NativeConv(const NativeConvShape& shape, const float* filter, const float* bias, const Epilogue& epilogue,
             const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;

  // Pointwise convs only: from now on run() computes the conv of input * gate (+ gate_sum)
  // (NativeArgs), the tail of a squeeze-and-excitation block (MUL by the gate, then maybe
  // the ADD of a skip tensor). Without a sum the gate goes into a copy of the weights each
  // run, in the scratch (in_c x out_c multiplies, not a pass over the tensor); with one,
  // each tile of the input becomes input * gate + sum in cache first (one FMA per input
  // value). Without a sum too where the image is one k-blocked row tile with fewer pixels than
  // output channels (NativeIsa::gated_rows; gated_rows()). False when the conv is not pointwise.
  bool enable_scaled_input(bool with_sum);
  // Whether run() gates its input per tile (a sum, or gated_rows' shape), not its weights.
  bool gated_rows() const { return gate_rows_; }
  // Pointwise convs, not scaled: the conv of `pixels` consecutive pixels on the calling
  // thread, input / residual (or null) / output given at the first of them (a depthwise
  // conv's output rows, still in cache, projected by NativeExpandDepthwise).
  void run_pixels(const float* input, const float* residual, float* output, size_t pixels) const;
  bool pointwise() const { return pointwise_; }
  // Whether its edge micro-tiles run tap by tap, skipping the taps that read only padding
  // (NativeIsa::edge_taps; off, they go through im2col rows with every tap).
  bool edge_taps() const { return edge_taps_; }
  size_t scratch_bytes() const override;
  const Epilogue& epilogue() const { return epilogue_; }
  const NativeConvShape& shape() const { return shape_; }
  // Its last panel runs on the ymm kernel (NativeIsa::half_width and a 1-8 / 17-24 column tail).
  bool ymm_last_panel() const { return half_width_; }
  // Its last panel (1-8 valid columns) runs on the AVX2 8x8 kernel (NativeIsa::avx2_8_columns).
  bool eight_column_panel() const { return avx2_8_columns_; }
  // Whether `threads` threads split its output rows where its image is too small for tiles
  // of rows (NativeIsa::small_image_rows, its pixels outweighing its weights); else they
  // split its output channels' panels.
  bool splits_rows(size_t threads) const;
  // Whether `threads` threads split the rows of a k-blocked 1x1 conv on such an image where
  // splits_rows does not (its weights outweighing its pixels), one piece per thread over
  // every panel (NativeIsa::k_block_rows; up to 1 MB of weights, not gated per run, 3+
  // micro-tiles per thread); else its panels.
  bool k_block_rows(size_t threads) const;
  // k steps per slice of its weights when k-blocked (NativeIsa::k_blocks: AVX-512, a panel
  // larger than half of L1; NativeIsa::avx2_k_blocks: AVX2, the same), else 0.
  size_t k_block() const { return k_block_; }
  // Whether at `threads` threads every micro-tile goes through im2col rows, built once per
  // thread and run as one k-blocked call per panel, each thread taking a run of panels
  // (NativeIsa::small_image_im2col: a k-blocked conv on an image of fewer than 5 row tiles
  // whose im2col rows fit in 2 MB, whose panels split evenly between the threads; its rows
  // then never split, splits_rows).
  bool im2col_once(size_t threads) const;
  // Whether at `threads` threads (one: no pool) its tiles run row tile by row tile, each
  // through every panel, as a pool's threads take them (NativeIsa::serial_row_tiles: a
  // k-blocked 1x1 conv of more than one row tile and panel tile whose input outgrows half
  // of L2); else panel tile by panel tile, each over every row tile.
  bool serial_row_tiles(size_t threads) const;
  // Output pixels per micro-tile of the kernels this CPU gets: a tile of fewer pixels costs
  // as much as a full one.
  static size_t tile_pixels(const NativeIsa& isa);

  struct Task;

 private:
  template <class Gemm>
  static void run_tile(void* ctx, size_t m0, size_t j0, size_t m_count, size_t j_count);
  template <class Gemm>
  static void run_tile_gemm(void* ctx, size_t m0, size_t j0, size_t m_count, size_t j_count);
  void dispatch(Task& task, pthreadpool_t pool) const;
  // The micro-kernel this conv runs: its tile function, rows per micro-tile, panel width,
  // and panels per tile.
  struct TileKernel {
    void (*fn)(void*, size_t, size_t, size_t, size_t);
    size_t rows, width, tile_n;
  };
  TileKernel tile_kernel() const;
  // Rows per tile of dispatch()'s tiles of rows.
  size_t dispatch_tile_m() const;
  // Panel j's first output channel and its valid columns, on panels kPanel wide.
  std::pair<size_t, size_t> panel_columns(size_t j, size_t panel) const {
    const size_t local = j % group_panels_ * panel;
    return {j / group_panels_ * group_out_ + local, std::min(panel, group_out_ - local)};
  }

  NativeConvShape shape_;
  Epilogue epilogue_;
  bool pointwise_ = false;
  bool avx512_ = false;      // the 8x16 / 8x32 AVX-512F kernels, else the 6x16 AVX2 one
  bool wide_ = false;        // AVX-512 with 32-wide panels (more than 16 output channels)
  bool half_width_ = false;  // and the last panel's 17-24 columns on the ymm kernel (avx512_half_width)
  bool avx2_8_columns_ = false;  // NativeIsa::avx2_8_columns
  size_t k_block_ = 0;           // k_block()
  size_t k_ = 0;             // GEMM depth: kernel_h * kernel_w * in_c
  size_t segments_ = 0;      // runs of A per output pixel read in place (kernel_h * taps_w_), or 0 (im2col only)
  size_t taps_w_ = 1;        // runs per kernel row: 1 (its taps contiguous), kernel_w when dilated
  bool strips_ = false;      // edge micro-tiles read zero-padded copies of their input rows
  bool small_image_rows_ = false;  // NativeIsa::small_image_rows
  bool k_block_rows_ = false;      // NativeIsa::k_block_rows
  bool gated_rows_ = false;        // NativeIsa::gated_rows
  bool serial_row_tiles_ = false;  // NativeIsa::serial_row_tiles
  bool im2col_once_ = false;       // im2col_once() where its rows do not split
  bool edge_taps_ = false;   // or, without strips, per-tap runs: dead taps skipped (NativeIsa::edge_taps)
  size_t n_blocks_ = 0;      // out_c in panels of 32 (AVX-512) or 16, group by group
  size_t group_in_ = 0;      // input channels per group (in_c when not grouped)
  size_t group_out_ = 0;     // output channels per group
  size_t group_panels_ = 1;  // panels per group: panel j serves group j / group_panels_
  bool scaled_ = false;      // run() reads input * gate (enable_scaled_input)
  bool scaled_sum_ = false;  // and adds a sum to its gated input
  bool gate_rows_ = false;   // and gates its input per tile (a sum, or gated_rows), on packed_;
                             // else gated weights in the scratch, rewritten per run
};

// Matrices B_0 .. B_{count-1} (each k x n) packed once for NativeConv's micro-kernels and
// multiplied on the calling thread: the GEMMs of a transform-domain convolution
// (NativeWinograd), which runs its own blocks over the pool.
class PackedGemm {
 public:
  // b: count matrices of k x n floats, row-major, one after another.
  PackedGemm(size_t count, size_t k, size_t n, const float* b, const NativeIsa& isa = NativeIsa::best());
  // c = a * B_i for m rows of a (lda floats apart) into c (ldc apart): n columns per row.
  void multiply(size_t i, size_t m, const float* a, size_t lda, float* c, size_t ldc) const;
  // The same for panels [j0, j1) only: columns [j0 * panel_width(), j1 * panel_width()).
  void multiply(size_t i, size_t m, const float* a, size_t lda, float* c, size_t ldc, size_t j0, size_t j1) const;
  size_t panels() const { return n_blocks_; }
  size_t panel_width() const;
  bool ok() const { return packed_ != nullptr; }

 private:
  size_t k_ = 0, n_ = 0;
  bool avx512_ = false, wide_ = false, half_width_ = false;  // as NativeConv's
  size_t k_block_ = 0;                                       // as NativeConv's k_block()
  size_t n_blocks_ = 0;                                      // panels per matrix
  AlignedFloats packed_{nullptr, nullptr};
};

class NativeDepthwise final : public NativeOp {
 public:
  // filter: [1, kernel_h, kernel_w, C]; bias [C] or nullptr; in_c == out_c (multiplier 1).
  NativeDepthwise(const NativeConvShape& shape, const float* filter, const float* bias,
                  const Epilogue& epilogue, const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;

  // Kernel heights above this run on XNNPACK (the row-pointer table is fixed-size).
  static constexpr uint32_t kMaxKernelH = 8;
  // Output row oy of one image: rows[ky] is the input row tap row ky reads (nullptr when it
  // falls in the padding); residual_row / output_row are that output row.
  void run_row(const float* const* rows, size_t oy, const float* residual_row, float* output_row) const;
  const NativeConvShape& shape() const { return shape_; }
  // Output rows computed in pairs (NativeIsa::two_rows, stride 1, 3 or 5 wide).
  bool row_pairs() const { return two_rows_; }
  // 8 channels on AVX-512, stride 1: two adjacent output pixels per zmm
  // (NativeIsa::depthwise_pixel_pairs).
  bool pixel_pairs() const { return pixel_pairs_; }
  // Output rows oy and oy + 1, both with every tap row inside the image (row_pairs() only):
  // rows[r] is input row oy - pad_top + r for r <= kernel_h; residual (or null) / output:
  // the two rows, contiguous.
  void run_two_rows(const float* const* rows, const float* residual_rows, float* output_rows) const;

  struct Task;

 private:
  NativeConvShape shape_;
  Epilogue epilogue_;
  bool avx512_ = false;                    // the 16-lane AVX-512F kernels, else the 8-lane AVX2 ones
  bool two_rows_ = false;                  // run() takes output rows in pairs (run_two_rows)
  bool pixel_pairs_ = false;               // 8 channels on AVX-512: two output pixels per zmm
  size_t lanes_ = 8;                       // channels per packed block: 16 (AVX-512) or 8
  size_t c_pad_ = 0;                       // channels rounded up to lanes_: the packed row length
  size_t ox_lo_ = 0, ox_hi_ = 0;           // output columns needing no horizontal bounds checks
  AlignedFloats zeros_{nullptr, nullptr};  // what taps in the padding read
};

class NativeDeconv final : public NativeOp {
 public:
  // Transpose conv with kernel == stride and no padding: out[y*sh+ky][x*sw+kx][o] =
  // bias[o] + sum_c in[y][x][c] * filter[o][ky][kx][c]. filter OHWI, bias [out_c] or nullptr.
  NativeDeconv(const NativeConvShape& shape, const float* filter, const float* bias,
               const Epilogue& epilogue, const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;

  struct Task;

 private:
  NativeConvShape shape_;
  Epilogue epilogue_;
  bool avx512_ = false;      // 4 pixels x 4 dot products per step on AVX-512F, else 4 dots on AVX2
  bool single_2x2_ = false;  // 2x2 taps, one output channel, no residual: 16 pixels a step (8 on AVX2)
  size_t n_ = 0;             // dot products per input pixel: kernel_h * kernel_w * out_c
  size_t c_pad_ = 0;         // in_c rounded up to 16 (AVX-512) or 8
  std::vector<float> bias_;
  std::vector<size_t> offsets_;  // output element of dot product n, from the pixel's first
};

struct NativeResizeShape {
  uint32_t batch = 1, in_h = 0, in_w = 0, channels = 0, out_h = 0, out_w = 0;
  bool align_corners = false, half_pixel_centers = false;
};

// RESIZE_BILINEAR with the reference kernel's sampling rule (ops/resize_taps.h). Takes no
// epilogue and no residual.
class NativeResize final : public NativeOp {
 public:
  explicit NativeResize(const NativeResizeShape& shape, const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;

  struct Task;

 private:
  NativeResizeShape shape_;
  std::vector<BilinearTap> rows_, cols_;  // per output row / column
  bool avx512_ = false;                   // 16 channels a step, else 8 (AVX2)
  bool twice_w_ = false;                  // out_w == 2 in_w, half-pixel taps: the row kernel for that
  std::vector<uint32_t> row_groups_;      // AVX2 twice_w_: each group's first output row
};

// A pointwise conv with no activation that read a bilinear resize, run in front of it:
// both are linear and every resized pixel's weights sum to one, so conv(resize(x)) equals
// resize(conv(x)) up to rounding, and the conv sees the small image (a quarter of the
// pixels behind a 2x upsampling; the selfie decoder has three). The conv's output at the
// small size lives in the scratch.
class NativeConvThenResize final : public NativeOp {
 public:
  // conv: built for the resize's input size; resize: for the conv's output channels;
  // small_floats: the conv's output.
  NativeConvThenResize(std::unique_ptr<NativeOp> conv, std::unique_ptr<NativeOp> resize, size_t small_floats);
  void run(const NativeArgs& args) const override;
  size_t scratch_bytes() const override;

 private:
  std::unique_ptr<NativeOp> conv_, resize_;
  size_t small_bytes_ = 0;  // the conv's output, 64-byte rounded, first in the scratch
};

// A conv feeding a depthwise conv that is its only reader, run as one op: an inverted
// residual's expansion (MobileNetV2's first: 112x112x96, 4.8 MB) or a stem conv. Each
// output row of the depthwise reads a few of the first conv's output rows, computed into a
// small per-chunk ring of rows as they are first needed, so that tensor is never written
// out and read back. The output rows are split into `chunks` contiguous ranges, one per
// thread; a range recomputes the few rows it shares with the range before it. The rings
// live in the scratch. With a projection (add_projection) the depthwise's output rows go
// through the block's 1x1 projection a few at a time, so that tensor is not written either.
class NativeExpandDepthwise final : public NativeOp {
 public:
  // first: the first conv's shape (dilation_h 1), filter OHWI, bias or nullptr, epilogue;
  // depthwise: built for the first conv's whole output. chunks: the most ranges run()
  // splits rows into.
  NativeExpandDepthwise(const NativeConvShape& first, const float* filter, const float* bias,
                        const Epilogue& epilogue, std::unique_ptr<NativeDepthwise> depthwise, size_t chunks,
                        const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;
  size_t scratch_bytes() const override;

  // From now on the depthwise's output rows, a few at a time, go through `project` (a
  // pointwise conv built for the depthwise's whole output, not scaled) while in cache: an
  // inverted residual's projection, its residual ADD in the projection's epilogue
  // (NativeArgs::residual is then the projection's). So the depthwise's output is never
  // written out either. False (nothing changed) when project does not fit.
  bool add_projection(std::unique_ptr<NativeConv> project);
  bool projects() const { return project_ != nullptr; }
  // Whether its depthwise runs output rows in pairs.
  bool row_pairs() const { return pairs_; }
  // Depthwise output rows per projection call: at least kProjectPixels pixels (a pass over
  // the projection's weights serves that many).
  static constexpr size_t kProjectPixels = 48;

  // Rows of its input a range of depthwise output rows recomputes at its start (the
  // kernel's reach beyond one stride).
  static size_t halo_rows(const NativeConvShape& depthwise);
  // Whether a first conv of this shape can run a row at a time: rows of taps contiguous
  // (dilation_h 1), and every output row reading at least one input row (not padding only).
  static bool supports(const NativeConvShape& first);

  struct Task;

 private:
  NativeConvShape first_;
  // The first conv for one output row, one per distinct set of taps in the padding (top,
  // bottom): reads the row's in-image input rows in place.
  std::vector<std::unique_ptr<NativeConv>> row_convs_;
  std::vector<uint32_t> row_conv_of_;  // per output row of the first conv
  std::unique_ptr<NativeDepthwise> depthwise_;
  size_t chunks_ = 1;
  // Depthwise output rows two at a time (its row_pairs(), NativeIsa::expand_depthwise_pairs):
  // the ring holds one more row, the pair's taps.
  bool pairs_ = false;
  size_t ring_rows_ = 0;   // first-conv rows one depthwise row (pairs_: two) reads
  size_t row_floats_ = 0;  // one such row, padded to 64 bytes
  // Scratch: chunks_ x ring_rows_ rows, then per chunk and slot the row it holds (int64),
  // then (projecting) per chunk group_rows_ depthwise output rows.
  size_t ring_bytes_ = 0;
  size_t held_bytes_ = 0;  // the held rows, 64-byte rounded
  std::unique_ptr<NativeConv> project_;
  size_t group_rows_ = 0;    // depthwise output rows per projection call
  size_t group_floats_ = 0;  // one chunk's buffer of them, padded to 64 bytes
};

struct NativeAddMeanShape {
  uint32_t batch = 1, rows = 0, row_pixels = 0, channels = 0;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
};

// The channel means of clamp(a + b) over the image: an ADD whose only reader is a global
// average (AVERAGE_POOL_2D over the whole image, or MEAN over H and W), in one read of both
// tensors instead of writing the sum and reading it back (the selfie decoder's
// squeeze-and-excitation inputs; its 128x128 one was 4.5% of the model). Reads
// NativeArgs::input and ::residual (a and b), writes the means to ::output. Without a residual,
// the channel means of a alone (a global MEAN, CpuOptions::native_mean).
class NativeAddMean final : public NativeOp {
 public:
  explicit NativeAddMean(const NativeAddMeanShape& shape, const NativeIsa& isa = NativeIsa::best());
  void run(const NativeArgs& args) const override;
  // Per image row, its channel sums.
  size_t scratch_bytes() const override;

  struct Task;

 private:
  NativeAddMeanShape shape_;
  bool avx512_ = false;
};

}  // namespace nn::cpu
