// Sessions: a model compiled onto delegates, run synchronously or through an
// asynchronous "latest input wins" worker (what the video elements use).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/requantization.h"
#include "nn/runtime/tensor.h"
#include "nn/status.h"

namespace nn {

// The CPU delegate's tuning switches: each of its own kernels and fusions can be turned
// off, to compare against what it replaced (XNNPACK's node or the reference kernel) and
// to test both paths on one host. All on by default; the library never reads the
// environment for them: tools and benchmarks call from_environment().
struct CpuOptions {
  // nnpipe's dense / depthwise / transpose conv, bilinear resize and ADD+mean kernels
  // (native_kernels.h) where they beat XNNPACK; off: XNNPACK runs them. NN_NO_NATIVE_CONV=1.
  bool native_kernels = true;
  // CONCATENATION, TRANSPOSE, SLICE, MEAN over an axis, ERF on nnpipe's kernels
  // (native_data.h); off: the reference kernels. NN_NO_NATIVE_DATA=1.
  bool native_data_ops = true;
  // The AVX-512F kernels on CPUs that have it; off: the AVX2 ones. NN_NO_AVX512=1.
  bool avx512 = true;
  // Native convs on AVX-512 give their last panel of 1-8 or 17-24 output channels to the
  // ymm kernel where a zmm FMA costs two ymm ones (Zen 4), and at 2+ threads keep small maps'
  // 3x3 convs on Winograd where full-width cores take the direct conv (winograd_choice).
  // kAuto measures the CPU once. NN_AVX512_HALF_WIDTH=1 / 0.
  enum class HalfWidth { kAuto, kOn, kOff };
  HalfWidth avx512_half_width = HalfWidth::kAuto;
  // Native depthwise convs compute output rows in pairs (sharing input rows). NN_NO_TWO_ROWS=1.
  bool depthwise_two_rows = true;
  // Native depthwise convs of 8 channels (stride 1) on AVX-512 put two adjacent output
  // pixels in each zmm, not one pixel in half of it. NN_NO_PIXEL_PAIRS=1.
  bool depthwise_pixel_pairs = true;
  // AVX2 native convs run a 16-wide weight panel with at most 8 valid columns (24, 40, 72,
  // 120 channels: the last 8) on an 8-row x 8-column kernel, not the 6 x 16 one that computes
  // 8 empty columns. NN_NO_AVX2_8_COLUMNS=1.
  bool avx2_8_columns = true;
  // AVX-512 native convs whose weight panels outgrow half of L1 walk them in slices of k
  // that stay there while all of a tile's rows (up to 64) run through each; off: each 8-row
  // micro-tile streams the whole panel. NN_NO_K_BLOCKS=1.
  bool k_blocks = true;
  // AVX2 native convs the same, on their 16-wide panels (6-row micro-tiles); off: each
  // micro-tile streams the whole panel. NN_NO_AVX2_K_BLOCKS=1.
  bool avx2_k_blocks = true;
  // A k-blocked native conv on an image of fewer than 5 row tiles (7x7 to 17x17 on AVX-512,
  // to 15x15 on AVX2)
  // builds its im2col rows once (per thread, each taking a run of its panels) and runs
  // them as one k-blocked call per panel, not tile by tile in place. NN_NO_SMALL_IMAGE_IM2COL=1.
  bool small_image_im2col = true;
  // A RESHAPE of a native data op's output (TRANSPOSE, CONCATENATION, SLICE...) read by
  // nothing else is written by that op directly, with no copy or step of its own.
  // NN_NO_FOLD_RESHAPE=1.
  bool fold_reshapes = true;
  // A float CONCATENATION along the channels read only by a MUL by a per-channel constant,
  // that read only by an ADD of one (a batch norm; then a RELU*, DenseNet's layers): the
  // concat's copy computes the MUL, ADD and clamp and writes the last op's output, with the
  // same roundings. NN_NO_CONCAT_AFFINE=1.
  bool concat_affine = true;
  // A native TRANSPOSE that moves the input's contiguous dim to second to last (NHWC <->
  // NCHW) moves 8 x 8 tiles through AVX2 registers; off: 8 floats at a time, scalar
  // stores. NN_NO_TRANSPOSE_TILES=1.
  bool transpose_tiles = true;
  // Native dilated stride-1 convs run the micro-tiles at the image's left and right edges
  // (and across output rows) tap by tap, skipping taps that read only padding; off: im2col
  // rows with every tap. NN_NO_EDGE_TAPS=1.
  bool edge_taps = true;
  // A pointwise conv reading a bilinear upsampling runs before it, on the small image.
  // NN_NO_CONV_BEFORE_RESIZE=1.
  bool conv_before_resize = true;
  // An ADD read only by a global average becomes one pass (native add+mean). NN_NO_ADD_MEAN=1.
  bool add_mean = true;
  // A float MEAN over height and width of at least 10 rows and 256 KB runs on the native row
  // sums (native global mean), its rows split over the pool so each thread reads the rows it
  // wrote; XNNPACK's global average pool runs an image on one thread. NN_NO_NATIVE_MEAN=1.
  bool native_mean = true;
  // A squeeze-and-excitation gate (MUL, maybe + ADD) is read in place by the 1x1 conv after
  // it (native conv, gated input). NN_NO_SE_FUSION=1.
  bool se_fusion = true;
  // A conv and the depthwise conv reading it run row by row as one op (native
  // conv+depthwise) where that pays. NN_NO_EXPAND_DEPTHWISE=1.
  bool expand_depthwise = true;
  // Such a fused depthwise's output rows go, a few at a time and still in cache, through the
  // pointwise conv that is their only reader (an inverted residual's projection, its
  // residual ADD in its epilogue): native conv+depthwise+conv. NN_NO_DEPTHWISE_PROJECT=1.
  bool depthwise_project = true;
  // A fused conv+depthwise whose depthwise takes stride-1 rows in pairs (run_two_rows, its
  // taps loaded once for both rows) does so on the ring's rows too, not a row at a time.
  // NN_NO_EXPAND_DEPTHWISE_PAIRS=1.
  bool expand_depthwise_pairs = true;
  // SiLU (LOGISTIC and the MUL by its input) after a native conv or depthwise conv runs in
  // its epilogue. NN_NO_SWISH_EPILOGUE=1.
  bool swish_epilogue = true;
  // GELU after a native FULLY_CONNECTED or 1x1 conv runs in its epilogue: the erf form (DIV
  // by sqrt 2, ERF, ADD 1, MUL by the input, MUL 0.5) and the tanh form (POW 3, MUL 0.044715,
  // ADD, MUL sqrt(2 / pi), TANH, ADD 1, MULs). NN_NO_GELU_EPILOGUE=1.
  bool gelu_epilogue = true;
  // A MUL by one constant per output channel after a native FULLY_CONNECTED or 1x1 conv
  // (ConvNeXt's layer scale) is multiplied into its filter and bias. NN_NO_SCALE_FOLD=1.
  bool channel_scale_fold = true;
  // LayerNorm over the channels written as ops (MEAN, SUB, POW, MEAN, ADD eps, SQRT, DIV,
  // MUL gamma, ADD beta) runs as one native op. NN_NO_LAYER_NORM=1.
  bool layer_norm = true;
  // At 2+ threads a native conv on an image too small for tiles of rows (14x14 on AVX-512)
  // splits its rows between the threads, not its output channels, where its pixels outweigh
  // its weights: each core then reads the rows it wrote one op earlier. NN_NO_SMALL_IMAGE_ROWS=1.
  bool small_image_rows = true;
  // At 2+ threads a k-blocked 1x1 conv on such an image whose weights outweigh its pixels
  // splits its rows too, one piece per thread over every panel (each slice of weights read by
  // all of the thread's rows), not its panels: each core reads only its rows of the input.
  // NN_NO_K_BLOCK_ROWS=1.
  bool k_block_rows = true;
  // A squeeze-and-excitation gate before a k-blocked 1x1 conv on an image of one row tile
  // (7x7, 8x8) with fewer pixels than output channels multiplies each tile's input rows, not
  // a copy of the weights per run (fewer multiplies; at 2+ threads its rows then split as
  // k_block_rows, each core gating the rows it wrote). NN_NO_GATED_ROWS=1.
  bool gated_rows = true;
  // At one thread a k-blocked 1x1 conv whose input outgrows half of L2 runs its tiles row
  // tile by row tile, each through every panel (as a pool's threads take them), not panel
  // by panel over every row tile: a row tile's A block stays in L2 where the whole image's
  // does not. NN_NO_SERIAL_ROW_TILES=1.
  bool serial_row_tiles = true;
  // A native conv drops kernel rows / columns that read only padding for every output
  // pixel (dilations wider than the image). NN_NO_DEAD_TAPS=1.
  bool drop_dead_taps = true;
  // Dense 3x3 stride-1 convs where F(4x4, 3x3) Winograd beats the native direct conv
  // (winograd_pays, delegates/cpu/native_winograd.h). NN_NO_WINOGRAD=1.
  bool winograd = true;
  // Where a Winograd conv's filters outweigh its tiles (512 -> 512 at 28x28, FCN's 2048 ->
  // 512 head), all tiles run as one block and the threads split the filters' panels, so each
  // filter byte is read once per run; off: blocks of tiles, each streaming all the filters
  // (and at 2+ threads such convs go to the direct conv). NN_NO_WINOGRAD_SPLIT=1.
  bool winograd_panel_split = true;
  // On small maps, whose few 4x4 tiles leave F(4x4)'s GEMMs part empty and read its filters
  // per few tiles, F(2x2, 3x3) or the direct conv as winograd_choice picks per shape, threads
  // and ISA; off: winograd_pays alone (F(4x4) or the direct conv). NN_NO_WINOGRAD_F2=1.
  bool winograd_f2 = true;
  // Dilated 3x3 stride-1 convs (FCN's and DeepLab's backbones) on F(4x4, 3x3) Winograd, one
  // undilated conv per polyphase sub-image, where winograd_pays for the sub-images' tiles
  // and they are at least 3/4 filled; off: the native direct conv. NN_NO_DILATED_WINOGRAD=1.
  bool dilated_winograd = true;
  // FULLY_CONNECTED over at least a micro-tile of rows (ConvNeXt's and transformers' MLPs
  // over every pixel) on the native 1x1 conv kernel; off: XNNPACK. NN_NO_NATIVE_FC=1.
  bool native_fully_connected = true;
  // GROUPED_CONV_2D (RegNet's group convs) on the native conv kernel, group by group, on the
  // AVX2 kernels (grouped_conv_pays); off: XNNPACK. NN_NO_NATIVE_GROUPED=1.
  bool native_grouped_conv = true;
  // On AVX-512, grouped convs of 8-16 output channels per group (RegNet's group width 16) on
  // NativeGroupedConv, two groups per micro-kernel call (16 accumulators where NativeConv's
  // group-by-group 8 x 16 kernel has 8); off: XNNPACK, as before. NN_NO_GROUPED_PAIRS=1.
  bool grouped_pairs = true;
  // A dense conv of 1-4 output channels (a segmentation or heatmap head) as one dot product
  // per output pixel and channel (NativeDotConv), not on the GEMM's 16- / 8-wide panels of
  // output channels, which it would mostly leave empty. NN_NO_DOT_CONV=1.
  bool dot_conv = true;
  // int8 convs (VNNI / AVX2 GEMM), depthwise and tiled transpose convs, MUL, HARD_SWISH, TANH,
  // MEAN and bilinear resize on nnpipe's kernels (delegates/cpu/native_int8.h); off: XNNPACK
  // or the reference. NN_NO_NATIVE_INT8=1.
  bool native_int8 = true;
  // Without AVX-512, native int8 convs and depthwise convs use AVX-VNNI's vpdpbusd on ymm
  // registers where the CPU has it (Intel 12th gen and later, Zen 5); off: vpmaddubsw +
  // vpmaddwd, as on AVX2 CPUs without it. NN_NO_AVX_VNNI=1.
  bool avx_vnni = true;
  // With AVX-512 VNNI, int8 convs of enough rows, input and output channels run their GEMM
  // on AMX tiles (TDPBSSD: 16x16 int32 += 16x64 by 64x16 int8) where the CPU and the kernel
  // allow it (Intel Sapphire Rapids and later); off: the VNNI GEMM. NN_NO_AMX=1.
  bool amx = true;
  // On AMX, a task's last block of fewer than 32 rows (where the task has 32 or more) is its
  // last 32 rows read in place, the rows already written not stored again
  // (NN_NO_AMX_IN_PLACE_TAIL=1: a zero-padded copy of the short block).
  bool amx_in_place_tail = true;
  // Native int8 convs, depthwise and transpose convs requantize in fp32 as XNNPACK's and
  // qnnpack's kernels do (float(acc) * scale, rounded to nearest even, + zo; 5 vector ops per
  // 16 outputs where NNAPI's fixed point takes 11-17): within one step of NNAPI's
  // arithmetic, equal on nearly every byte. NN_NO_INT8_FP32_REQUANT=1: NNAPI's fixed point,
  // the reference kernels' bytes exactly.
  bool int8_fp32_requant = true;
  // Within native_int8: LOGISTIC by its table (NN_NO_NATIVE_INT8_LOGISTIC=1) and a global
  // AVERAGE_POOL_2D (NN_NO_NATIVE_INT8_POOL=1); off: XNNPACK (within one step). An exact
  // same-shaped ADD in NNAPI's fixed point, off by default: about 3x slower than XNNPACK's
  // one-rounding qs8 add (within one step). NN_NATIVE_INT8_ADD=1 turns it on.
  bool native_int8_logistic = true;
  bool native_int8_pool = true;
  bool native_int8_add = false;
  // With AVX-512 VBMI, a same-shaped int8 ADD as four 256-entry byte tables (native_int8_add.h,
  // Int8AddTable), where they give NNAPI's bytes for all 65536 input pairs (checked when the
  // kernel is made): exact, and faster than XNNPACK's qs8 add. NN_NO_NATIVE_INT8_ADD_TABLE=1.
  bool native_int8_add_table = true;
  // With AVX2 but not AVX-512, a same-shaped int8 ADD in XNNPACK's one-rounding scheme on
  // int16 lanes (vpmaddwd of each input pair by int16 multipliers, one shift), where within
  // one step of NNAPI's bytes for all 65536 input pairs (checked when the kernel is made);
  // faster than XNNPACK's qs8 add. NN_NO_NATIVE_INT8_ADD_AVX2=1: XNNPACK.
  bool native_int8_add_avx2 = true;
  // A same-shaped int8 ADD reading a native int8 conv's or depthwise conv's output (read by
  // nothing else) applied by that conv to the rows it has just written, with NNAPI's exact
  // ADD arithmetic. Off by default: the exact ADD costs more than XNNPACK's one-rounding qs8
  // add step plus what the fusion saves (bench/README.md, int8). NN_NATIVE_INT8_RESIDUAL=1.
  bool native_int8_residual = false;
  // The same fused residual ADD by Int8AddTable's byte tables, where AVX-512 VBMI runs them and
  // they give NNAPI's bytes for every input pair (as native_int8_add_table): exact, and cheaper
  // in the conv's cache-warm rows than a step of its own. NN_NO_NATIVE_INT8_RESIDUAL_TABLE=1.
  bool native_int8_residual_table = true;
  // The table ops' (HARD_SWISH, TANH) 32-byte vpshufb lookup without AVX-512 VBMI
  // (NN_NO_NATIVE_INT8_TABLE_AVX2=1: byte by byte).
  bool native_int8_table_avx2 = true;
  // A 2x width RESIZE_BILINEAR (half-pixel centres), AVX-512 or AVX2: each input pixel loaded once
  // for the two output pixels beside it (NN_NO_NATIVE_INT8_RESIZE_TWICE_W=1: per-pixel taps).
  bool native_int8_resize_twice_w = true;
  // That row with AVX-512, its column weights 3/4 and 1/4: each product by 1/4 (exact) fused
  // with the add after it, each product by 3/4 made once for its two output pixels; the
  // same roundings, so the same bytes (NN_NO_NATIVE_INT8_RESIZE_QUARTERS=1: four products).
  bool native_int8_resize_quarters = true;
  // The int8 resize's AVX-512 requantization divides by the output scale as a product by its
  // reciprocal plus one FMA correction, where checked (when the kernel is made) to round to
  // the division's bytes (int8_resize_reciprocal). NN_NO_NATIVE_INT8_RESIZE_RECIPROCAL=1.
  bool native_int8_resize_reciprocal = true;
  // That 2x width row (AVX-512 or AVX2, the same bytes), where the input and output share
  // scale and zero point and every row weight is a multiple of 1/4 (selfie's three
  // upsamplings): the taps' weighted sum in int16 and its rounding by a shift, within one step
  // of the reference's float blend (equal but near a half). NN_NO_NATIVE_INT8_RESIZE_INTEGER=1:
  // the float blend, exact.
  bool native_int8_resize_integer = true;
  // An int8 MUL by a per-channel gate (squeeze-and-excite): its two products as vpdpwssd on
  // int16 pairs (AVX-512 VNNI, 64 elements a step; AVX-VNNI or AVX2's vpmaddwd, 32) across
  // pixels, packed to bytes with saturation; the same bytes (NN_NO_NATIVE_INT8_GATE_PAIRS=1:
  // two vpmulld per 16 / 8 outputs, pixel by pixel).
  bool native_int8_gate_pairs = true;
  // The VNNI int8 GEMM reads its rows in place when k % 4 == 0, flipping each broadcast in a
  // register (NN_NO_NATIVE_INT8_IN_PLACE_TILES=1: through a flipped copy per tile).
  bool native_int8_in_place_tiles = true;
  // A VNNI int8 conv whose tap rows are narrow (kernel_w * in_c <= 16 bytes: an RGB stem)
  // lays each output row's window rows out once, padded and flipped to unsigned, and reads
  // every pixel's taps there 4 bytes a broadcast, weights held in registers; on AVX2 without
  // AVX-VNNI (kernel_w * in_c <= 28) the rows are laid out as int16 x - zx and read a pair a
  // broadcast into vpmaddwd; the same bytes (NN_NO_NATIVE_INT8_DIRECT_WINDOWS=1: each
  // pixel's window gathered into a GEMM row).
  bool native_int8_direct_windows = true;
  // A native int8 table op (HARD_SWISH, LOGISTIC, TANH) whose output a DEQUANTIZE to float
  // alone reads writes the float values itself, so the int8 tensor and the DEQUANTIZE step
  // go (selfie's sigmoid head). NN_NO_INT8_TABLE_DEQUANTIZE=1.
  bool int8_table_dequantize = true;
  // A native int8 table op (HARD_SWISH, LOGISTIC, TANH) that alone reads a native int8 conv's
  // or depthwise conv's output applied by the conv to each chunk of rows it has just written:
  // the same bytes, no step or pass over memory of its own. NN_NO_INT8_CONV_TABLE=1.
  bool int8_conv_table = true;
  // A native int8 1x1 conv and the native int8 3x3 / 5x5 depthwise conv that alone reads it
  // run as one op: the conv's rows into a ring of the depthwise's kernel height that the
  // depthwise reads at once, so the expanded tensor is never written (an inverted residual's
  // expansion). With 2 threads or more, AVX-512 VNNI. NN_NO_INT8_EXPAND_DEPTHWISE=1.
  bool int8_expand_depthwise = true;
  // With a thread pool: each partition times runs sharing the pool and runs on the caller
  // alone, both now and then, and runs the faster way (runtime/thread_pool.h,
  // ParallelChoice): a host whose cores hand data slowly to each other at the moment runs
  // a small model faster on one. NN_NO_ADAPTIVE_THREADS=1.
  bool adaptive_threads = true;
  // Flush-to-zero and denormals-are-zero (x86 MXCSR FTZ|DAZ, aarch64 FPCR.FZ) while a cpu
  // partition runs, on the calling thread (its own setting restored after) and in the
  // pool's workers for every job, native or XNNPACK: a value below FLT_MIN reads and writes
  // as 0. Without it an FMA reading a denormal takes a microcode assist, and a model whose
  // gates saturate or whose recurrent state decays (an LSTM on silence) slows down several
  // times. The "reference" delegate never flushes (the oracle stays IEEE).
  // NN_NO_FLUSH_DENORMALS=1.
  bool flush_denormals = true;

