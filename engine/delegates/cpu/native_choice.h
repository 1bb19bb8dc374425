// Which IR ops nnpipe's native kernels run in the CPU delegate, and how they are built:
// the candidate rules (shapes, ISA, what an epilogue would absorb), the shape records the
// kernels take, and the fusion patterns the passes match (a residual ADD, an SE gate).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "delegates/cpu/cpu_internal.h"
#include "delegates/cpu/native_kernels.h"
#include "nn/ir/model.h"
#include "ops/op_params.h"
#include "nn/runtime/session.h"

namespace nn::cpu {

bool is_activation(OperationType t);

// Ops nnpipe's own kernels run (native_kernels.h says why), among those XNNPACK could
// also take (fp32, static weights, NHWC). CpuOptions::native_kernels off leaves them all to
// XNNPACK.
enum class NativeKind { kNone, kConv, kDepthwise, kDeconv, kResize, kAddMean };

// Operand -> the ops reading it (whole model).
using Readers = std::map<uint32_t, std::vector<uint32_t>>;

// When `add` is an ADD of `out` and another tensor of the same shape (no broadcast, a
// constant fuse code), that other operand: the residual a native epilogue can add. The one
// rule for both choosing native kernels and fusing.
std::optional<uint32_t> residual_operand(const Model& m, const Operation& add, uint32_t out,
                                         const StaticLookup& statics);

// Whether op k's output (after a RELU*) feeds only a HARD_SWISH or a residual ADD: work a
// native kernel's epilogue absorbs.
bool feeds_epilogue_op(const Model& m, uint32_t k, const Readers& readers, const StaticLookup& statics);

// A CONV_2D with at least one micro-tile of output pixels.
bool dense_conv_candidate(const Model& m, const Operation& op);

// A GROUPED_CONV_2D on NativeConv's grouped form (per-tap runs of each group's channels):
// on the AVX2 kernels (on AVX-512 XNNPACK's are faster), at least one micro-tile of pixels,
// at most 16 taps, and CpuOptions::native_grouped_conv on. (On AVX2, XNNPACK's grouped GEMMs
// run RegNet's group width 16 at ~45-50 GFLOP/s, ours at ~80-110: bench/README.md.)
bool grouped_conv_pays(const Model& m, const Operation& op, const WindowParams& p, const CpuOptions& options,
                       const NativeIsa& isa);

// The native kernel op k runs on, if any (kNone: XNNPACK's).
NativeKind native_candidate(const Model& m, uint32_t k, const Readers& readers, const StaticLookup& statics,
                            const CpuOptions& options, const NativeIsa& isa);

// The NativeResize of RESIZE_BILINEAR `op` for images of `channels` channels.
std::optional<NativeResizeShape> resize_shape(const Model& m, const Operation& op, uint32_t channels);

// The NHWC shape of a conv, depthwise or transpose conv op.
std::optional<NativeConvShape> conv_shape(const Model& m, const Operation& op);

// Whether running the conv that feeds depthwise op d together with it
// (NativeExpandDepthwise) pays at this thread count: the tensor between them is large
// enough to leave the caches between two separate ops (512 KB); each further thread's range
// recomputes at most 4% of its rows; and one row fills the conv's micro-tiles within 3%
// (the conv runs a row at a time: on AVX-512 a 28-pixel row wastes 12% of 32; AVX2 runs a
// row's last 1-4 pixels on its smaller kernels, and wants rows of at least 6 tiles).
bool expand_depthwise_pays(const Model& m, uint32_t d, int threads, const NativeIsa& isa);

// Whether the pointwise conv p reading depthwise op d's output runs on its rows as they
// come (NativeExpandDepthwise::add_projection): shapes that fit, and a depthwise output of
// at least 512 KB.
bool depthwise_project_pays(const Model& m, uint32_t d, uint32_t p);

// Drops the kernel rows / columns at either end that read only padding for every output
// pixel (a dilation wider than the image: DeepLabV3's ASPP convs at dilation 24 and 36 on
// a 16x16 map read the image with their centre tap only, so they are 1x1 convs): *s gets
// the smaller kernel and padding, *live the filter's remaining taps. False when every tap
// reads the image somewhere.
bool drop_dead_taps(NativeConvShape* s, const float* filter, std::vector<float>* live);

// A conv op's static filter and bias (nullptr when it has none).
std::pair<const float*, const float*> conv_weights(const Model& m, const Operation& op,
                                                   const StaticLookup& statics);

// The native kernel of op k (null when its parameters do not parse). at_size: build a
// pointwise conv for this NHWC size instead of its own (the conv moved in front of a
// resize, NativeConvThenResize). winograd_threads > 0: a dense conv runs as NativeWinograd
// for that many threads as winograd_choice picks (winograd_split: CpuOptions::winograd_panel_split,
// winograd_f2: CpuOptions::winograd_f2, winograd_dilated: CpuOptions::dilated_winograd).
std::unique_ptr<NativeOp> make_native_op(const Model& m, uint32_t k, NativeKind kind,
                                         const StaticLookup& statics, const Epilogue& epilogue,
                                         const NativeIsa& isa, bool dead_taps, const Dims* at_size = nullptr,
                                         int winograd_threads = 0, bool winograd_split = true,
                                         bool winograd_f2 = true, bool winograd_dilated = true);

// A squeeze-and-excitation tail a native 1x1 conv reads in place (NativeConv::enable_scaled_input):
// conv(MUL(x, gate)) or conv(ADD(MUL(x, gate), skip)), gate one value per channel. The
// selfie decoder's MUL + ADD at 128x128 were 7% of the model; folded, they cost a second
// GEMM segment of 16 channels.
struct ScaledInput {
  uint32_t x = 0, gate = 0;
  std::optional<uint32_t> sum;
  std::vector<uint32_t> ops;  // the MUL (and ADD) the conv absorbs, in execution order
};

// An op with fuse code NONE (a constant 0 as its third input).
bool fuses_nothing(const Operation& op, const StaticLookup& statics);
// A 1x1, stride 1, unpadded conv keeping its input's height and width.
bool pointwise_conv(const Model& m, const Operation& op);

// `only_reader` says whether an operand feeds exactly the given op and is not visible
// outside the partition; `producer` which fusable op (XNNPACK-lowered, not yet fused)
// writes it, or -1.
std::optional<ScaledInput> scaled_input_of(const Model& m, uint32_t conv, const StaticLookup& statics,
                                           const std::function<bool(uint32_t, uint32_t)>& only_reader,
                                           const std::function<int64_t(uint32_t)>& producer);

}  // namespace nn::cpu