  // The defaults with each variable above that is set applied (NN_NO_*=1 turns its
  // switch off; NN_AVX512_HALF_WIDTH=1 / 0 forces the choice).
  static CpuOptions from_environment();
};

struct SessionOptions {
  // Preference order, e.g. {"nnapi", "vulkan", "cpu"}. "auto" = every available delegate,
  // best first. The CPU delegate always takes what the others leave. "reference" runs the
  // plain C++ kernels only (the oracle).
  std::vector<std::string> delegates = {"auto"};
  // CPU threads (the caller and its workers), at most the cores this process may use;
  // 0 = the cores idle at open (sampled for 50 ms).
  int threads = 1;
  // Receives every fallback line ("op 12 RESIZE_BILINEAR stays on cpu: nnapi unavailable:
  // ..."). Unset: lines go to stderr when the environment has NN_LOG=1.
  std::function<void(const std::string&)> log;
  // Time every step (the CPU delegate then runs each XNNPACK node as its own runtime, so
  // whole-model latency rises a little); read with Session::step_timings().
  bool profile = false;
  // A delegate named in `delegates` (not through "auto") that is unavailable is an
  // error from open() instead of a fallback to the CPU.
  bool strict_delegates = false;
  // The caller's latency budget per run (0 = none). The NNAPI delegate maps it to
  // execution priority and timeout; a run that misses it is redone on the CPU.
  double budget_ms = 0;
  // The CPU delegate's kernel and fusion switches.
  CpuOptions cpu;
  // How the quant8 reference kernels round (nn/ops/requantization.h; OPS.md "Quantized
  // arithmetic"): NNAPI's fixed point, or qnnpack's fp32 (PyTorch's eager results). The
  // XNNPACK int8 path requantizes in fp32 itself and is used in either mode.
  Requantization requantization = Requantization::kNnapi;
};

// One step's time in the last run (profiling): "op 12 CONV_2D [xnnpack]", 0.21 ms.
struct StepTiming {
  std::string label;
  double ms = 0;
  std::vector<uint32_t> ops = {};  // the IR ops the step runs (fused ones included), in order
  std::string kernel = {};         // what runs them: "native conv AVX-512", "xnnpack", "reference", ...
  // With a thread pool: the CPU ms each pool thread (0: the caller) spent working on the step
  // (not waiting), the pool jobs it ran, how many of them ran on the caller alone, and the
  // wall ms the caller waited for the other threads' last items.
  std::vector<double> busy_ms = {};
  uint32_t jobs = 0, serial_jobs = 0;
  double wait_ms = 0;
};

// Where each op went and why: from Session::report() and `nnrun --explain`.
struct PlanReport {
  struct OpAssignment {
    uint32_t op_index;
    OperationType type;
    std::string delegate;
    std::string fallback_reason;  // why a preferred delegate did not take it; "" if none
  };
  struct Partition {
    std::string delegate;
    std::vector<uint32_t> op_indices;
  };
  std::vector<std::string> requested;     // the preference list as given
  std::vector<std::string> unavailable;   // "nnapi: libneuralnetworks.so not found"
  std::vector<std::string> delegate_info;  // what an available delegate runs on ("nnapi: ... devices ...")
  std::vector<OpAssignment> ops;
  std::vector<Partition> partitions;
  int threads = 1;                        // CPU threads the session runs: the request, at most the cores
  std::string to_string() const;          // the human report nnrun --explain prints
  // Delegates the caller named (not through "auto") that are unavailable, with the reason.
  std::vector<std::string> missing_requested() const;
};

class Session {
 public:
  virtual ~Session() = default;
  static Result<std::unique_ptr<Session>> open(std::shared_ptr<const Model> model,
                                               const SessionOptions& options = {});

  virtual const Model& model() const = 0;
  virtual const PlanReport& report() const = 0;

  size_t num_inputs() const { return model().inputs.size(); }
  size_t num_outputs() const { return model().outputs.size(); }
  const Operand& input_desc(size_t i) const { return model().operands[model().inputs[i]]; }
  const Operand& output_desc(size_t i) const { return model().operands[model().outputs[i]]; }

  // Session-owned input buffers (NHWC, sized by input_desc(i).byte_size()): fill, then run().
  virtual void* input_data(size_t i) = 0;
  float* input_f32(size_t i) { return static_cast<float*>(input_data(i)); }
  Status set_input(size_t i, const void* data, size_t bytes);
  virtual Status run() = 0;
  virtual const void* output_data(size_t i) const = 0;
  const float* output_f32(size_t i) const { return static_cast<const float*>(output_data(i)); }
  virtual double last_run_ms() const = 0;
  // Per-step times of the last run when opened with SessionOptions::profile; else empty.
  virtual std::vector<StepTiming> step_timings() const { return {}; }
  // Runs a delegate could not finish (a missed deadline, a failed execution) and redid on
  // the CPU, since open.
  virtual uint64_t runtime_fallbacks() const { return 0; }
  // The steps as compiled, one per op that is not fused into another (ms 0): which kernel
  // runs each op. Filled by the CPU delegate; other delegates' partitions add nothing.
  virtual std::vector<StepTiming> kernels() const { return {}; }
};

struct AsyncResult {
  uint64_t tag = 0;             // what the caller passed to submit()
  Status status;
  std::vector<Tensor> outputs;  // in model.outputs order
  double run_ms = 0;            // inference time on the worker
  double cpu_ms = 0;            // the worker thread's CPU time for it (pool threads not included)
};

// Caller-owned outputs (AsyncSession): called on the worker after each successful run with
// the session, whose output_data(i) buffers are valid for the call, and the result being
// made. It reads the outputs where the session wrote them and writes what the caller wants
// (a converted mask, say) into memory the caller owns, which it may hand over in
// result.outputs or keep itself. Without one the worker copies every output into a new
// Tensor in result.outputs. A non-ok status makes the result a failed one.
using OutputReader = std::function<Status(const Session& session, AsyncResult& result)>;

// Caller-written inputs (AsyncSession::submit with a writer): called on the worker before
// the run with the session, whose input_data(i) buffers it fills in place, every byte of
// every input (what it leaves holds the last run's values). It replaces a Tensor the caller
// fills and the worker copies: the last step of the caller's pre-processing (normalising
// a small image into the model's layout, say) writes the session's input directly. It
// runs on the worker thread after submit() has returned, so it must own (or share) what it
// reads, never borrow the caller's frame. A non-ok status (or an exception) makes the
// result a failed one; the session does not run.
using InputWriter = std::function<Status(Session& session)>;

// One worker thread, one inference in flight, a one-slot mailbox: submit() while an
// input waits replaces it (the newest frame wins). Results are taken by the caller.
class AsyncSession {
 public:
  explicit AsyncSession(std::unique_ptr<Session> session);
  // With an OutputReader: outputs are read in place on the worker, never copied for the caller.
  AsyncSession(std::unique_ptr<Session> session, OutputReader read_outputs);
  ~AsyncSession();  // finishes the running inference, drops a waiting one, joins
  AsyncSession(const AsyncSession&) = delete;
  AsyncSession& operator=(const AsyncSession&) = delete;

  // Returns true when the submitted inputs replaced ones still waiting (counted as skipped).
  bool submit(std::vector<Tensor> inputs, uint64_t tag);
  // The same with the inputs written in place on the worker (InputWriter): no input copy.
  // A writer replaced while waiting is dropped without being called.
  bool submit(InputWriter write_inputs, uint64_t tag);
  // The newest finished result not yet taken, without waiting. Older finished ones are dropped.
  std::optional<AsyncResult> take_latest();
  // Waits up to timeout for a result with tag >= min_tag; returns it (and drops older ones).
  std::optional<AsyncResult> wait_for(uint64_t min_tag, std::chrono::microseconds timeout);
  // True while an inference runs or an input waits.
  bool busy() const;
  const Session& session() const;

  struct Counters {
    uint64_t submitted = 0, replaced = 0, completed = 0, failed = 0;
  };
  Counters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nn
