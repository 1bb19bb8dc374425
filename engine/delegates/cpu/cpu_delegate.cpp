// The CPU delegate: a partition becomes a few steps, each either ONE XNNPACK runtime
// (every op XNNPACK does exactly, lowered into one subgraph with its own memory plan),
// a run of nnpipe's native kernels (dense/depthwise/transpose convs, native_kernels.h;
// the copies, MEAN and ERF XNNPACK lacks, native_data.h) or a run of reference kernels.
// Before that, ops whose inputs are all constant are folded at compile time (e.g.
// DEQUANTIZE of FP16 weights). Each live op gets a FusedOp record; named fusion passes
// make some records heads of the ops after them (a RELU* into its producer's clamp, a
// HARD_SWISH / residual ADD into a native kernel's epilogue, ...); CpuOptions turns each
// native kernel and fusion off.
//
//   ops --fold constants--> live ops --label_ops: xnn|native|ref--> fuse_* passes
//       --> make_native_kernels --> group_steps (group_by_label) --> plan_memory
//   step boundary tensors: partition boundary -> session buffer, else a buffer here;
//   everything inside an XNNPACK step stays in XNNPACK's workspace.
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "delegates/cpu/cpu_internal.h"
#include "delegates/cpu/native_data.h"
#include "delegates/cpu/native_kernels.h"
#include "ops/op_params.h"
#include "delegates/cpu/xnn_int8.h"
#include "nn/ops/registry.h"
#include "runtime/buffer.h"
#include "runtime/partitioner.h"

namespace nn {

static_assert(kTensorSlackBytes >= XNN_EXTRA_BYTES, "session buffers must carry XNNPACK's read slack");

namespace cpu {
namespace {

const Status& xnnpack_ready() {
  static const Status status = [] {
    xnn_status s = xnn_initialize(nullptr);
    if (s != xnn_status_success)
      return Status(StatusCode::kDelegateUnavailable, std::string("xnn_initialize: ") + xnn_status_name(s));
    return Status::ok();
  }();
  return status;
}

struct RuntimeDeleter {
  void operator()(xnn_runtime* r) const {
    if (r) xnn_delete_runtime(r);
  }
};
struct SubgraphDeleter {
  void operator()(xnn_subgraph* s) const {
    if (s) xnn_delete_subgraph(s);
  }
};

struct RefOp {
  uint32_t op = 0;
  const OpDef* def = nullptr;
  const NativeDataOp* data = nullptr;  // native step: a data op (native_data.h), or
  const NativeOp* native = nullptr;    // a native kernel
  std::vector<const void*> in;
  std::vector<void*> out;
};

// Step kinds (also the labels given to group_by_label).
enum StepKind : int { kReferenceStep = 0, kXnnStep = 1, kNativeStep = 2 };

struct Step {
  StepKind kind = kReferenceStep;
  bool xnn = false;
  std::vector<uint32_t> ops;      // in execution order (fused activations included)
  std::vector<uint32_t> inputs;   // non-static operands read, produced before the step
  std::vector<uint32_t> outputs;  // operands produced here and read later
  std::string label;
  // XNNPACK step
  std::unique_ptr<xnn_runtime, RuntimeDeleter> runtime;
  std::vector<uint32_t> external_operands;  // external id -> operand
  std::vector<xnn_external_value> external_values;
  // reference / native step
  std::vector<RefOp> ref_ops;
  double last_ms = 0;
};

bool is_activation(OperationType t) {
  return t == OperationType::RELU || t == OperationType::RELU1 || t == OperationType::RELU6;
}

// Ops nnpipe's own kernels run (native_kernels.h says why), among those XNNPACK could
// also take (fp32, static weights, NHWC). NN_NO_NATIVE_CONV=1 leaves them all to XNNPACK.
enum class NativeKind { kNone, kConv, kDepthwise, kDeconv, kResize, kAddMean };

// When `add` is an ADD of `out` and another tensor of the same shape (no broadcast, a
// constant fuse code), that other operand: the residual a native epilogue can add. The one
// rule for both choosing native kernels and fusing.
std::optional<uint32_t> residual_operand(const Model& m, const Operation& add, uint32_t out,
                                         const StaticLookup& statics) {
  if (add.type != OperationType::ADD || add.inputs.size() != 3 || !statics(add.inputs[2]))
    return std::nullopt;
  const uint32_t other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  const Dims& d = m.operands[out].dims;
  if (other == out || !m.has_value(other) || statics(other) || m.operands[other].dims != d ||
      m.operands[add.outputs[0]].dims != d)
    return std::nullopt;
  return other;
}

// Whether op k's output (after a RELU*) feeds only a HARD_SWISH or a residual ADD: work a
// native kernel's epilogue absorbs.
bool feeds_epilogue_op(const Model& m, uint32_t k, const std::map<uint32_t, std::vector<uint32_t>>& readers,
                       const StaticLookup& statics) {
  uint32_t out = m.operations[k].outputs[0];
  for (int hop = 0; hop < 2; ++hop) {
    auto r = readers.find(out);
    if (r == readers.end() || r->second.size() != 1) return false;
    const Operation& next = m.operations[r->second[0]];
    if (next.type == OperationType::HARD_SWISH || residual_operand(m, next, out, statics)) return true;
    if (!is_activation(next.type)) return false;
    out = next.outputs[0];
  }
  return false;
}

bool dense_conv_candidate(const Model& m, const Operation& op) {
  const Operand& out = m.operands[op.outputs[0]];
  return op.type == OperationType::CONV_2D && out.dims.size() == 4 &&
         size_t(out.dims[0]) * out.dims[1] * out.dims[2] >= 6;
}

NativeKind native_candidate(const Model& m, uint32_t k,
                            const std::map<uint32_t, std::vector<uint32_t>>& readers,
                            const StaticLookup& statics, const CpuOptions& options, const NativeIsa& isa) {
  if (!native_conv_supported() || !options.native_kernels) return NativeKind::kNone;
  const Operation& op = m.operations[k];
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& out = m.operands[op.outputs[0]];
  if (out.dims.size() != 4 || in.dims.size() != 4) return NativeKind::kNone;
  std::string why;
  if (op.type == OperationType::RESIZE_BILINEAR)  // fp32 NHWC with INT32 sizes (parse_resize)
    return in.type == OperandType::TENSOR_FLOAT32 && parse_resize(m, op, &why) ? NativeKind::kResize
                                                                               : NativeKind::kNone;
  auto p = parse_window_op(m, op, &why);
  if (!p) return NativeKind::kNone;
  switch (op.type) {
    case OperationType::CONV_2D:  // at least one micro-tile of output pixels
      return dense_conv_candidate(m, op) ? NativeKind::kConv : NativeKind::kNone;
    case OperationType::DEPTHWISE_CONV_2D:
      if (p->depth_multiplier != 1 || out.dims[3] != in.dims[3] || p->filter_h > NativeDepthwise::kMaxKernelH)
        return NativeKind::kNone;
      // On AVX2, XNNPACK's 3x3 up16x9 dwconv beats ours on wide layers with nothing to fuse
      // (MobileNetV2: 10.3-10.9 vs 11.2-11.9 ms with all dw native); ours wins on narrow
      // ones (selfie's 16-channel decoder) and where the epilogue saves a pass (selfie's
      // residual ADDs, LR-ASPP's 5x5 + HARD_SWISH: 17.6-18.8 vs 17.6-23.4 ms). Ours on
      // AVX-512 wins everywhere (bench/README.md).
      if (!isa.avx512 && p->filter_h == 3 && p->filter_w == 3 && out.dims[3] > 32 &&
          !feeds_epilogue_op(m, k, readers, statics))
        return NativeKind::kNone;
      return NativeKind::kDepthwise;
    case OperationType::TRANSPOSE_CONV_2D: {
      // Non-overlapping taps only, and few dot products per pixel (beyond that the
      // problem is a GEMM, which XNNPACK's deconvolution already is).
      const Operand& filter = m.operands[op.inputs[1]];
      const bool tiled = p->filter_h == p->stride_h && p->filter_w == p->stride_w && p->pad_top == 0 &&
                         p->pad_bottom == 0 && p->pad_left == 0 && p->pad_right == 0 &&
                         p->adjustment_h == 0 && p->adjustment_w == 0 &&
                         out.dims[1] == in.dims[1] * p->stride_h && out.dims[2] == in.dims[2] * p->stride_w &&
                         filter.dims[3] == in.dims[3];
      return tiled && size_t(p->filter_h) * p->filter_w * out.dims[3] <= 64 ? NativeKind::kDeconv
                                                                            : NativeKind::kNone;
    }
    default:
      return NativeKind::kNone;
  }
}

// The NativeResize of RESIZE_BILINEAR `op` for images of `channels` channels.
std::optional<NativeResizeShape> resize_shape(const Model& m, const Operation& op, uint32_t channels) {
  std::string why;
  auto r = parse_resize(m, op, &why);
  if (!r) return std::nullopt;
  const Dims& in = m.operands[op.inputs[0]].dims;
  return NativeResizeShape{uint32_t(in[0]), uint32_t(in[1]), uint32_t(in[2]),  channels,
                           r->out_h,        r->out_w,        r->align_corners, r->half_pixel_centers};
}

// The NHWC shape of a conv, depthwise or transpose conv op.
std::optional<NativeConvShape> conv_shape(const Model& m, const Operation& op) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return std::nullopt;
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& filter = m.operands[op.inputs[1]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  NativeConvShape s;
  s.batch = in[0], s.in_h = in[1], s.in_w = in[2], s.in_c = in[3];
  s.out_h = out[1], s.out_w = out[2], s.out_c = out[3];
  s.kernel_h = filter[1], s.kernel_w = filter[2];
  s.stride_h = p->stride_h, s.stride_w = p->stride_w, s.dilation_h = p->dilation_h,
  s.dilation_w = p->dilation_w;
  s.pad_top = p->pad_top, s.pad_left = p->pad_left;
  return s;
}

// Whether running the conv that feeds depthwise op d together with it
// (NativeExpandDepthwise) pays at this thread count: the tensor between them is large
// enough to leave the caches between two separate ops (512 KB); each further thread's range
// recomputes at most 4% of its rows; and one row fills the conv's micro-tiles (the conv
// runs a row at a time: a 28-pixel row wastes 12% of 32).
bool expand_depthwise_pays(const Model& m, uint32_t d, int threads, const NativeIsa& isa) {
  auto s = conv_shape(m, m.operations[d]);
  if (!s) return false;
  const size_t halo = NativeExpandDepthwise::halo_rows(*s) * size_t(std::max(1, threads) - 1);
  const size_t tile = NativeConv::tile_pixels(isa);
  const size_t width = s->in_w, tiled = (width + tile - 1) / tile * tile;
  const size_t bytes = size_t(s->batch) * s->in_h * s->in_w * s->in_c * sizeof(float);
  return bytes >= (size_t(512) << 10) && halo * 25 <= s->in_h && tiled * 100 <= width * 103;
}

// Drops the kernel rows / columns at either end that read only padding for every output
// pixel (a dilation wider than the image: DeepLabV3's ASPP convs at dilation 24 and 36 on
// a 16x16 map read the image with their centre tap only, so they are 1x1 convs): *s gets
// the smaller kernel and padding, *live the filter's remaining taps. False when every tap
// reads the image somewhere.
bool drop_dead_taps(NativeConvShape* s, const float* filter, std::vector<float>* live) {
  // [first, last] taps along one axis that read input in [0, in) for some output in [0, out).
  auto live_range = [](uint32_t kernel, uint32_t dilation, uint32_t pad, uint32_t stride, uint32_t in,
                       uint32_t out, uint32_t* first, uint32_t* last) {
    auto reads = [&](uint32_t k) {
      const int64_t lo = int64_t(k) * dilation - pad, hi = lo + int64_t(out - 1) * stride;
      return hi >= 0 && lo < int64_t(in);
    };
    *first = 0, *last = kernel - 1;
    while (*first < *last && !reads(*first)) ++*first;
    while (*last > *first && !reads(*last)) --*last;
    return reads(*first) && int64_t(pad) >= int64_t(*first) * dilation;
  };
  uint32_t y0, y1, x0, x1;
  if (!live_range(s->kernel_h, s->dilation_h, s->pad_top, s->stride_h, s->in_h, s->out_h, &y0, &y1) ||
      !live_range(s->kernel_w, s->dilation_w, s->pad_left, s->stride_w, s->in_w, s->out_w, &x0, &x1))
    return false;
  const uint32_t kh = y1 - y0 + 1, kw = x1 - x0 + 1;
  if (kh == s->kernel_h && kw == s->kernel_w) return false;
  const size_t c = s->in_c;
  live->resize(size_t(s->out_c) * kh * kw * c);
  float* dst = live->data();
  for (uint32_t o = 0; o < s->out_c; ++o)
    for (uint32_t ky = y0; ky <= y1; ++ky, dst += kw * c)
      std::copy_n(filter + ((size_t(o) * s->kernel_h + ky) * s->kernel_w + x0) * c, kw * c, dst);
  s->pad_top -= y0 * s->dilation_h, s->pad_left -= x0 * s->dilation_w;
  s->kernel_h = kh, s->kernel_w = kw;
  if (kh == 1) s->dilation_h = 1;
  if (kw == 1) s->dilation_w = 1;
  return true;
}

// A conv op's static filter and bias (nullptr when it has none).
std::pair<const float*, const float*> conv_weights(const Model& m, const Operation& op,
                                                   const StaticLookup& statics) {
  return {static_cast<const float*>(statics(op.inputs[1])),
          m.has_value(op.inputs[2]) ? static_cast<const float*>(statics(op.inputs[2])) : nullptr};
}

// at_size: build a pointwise conv for this NHWC size instead of its own (the conv moved in
// front of a resize, NativeConvThenResize).
std::unique_ptr<NativeOp> make_native_op(const Model& m, uint32_t k, NativeKind kind,
                                         const StaticLookup& statics, const Epilogue& epilogue,
                                         const NativeIsa& isa, bool dead_taps, const Dims* at_size = nullptr) {
  const Operation& op = m.operations[k];
  std::string why;
  if (kind == NativeKind::kAddMean) {  // an ADD; the mean's output shape follows from its input
    const Dims& in = m.operands[op.inputs[0]].dims;
    return std::make_unique<NativeAddMean>(NativeAddMeanShape{
        uint32_t(in[0]), uint32_t(in[1]), uint32_t(in[2]), uint32_t(in[3]), epilogue.lo, epilogue.hi}, isa);
  }
  if (kind == NativeKind::kResize) {
    auto s = resize_shape(m, op, uint32_t(m.operands[op.inputs[0]].dims[3]));
    return s ? std::make_unique<NativeResize>(*s, isa) : nullptr;
  }
  auto shape = conv_shape(m, op);
  if (!shape) return nullptr;
  NativeConvShape s = *shape;
  if (at_size) s.batch = (*at_size)[0], s.in_h = s.out_h = (*at_size)[1], s.in_w = s.out_w = (*at_size)[2];
  auto [weights, bias] = conv_weights(m, op, statics);
  switch (kind) {
    case NativeKind::kConv: {
      std::vector<float> live;
      if (dead_taps && drop_dead_taps(&s, weights, &live)) weights = live.data();
      return std::make_unique<NativeConv>(s, weights, bias, epilogue, isa);
    }
    case NativeKind::kDepthwise:
      return std::make_unique<NativeDepthwise>(s, weights, bias, epilogue, isa);
    case NativeKind::kDeconv:
      return std::make_unique<NativeDeconv>(s, weights, bias, epilogue, isa);
    case NativeKind::kResize:
    case NativeKind::kAddMean:
    case NativeKind::kNone:
      break;
  }
  return nullptr;
}

// A squeeze-and-excitation tail a native 1x1 conv reads in place (NativeConv::run_scaled):
// conv(MUL(x, gate)) or conv(ADD(MUL(x, gate), skip)), gate one value per channel. The
// selfie decoder's MUL + ADD at 128x128 were 7% of the model; folded, they cost a second
// GEMM segment of 16 channels.
struct ScaledInput {
  uint32_t x = 0, gate = 0;
  std::optional<uint32_t> sum;
  std::vector<uint32_t> ops;  // the MUL (and ADD) the conv absorbs, in execution order
};

bool fuses_nothing(const Operation& op, const StaticLookup& statics) {
  if (op.inputs.size() != 3) return false;
  const void* fuse = statics(op.inputs[2]);
  return fuse && *static_cast<const int32_t*>(fuse) == 0;
}

bool pointwise_conv(const Model& m, const Operation& op) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  return p && p->filter_h == 1 && p->filter_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
         p->pad_top == 0 && p->pad_left == 0 && p->pad_bottom == 0 && p->pad_right == 0 && in.size() == 4 &&
         out.size() == 4 && in[1] == out[1] && in[2] == out[2];
}

// `only_reader` says whether an operand feeds exactly the given op and is not visible
// outside the partition; `producer` which fusable op (XNNPACK-lowered, not yet fused)
// writes it, or -1.
std::optional<ScaledInput> scaled_input_of(const Model& m, uint32_t conv, const StaticLookup& statics,
                                           const std::function<bool(uint32_t, uint32_t)>& only_reader,
                                           const std::function<int64_t(uint32_t)>& producer) {
  const Operation& op = m.operations[conv];
  if (op.type != OperationType::CONV_2D || !pointwise_conv(m, op)) return std::nullopt;
  const uint32_t t = op.inputs[0];
  const Dims& dims = m.operands[t].dims;
  // x * gate with gate [.., C] all ones but the channels, x shaped like the conv's input.
  auto gated = [&](uint32_t operand, uint32_t reader) -> std::optional<ScaledInput> {
    const int64_t k = producer(operand);
    if (k < 0 || !only_reader(operand, reader)) return std::nullopt;
    const Operation& mul = m.operations[k];
    if (mul.type != OperationType::MUL || !fuses_nothing(mul, statics)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const uint32_t x = mul.inputs[side], gate = mul.inputs[1 - side];
      const Dims& g = m.operands[gate].dims;
      bool per_channel = !g.empty() && g.back() == dims.back() && m.has_value(gate);
      for (size_t i = 0; i + 1 < g.size(); ++i) per_channel = per_channel && g[i] == 1;
      if (per_channel && m.operands[x].dims == dims && !statics(x) && x != gate)
        return ScaledInput{x, gate, std::nullopt, {uint32_t(k)}};
    }
    return std::nullopt;
  };
  if (auto direct = gated(t, conv)) return direct;
  const int64_t a = producer(t);
  if (a < 0 || !only_reader(t, conv)) return std::nullopt;
  const Operation& add = m.operations[a];
  if (add.type != OperationType::ADD || !fuses_nothing(add, statics)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const uint32_t u = add.inputs[side], skip = add.inputs[1 - side];
    if (u == skip || m.operands[skip].dims != dims || statics(skip) || !m.has_value(skip)) continue;
    if (auto g = gated(u, uint32_t(a))) {
      if (g->x == skip || g->gate == skip) continue;
      g->sum = skip;
      g->ops.push_back(uint32_t(a));
      return g;
    }
  }
  return std::nullopt;
}

// One live op of the partition as the passes see it: how it runs, and once it heads a
// fusion, what it absorbed. Ops fused into another keep their record (a later pass may
// read it) but run as part of their head (CpuPartition::fused_into_).
struct FusedOp {
  uint32_t op = 0;
  StepKind step = kReferenceStep;   // the kind of step it runs in
  bool lowers = false;              // XNNPACK could run it: it clamps its own output
  NativeKind native = NativeKind::kNone;
  Epilogue epilogue;                // lo/hi: its clamp (own fuse code, folded RELU*); native: the rest
  std::vector<uint32_t> chain;      // ops fused into it, in execution order
  std::optional<uint32_t> output;   // the operand it writes after fusion (else its own output)
  std::optional<uint32_t> residual; // the operand its epilogue adds
  std::optional<uint32_t> resize;   // a pointwise conv run before this resize (NativeConvThenResize)
  std::optional<ScaledInput> gated; // a 1x1 conv reading x * gate (+ sum) in place
  std::optional<uint32_t> depthwise;  // a conv running the depthwise conv it feeds (NativeExpandDepthwise)
  Epilogue depthwise_epilogue;        // that depthwise's clamp and epilogue
  std::unique_ptr<NativeOp> kernel;      // native ops
  std::unique_ptr<NativeDataOp> data;    // native data ops (native_data.h)
};

class CpuPartition final : public CompiledPartition {
 public:
  CpuPartition(const Model& model, const PartitionSpec& spec, const CompileOptions& options)
      : model_(model),
        spec_(spec),
        options_(options),
        isa_(NativeIsa::with(options.cpu.avx512,
                             options.cpu.avx512_half_width == CpuOptions::HalfWidth::kAuto  ? -1
                             : options.cpu.avx512_half_width == CpuOptions::HalfWidth::kOn ? 1
                                                                                           : 0,
                             options.cpu.depthwise_two_rows)),
        statics_([this](uint32_t o) { return static_data(o); }) {}

  // Builds the steps; ops in `force_reference` skip XNNPACK. kUnsupportedOp with
  // *retry_op set means: that op failed to lower, build again without it.
  Status build(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference, int64_t* retry_op);

  Status prepare(std::span<void* const> buffers) override;
  Status run() override;
  std::vector<StepTiming> step_timings() const override;
  std::vector<StepTiming> kernels() const override;

 private:
  // The passes of build(), in order. Each fusion pass makes some records heads of what
  // they absorb; a record already absorbed (fused_into_) takes part in no later pass.
  Status label_ops(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference);
  void fuse_conv_before_resize();
  void fuse_add_mean();
  void fuse_se_gates();
  void fuse_epilogues();
  // The LOGISTIC and MUL computing out * sigmoid(out) (SiLU), when they are out's only
  // readers and the sigmoid is read by the MUL alone: a swish epilogue.
  std::optional<std::pair<uint32_t, uint32_t>> swish_after(uint32_t out) const;
  void fuse_expand_depthwise();
  Status make_native_kernels();
  void group_steps();

  // What runs head op k (an op not fused into another): "native conv AVX-512", "xnnpack", ...
  std::string kernel_name(uint32_t k) const;
  const void* static_data(uint32_t operand) const {
    const Operand& o = model_.operands[operand];
    if (o.is_constant()) return o.data;
    auto it = folded_.find(operand);
    return it == folded_.end() ? nullptr : it->second.data();
  }
  Status fold_constants();
  Status plan_memory();
  Status build_xnn_step(Step& step, int64_t* retry_op);

  FusedOp& rec(uint32_t k) { return ops_.at(k); }
  bool absorbed(uint32_t k) const { return fused_into_.count(k) > 0; }
  // Whether operand o is read only by one op and not visible outside the partition.
  bool internal_single_use(uint32_t o) const {
    auto r = readers_.find(o);
    return r != readers_.end() && r->second.size() == 1 && !partition_outputs_.count(o) &&
           !model_outputs_.count(o);
  }
  void absorb(uint32_t head, uint32_t k) {
    fused_into_[k] = head;
    rec(head).chain.push_back(k);
  }
  // Effective reads and writes after fusion: a head reads what its fused ops read (the
  // residual, a gated input's parts) and writes the last fused op's output.
  std::vector<uint32_t> writes(uint32_t k) const;
  std::vector<uint32_t> reads(uint32_t k) const;
  uint32_t written(const FusedOp& r) const { return r.output ? *r.output : model_.operations[r.op].outputs[0]; }

  const Model& model_;
  PartitionSpec spec_;
  CompileOptions options_;
  NativeIsa isa_;  // the native kernels' variants (options_.cpu and the CPU)
  StaticLookup statics_;
  std::map<uint32_t, AlignedBuffer> folded_;  // values computed at compile time
  std::set<uint32_t> folded_ops_;
  std::map<uint32_t, std::vector<uint32_t>> readers_;  // operand -> ops (whole model)
  std::set<uint32_t> partition_outputs_, model_outputs_;
  std::vector<uint32_t> live_;              // ops left after folding, in execution order
  std::map<uint32_t, FusedOp> ops_;         // live op -> its record
  std::map<uint32_t, uint32_t> fused_into_;  // absorbed op -> the head running it
  std::map<uint32_t, void*> internal_;        // tensors between steps of this partition, in arena_
  AlignedBuffer arena_;
  std::vector<Step> steps_;
};

Status CpuPartition::fold_constants() {
  const OpRegistry& registry = OpRegistry::instance();
  std::set<uint32_t> boundary(spec_.outputs.begin(), spec_.outputs.end());
  for (uint32_t k : spec_.ops) {
    const Operation& op = model_.operations[k];
    const OpDef* def = registry.find(op.type);
    if (!def || !def->reference) continue;
    bool all_static = true;
    for (uint32_t i : op.inputs)
      if (model_.has_value(i) && !static_data(i)) all_static = false;
    for (uint32_t o : op.outputs)
      if (boundary.count(o)) all_static = false;
    if (!all_static) continue;
    std::vector<const void*> in;
    for (uint32_t i : op.inputs) in.push_back(model_.has_value(i) ? static_data(i) : nullptr);
    std::vector<void*> out;
    std::vector<AlignedBuffer> made;
    for (uint32_t o : op.outputs) {
      made.emplace_back(model_.operands[o].byte_size());
      NN_CHECK_OR_RETURN(made.back().ok(), StatusCode::kOutOfMemory, op_label(model_, k) + ": folding");
      out.push_back(made.back().data());
    }
    OpContext ctx{model_, op, in, out};
    if (!def->reference(ctx).is_ok()) continue;  // left to run time, which reports it
    for (size_t j = 0; j < op.outputs.size(); ++j) folded_[op.outputs[j]] = std::move(made[j]);
    folded_ops_.insert(k);
  }
  return Status::ok();
}

class StepValues final : public XnnValues {
 public:
  StepValues(xnn_subgraph_t sg, const Model& m, const StaticLookup& statics,
             const std::set<uint32_t>& external_in, const std::set<uint32_t>& external_out,
             std::vector<uint32_t>& external_operands)
      : sg_(sg), m_(m), statics_(statics), in_(external_in), out_(external_out), ext_(external_operands) {}

  Result<uint32_t> value(uint32_t operand) override {
    auto it = ids_.find(operand);
    if (it != ids_.end()) return it->second;
    const Operand& o = m_.operands[operand];
    std::vector<size_t> dims(o.dims.begin(), o.dims.end());
    if (dims.empty()) dims.push_back(1);
    uint32_t external_id = XNN_INVALID_VALUE_ID, flags = 0;
    const void* data = statics_(operand);
    if (!data) {
      if (in_.count(operand)) flags |= XNN_VALUE_FLAG_EXTERNAL_INPUT;
      if (out_.count(operand)) flags |= XNN_VALUE_FLAG_EXTERNAL_OUTPUT;
      if (flags) {
        external_id = static_cast<uint32_t>(std::find(ext_.begin(), ext_.end(), operand) - ext_.begin());
        if (external_id == ext_.size()) ext_.push_back(operand);
      }
    }
    uint32_t id = 0;
    xnn_status s = o.type == OperandType::TENSOR_FLOAT32
                       ? xnn_define_tensor_value(sg_, xnn_datatype_fp32, dims.size(), dims.data(), data,
                                                 external_id, flags, &id)
                       : xnn_int8_define_value(sg_, o, dims.size(), dims.data(), data, external_id, flags, &id);
    if (s != xnn_status_success)
      return Status(StatusCode::kUnsupportedOp, "xnn_define_tensor_value(operand " + std::to_string(operand) +
                                                    " " + dims_to_string(o.dims) +
                                                    "): " + xnn_status_name(s));
    ids_[operand] = id;
    return id;
  }
  Result<uint32_t> internal_value(const Dims& d) override { return define(d, nullptr); }
  Result<uint32_t> static_value(const Dims& d, const void* data) override { return define(d, data); }
  const float* keep(std::vector<float> values) override { return kept_.emplace_back(std::move(values)).data(); }

 private:
  Result<uint32_t> define(const Dims& d, const void* data) {
    std::vector<size_t> dims(d.begin(), d.end());
    uint32_t id = 0;
    xnn_status s = xnn_define_tensor_value(sg_, xnn_datatype_fp32, dims.size(), dims.data(), data,
                                           XNN_INVALID_VALUE_ID, 0, &id);
    if (s != xnn_status_success)
      return Status(StatusCode::kUnsupportedOp,
                    std::string("xnn_define_tensor_value: ") + xnn_status_name(s));
    return id;
  }
  xnn_subgraph_t sg_;
  const Model& m_;
  const StaticLookup& statics_;
  const std::set<uint32_t>& in_;
  const std::set<uint32_t>& out_;
  std::vector<uint32_t>& ext_;
  std::map<uint32_t, uint32_t> ids_;
  std::deque<std::vector<float>> kept_;
};


Status CpuPartition::build_xnn_step(Step& step, int64_t* retry_op) {
  // External ids: the step's inputs first, then its outputs (ids must be < the count
  // given to xnn_create_subgraph; they are assigned in first-use order below).
  std::set<uint32_t> ext_in(step.inputs.begin(), step.inputs.end());
  std::set<uint32_t> ext_out(step.outputs.begin(), step.outputs.end());
  const uint32_t num_external = static_cast<uint32_t>(ext_in.size() + ext_out.size());
  xnn_subgraph_t raw = nullptr;
  xnn_status s = xnn_create_subgraph(num_external, 0, &raw);
  NN_CHECK_OR_RETURN(s == xnn_status_success, StatusCode::kOutOfMemory,
                     std::string("xnn_create_subgraph: ") + xnn_status_name(s));
  std::unique_ptr<xnn_subgraph, SubgraphDeleter> sg(raw);
  StepValues values(sg.get(), model_, statics_, ext_in, ext_out, step.external_operands);
  // Inputs and outputs get their external ids up front, so each is defined as external
  // even if a node reads it only through another path.
  for (uint32_t o : step.inputs) NN_RETURN_IF_ERROR(values.value(o).status());
  for (uint32_t o : step.outputs) NN_RETURN_IF_ERROR(values.value(o).status());
  for (uint32_t k : step.ops) {
    if (absorbed(k)) continue;
    const FusedOp& r = rec(k);
    Status st = xnn_lower(sg.get(), model_, k, statics_, values, written(r), r.epilogue.lo, r.epilogue.hi);
    if (!st.is_ok()) {
      *retry_op = k;
      return st.with_context(op_label(model_, k));
    }
  }
  xnn_runtime_t runtime = nullptr;
  s = xnn_create_runtime_v2(sg.get(), options_.threadpool, 0, &runtime);
  if (s != xnn_status_success) {
    // Which node XNNPACK refused is not reported; move the first op and rebuild.
    *retry_op = step.ops.front();
    return Status(StatusCode::kUnsupportedOp,
                  std::string("xnn_create_runtime_v2: ") + xnn_status_name(s) + " (" + step.label + ")");
  }
  step.runtime.reset(runtime);
  return Status::ok();
}

//   fold constants -> label ops (xnnpack | native | reference) -> fusions, each a pass:
//   conv before resize, add+mean, SE gates, epilogues, expand+depthwise -> native kernels
//   -> steps (group_by_label) -> memory plan -> one XNNPACK runtime per XNNPACK step.
Status CpuPartition::build(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference,
                           int64_t* retry_op) {
  *retry_op = -1;
  NN_RETURN_IF_ERROR(fold_constants());
  for (uint32_t k = 0; k < model_.operations.size(); ++k)
    for (uint32_t i : model_.operations[k].inputs) readers_[i].push_back(k);
  partition_outputs_ = std::set<uint32_t>(spec_.outputs.begin(), spec_.outputs.end());
  model_outputs_ = std::set<uint32_t>(model_.outputs.begin(), model_.outputs.end());
  NN_RETURN_IF_ERROR(label_ops(use_xnnpack, force_reference));
  if (options_.cpu.conv_before_resize) fuse_conv_before_resize();
  if (native_conv_supported() && options_.cpu.native_kernels && options_.cpu.add_mean) fuse_add_mean();
  if (options_.cpu.se_fusion) fuse_se_gates();  // before the epilogues: what it absorbs fuses nowhere else
  fuse_epilogues();
  if (options_.cpu.expand_depthwise) fuse_expand_depthwise();
  NN_RETURN_IF_ERROR(make_native_kernels());
  group_steps();
  NN_RETURN_IF_ERROR(plan_memory());
  for (Step& step : steps_)
    if (step.xnn) NN_RETURN_IF_ERROR(build_xnn_step(step, retry_op));
  return Status::ok();
}

// Each live op: XNNPACK when it lowers exactly, nnpipe's own kernel among those where one
// pays (native_candidate), a native data op for the copies XNNPACK lacks, else the
// reference kernel.
Status CpuPartition::label_ops(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference) {
  const OpRegistry& registry = OpRegistry::instance();
  for (uint32_t k : spec_.ops) {
    if (folded_ops_.count(k)) continue;
    FusedOp r;
    r.op = k;
    const bool allowed = use_xnnpack && !force_reference.count(k);
    r.lowers = allowed && xnn_can_lower(model_, k, statics_).supported;
    if (r.lowers) {
      r.native = is_int8_op(model_, model_.operations[k])
                     ? NativeKind::kNone
                     : native_candidate(model_, k, readers_, statics_, options_.cpu, isa_);
      r.step = r.native != NativeKind::kNone ? kNativeStep : kXnnStep;
      xnn_own_clamp(model_, model_.operations[k], &r.epilogue.lo, &r.epilogue.hi);
    } else if (std::string why; allowed && options_.cpu.native_data_ops &&
                                (r.data = make_native_data_op(model_, k, statics_, &why))) {
      r.step = kNativeStep;
    } else {
      const OpDef* def = registry.find(model_.operations[k].type);
      NN_CHECK_OR_RETURN(def && def->reference, StatusCode::kUnsupportedOp,
                         op_label(model_, k) + ": no reference kernel" +
                             (force_reference.count(k) ? " (XNNPACK: " + force_reference.at(k) + ")" : ""));
    }
    live_.push_back(k);
    ops_.emplace(k, std::move(r));
  }
  return Status::ok();
}

// A native resize whose only reader is a native pointwise conv with no activation: the
// conv runs first, on the small image (NativeConvThenResize). The resize folds into the
// conv, which then reads the resize's input and takes no epilogue.
void CpuPartition::fuse_conv_before_resize() {
  for (uint32_t k : live_) {
    if (rec(k).native != NativeKind::kResize) continue;
    const uint32_t o = model_.operations[k].outputs[0];
    if (!internal_single_use(o)) continue;
    const uint32_t c = readers_.at(o)[0];
    auto conv = ops_.find(c);
    if (conv == ops_.end() || conv->second.native != NativeKind::kConv || model_.operations[c].inputs[0] != o)
      continue;
    const Dims& small = model_.operands[model_.operations[k].inputs[0]].dims;
    const bool one_tile = size_t(small[0]) * small[1] * small[2] >= 6;  // as dense_conv_candidate
    const Epilogue& e = conv->second.epilogue;
    if (!pointwise_conv(model_, model_.operations[c]) || !one_tile ||
        e.lo != -std::numeric_limits<float>::infinity() || e.hi != std::numeric_limits<float>::infinity())
      continue;
    conv->second.resize = k;
    absorb(c, k);
  }
}

// An ADD whose only reader is a global average: one native op computes the means of the
// sum (NativeAddMean), the ADD's output is never written.
void CpuPartition::fuse_add_mean() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& add = model_.operations[k];
    if (add.type != OperationType::ADD || !r.lowers || absorbed(k) || add.inputs.size() < 2) continue;
    const Operand& a = model_.operands[add.inputs[0]];
    const Operand& b = model_.operands[add.inputs[1]];
    const uint32_t o = add.outputs[0];
    if (a.type != OperandType::TENSOR_FLOAT32 || a.dims.size() != 4 || b.dims != a.dims ||
        model_.operands[o].dims != a.dims || !internal_single_use(o))
      continue;
    const uint32_t mean = readers_.at(o)[0];
    auto m = ops_.find(mean);
    if (m == ops_.end() || !m->second.lowers || absorbed(mean) ||
        !is_global_mean(model_, model_.operations[mean], statics_) ||
        m->second.epilogue.lo != -std::numeric_limits<float>::infinity() ||
        m->second.epilogue.hi != std::numeric_limits<float>::infinity())
      continue;
    r.native = NativeKind::kAddMean;
    r.step = kNativeStep;
    absorb(k, mean);
    r.output = model_.operations[mean].outputs[0];
    r.residual = add.inputs[1];
  }
}

// Squeeze-and-excitation tails into the native 1x1 conv that reads them.
void CpuPartition::fuse_se_gates() {
  std::map<uint32_t, uint32_t> writer;
  for (uint32_t k : live_)
    for (uint32_t o : model_.operations[k].outputs) writer[o] = k;
  auto only_reader = [&](uint32_t operand, uint32_t op) {
    return internal_single_use(operand) && readers_.at(operand)[0] == op;
  };
  auto producer = [&](uint32_t operand) -> int64_t {
    auto w = writer.find(operand);
    if (w == writer.end()) return -1;
    const FusedOp& r = rec(w->second);
    return r.lowers && r.native == NativeKind::kNone && !absorbed(w->second) ? int64_t(w->second) : -1;
  };
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    if (r.native != NativeKind::kConv || r.resize) continue;
    auto si = scaled_input_of(model_, k, statics_, only_reader, producer);
    if (!si) continue;
    for (uint32_t f : si->ops) absorb(k, f);
    r.gated = std::move(*si);
  }
}

// The ops after a producer that its clamp or a native kernel's epilogue absorbs: RELU*
// into any op that clamps its output; on native kernels also a HARD_SWISH, a residual ADD
// (and the RELU* after it), and a LOGISTIC after a native deconv.
void CpuPartition::fuse_epilogues() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    if (!r.lowers || absorbed(k) || r.resize || r.native == NativeKind::kAddMean) continue;
    const Operation& op = model_.operations[k];
    if (!xnn_takes_output_clamp(op.type) || op.outputs.size() != 1) continue;
    const bool native = r.native != NativeKind::kNone;
    Epilogue& e = r.epilogue;
    uint32_t out = written(r);
    for (;;) {
      const bool swish_ok = options_.cpu.swish_epilogue && !e.hard_swish && !e.residual &&
                            (r.native == NativeKind::kConv || r.native == NativeKind::kDepthwise);
      if (auto sw = swish_ok ? swish_after(out) : std::nullopt) {
        e.swish = true;  // the last stage: nothing fuses after it
        absorb(k, sw->first);
        absorb(k, sw->second);
        r.output = model_.operations[sw->second].outputs[0];
        break;
      }
      if (!internal_single_use(out)) break;
      const uint32_t c = readers_.at(out)[0];
      auto next_rec = ops_.find(c);
      // An op an earlier pass made a head (an ADD computing a mean, NativeAddMean) keeps
      // what it absorbed: fusing it here too would leave its absorbed ops' outputs unwritten.
      if (next_rec == ops_.end() || !next_rec->second.lowers || absorbed(c) || !next_rec->second.chain.empty())
        break;
      const Operation& next = model_.operations[c];
      float lo, hi;
      if (is_activation(next.type) && !e.hard_swish && !e.residual) {
        xnn_own_clamp(model_, next, &lo, &hi);
        e.lo = std::max(e.lo, lo);
        e.hi = std::min(e.hi, hi);
      } else if (is_activation(next.type) && native && e.residual) {
        xnn_own_clamp(model_, next, &lo, &hi);
        e.res_lo = std::max(e.res_lo, lo);
        e.res_hi = std::min(e.res_hi, hi);
      } else if (native && next.type == OperationType::HARD_SWISH && !e.hard_swish && !e.residual) {
        e.hard_swish = true;
      } else if (auto other =
                     native && !e.residual ? residual_operand(model_, next, out, statics_) : std::nullopt) {
        xnn_own_clamp(model_, next, &lo, &hi);
        e.residual = true;
        e.res_lo = lo, e.res_hi = hi;
        r.residual = *other;
      } else if (native && r.native == NativeKind::kDeconv && next.type == OperationType::LOGISTIC) {
        e.logistic = true;  // the last stage: nothing fuses after it (the loop ends below)
      } else {
        break;
      }
      absorb(k, c);
      out = next.outputs[0];
      r.output = out;
      if (e.logistic) break;
    }
  }
}

std::optional<std::pair<uint32_t, uint32_t>> CpuPartition::swish_after(uint32_t out) const {
  auto rd = readers_.find(out);
  if (rd == readers_.end() || rd->second.size() != 2 || partition_outputs_.count(out) || model_outputs_.count(out))
    return std::nullopt;
  auto fusable = [&](uint32_t k) {
    auto f = ops_.find(k);
    return f != ops_.end() && f->second.lowers && !absorbed(k) && f->second.chain.empty();
  };
  for (int first = 0; first < 2; ++first) {
    const uint32_t l = rd->second[first], m = rd->second[1 - first];
    const Operation& sig = model_.operations[l];
    const Operation& mul = model_.operations[m];
    if (sig.type != OperationType::LOGISTIC || mul.type != OperationType::MUL || !fusable(l) || !fusable(m) ||
        l > m || !fuses_nothing(mul, statics_))
      continue;
    const uint32_t s = sig.outputs[0];
    const bool pairs = (mul.inputs[0] == out && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == out);
    if (pairs && internal_single_use(s) && model_.operands[mul.outputs[0]].dims == model_.operands[out].dims)
      return std::pair{l, m};
  }
  return std::nullopt;
}

// A native conv (an inverted residual's expansion, a stem conv) and the depthwise conv
// that is its only reader run as one op (NativeExpandDepthwise), where the tensor between
// them is worth keeping out of memory and splitting over the threads recomputes few rows.
void CpuPartition::fuse_expand_depthwise() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    if (r.native != NativeKind::kConv || absorbed(k) || r.resize || r.gated || r.epilogue.residual) continue;
    if (auto shape = conv_shape(model_, model_.operations[k]); !shape || !NativeExpandDepthwise::supports(*shape))
      continue;
    const uint32_t expanded = written(r);
    if (!internal_single_use(expanded)) continue;
    const uint32_t d = readers_.at(expanded)[0];
    auto dw = ops_.find(d);
    if (dw == ops_.end() || dw->second.native != NativeKind::kDepthwise || absorbed(d) ||
        model_.operations[d].inputs[0] != expanded)
      continue;
    if (!expand_depthwise_pays(model_, d, options_.threads, isa_)) continue;
    FusedOp& second = dw->second;
    r.depthwise = d;
    r.depthwise_epilogue = second.epilogue;
    absorb(k, d);
    for (uint32_t c : second.chain) absorb(k, c);
    second.chain.clear();
    r.output = written(second);
    r.residual = second.residual;
    second.residual.reset();
  }
}

Status CpuPartition::make_native_kernels() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    // a resize run by the conv it fed, a depthwise by its expansion
    if (r.native == NativeKind::kNone || absorbed(k)) continue;
    std::unique_ptr<NativeOp> native;
    if (r.resize) {
      const Dims& small = model_.operands[model_.operations[*r.resize].inputs[0]].dims;
      const Dims& out = model_.operands[model_.operations[k].outputs[0]].dims;
      auto conv = make_native_op(model_, k, r.native, statics_, r.epilogue, isa_, false, &small);
      // The resize, built for the conv's channels (its own input has the conv's input's).
      auto rs = resize_shape(model_, model_.operations[*r.resize], uint32_t(out[3]));
      NN_CHECK_OR_RETURN(rs, StatusCode::kInternal, op_label(model_, *r.resize) + ": resize parameters");
      native = std::make_unique<NativeConvThenResize>(std::move(conv), std::make_unique<NativeResize>(*rs, isa_),
                                                      size_t(small[0]) * small[1] * small[2] * out[3]);
    } else if (r.depthwise) {
      const Operation& conv = model_.operations[k];
      const Operation& dw = model_.operations[*r.depthwise];
      auto first = conv_shape(model_, conv), second = conv_shape(model_, dw);
      NN_CHECK_OR_RETURN(first && second, StatusCode::kInternal, op_label(model_, k) + ": conv parameters");
      auto [dw_filter, dw_bias] = conv_weights(model_, dw, statics_);
      auto [filter, bias] = conv_weights(model_, conv, statics_);
      native = std::make_unique<NativeExpandDepthwise>(
          *first, filter, bias, r.epilogue,
          std::make_unique<NativeDepthwise>(*second, dw_filter, dw_bias, r.depthwise_epilogue, isa_),
          size_t(std::max(1, options_.threads)), isa_);
    } else {
      native = make_native_op(model_, k, r.native, statics_, r.epilogue, isa_, options_.cpu.drop_dead_taps);
    }
    NN_CHECK_OR_RETURN(native && native->ok(), StatusCode::kOutOfMemory, op_label(model_, k) + ": packing weights");
    if (r.gated)
      NN_CHECK_OR_RETURN(static_cast<NativeConv&>(*native).enable_scaled_input(r.gated->sum.has_value()),
                         StatusCode::kOutOfMemory, op_label(model_, k) + ": gated weights");
    r.kernel = std::move(native);
  }
  return Status::ok();
}

std::vector<uint32_t> CpuPartition::writes(uint32_t k) const {
  if (absorbed(k)) return {};
  const FusedOp& r = ops_.at(k);
  if (r.output) return {*r.output};
  return model_.operations[k].outputs;
}

std::vector<uint32_t> CpuPartition::reads(uint32_t k) const {
  if (absorbed(k)) return {};
  const FusedOp& f = ops_.at(k);
  std::vector<uint32_t> r;
  if (f.gated) {  // reads x, the gate and the sum in place of its input
    r.push_back(f.gated->x);
    r.push_back(f.gated->gate);
    if (f.gated->sum) r.push_back(*f.gated->sum);
  }
  if (f.resize) r.push_back(model_.operations[*f.resize].inputs[0]);
  for (uint32_t i : model_.operations[k].inputs)
    if (model_.has_value(i) && !static_data(i) && !((f.gated || f.resize) && i == model_.operations[k].inputs[0]))
      r.push_back(i);
  if (f.residual && std::find(r.begin(), r.end(), *f.residual) == r.end()) r.push_back(*f.residual);
  return r;
}

// Steps: runs of XNNPACK ops, native kernels and reference ops, as few as dependencies
// allow. Grouped by head (its fused ops follow it), so a fused chain never splits.
void CpuPartition::group_steps() {
  std::vector<uint32_t> heads;
  std::vector<int> head_labels;
  std::vector<std::vector<uint32_t>> head_reads, head_writes;
  for (uint32_t k : live_) {
    if (absorbed(k)) continue;
    heads.push_back(k);
    head_labels.push_back(rec(k).step);
    head_reads.push_back(reads(k));
    head_writes.push_back(writes(k));
  }
  std::vector<LabeledGroup> groups = group_by_label(heads, head_labels, head_reads, head_writes);
  if (options_.profile) {  // one step per head, to time each
    std::vector<LabeledGroup> split;
    for (LabeledGroup& g : groups)
      for (uint32_t k : g.ops) split.push_back({g.label, {k}});
    groups = std::move(split);
  }
  for (LabeledGroup& g : groups) {
    std::vector<uint32_t> with_fused;
    for (uint32_t k : g.ops) {
      with_fused.push_back(k);
      const auto& chain = rec(k).chain;
      with_fused.insert(with_fused.end(), chain.begin(), chain.end());
    }
    g.ops = std::move(with_fused);
  }

  std::map<uint32_t, size_t> step_of_op;
  for (size_t g = 0; g < groups.size(); ++g)
    for (uint32_t k : groups[g].ops) step_of_op[k] = g;

  steps_.clear();
  steps_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    Step& step = steps_[g];
    step.kind = static_cast<StepKind>(groups[g].label);
    step.xnn = step.kind == kXnnStep;
    step.ops = groups[g].ops;
    std::set<uint32_t> written_here;
    for (uint32_t k : step.ops)
      for (uint32_t o : writes(k)) written_here.insert(o);
    for (uint32_t k : step.ops) {
      for (uint32_t i : reads(k))
        if (!written_here.count(i) && std::find(step.inputs.begin(), step.inputs.end(), i) == step.inputs.end())
          step.inputs.push_back(i);
      for (uint32_t o : writes(k)) {
        bool needed = partition_outputs_.count(o) || model_outputs_.count(o) || !step.xnn;
        auto rd = readers_.find(o);
        if (rd != readers_.end())
          for (uint32_t r : rd->second) {
            auto it = step_of_op.find(r);
            if (it != step_of_op.end() && it->second != g) needed = true;  // fused readers sit in their head's step
          }
        if (needed) step.outputs.push_back(o);
      }
    }
    const char* kind_name = step.kind == kXnnStep      ? "xnnpack"
                            : step.kind == kNativeStep ? "native"
                                                       : "reference";
    const size_t fused_count = rec(step.ops[0]).chain.size();
    if (step.ops.size() == 1 + fused_count) {
      step.label = op_label(model_, step.ops[0]) + " [" + kind_name + "]";
    } else {
      step.label = std::string(kind_name) + " step of " + std::to_string(step.ops.size()) + " ops (" +
                   op_label(model_, step.ops.front()) + " .. " + op_label(model_, step.ops.back()) + ")";
    }
  }
}

// Tensors between steps share one arena: each lives from the op that writes it to the
// last op that reads it, and tensors whose lives overlap get disjoint bytes (greedy by
// size, first fit, as TFLite's arena planner). Besides memory, reuse keeps the working set
// in cache: the selfie decoder's 1 MB tensors cycle through a few slots.
Status CpuPartition::plan_memory() {
  struct Life {
    uint32_t operand;
    size_t first, last, bytes, offset = 0;
  };
  // Lives in positions finer than steps: a native or reference step runs its ops one after
  // another, so each op (with the ops fused into it) is a position of its own and the
  // tensors inside such a step reuse bytes too (one step of MobileNetV2's native convs and
  // depthwise held every tensor apart: 12% slower). An XNNPACK step is one position.
  std::map<uint32_t, size_t> written_at, last_read;
  size_t pos = 0;
  for (const Step& step : steps_) {
    for (uint32_t k : step.ops) {
      if (!step.xnn && !absorbed(k) && k != step.ops.front()) ++pos;
      const Operation& op = model_.operations[k];
      for (uint32_t o : op.outputs) written_at.emplace(o, pos);
      for (uint32_t i : op.inputs) last_read[i] = std::max(last_read[i], pos);
      if (const auto& res = rec(k).residual) last_read[*res] = std::max(last_read[*res], pos);
    }
    ++pos;
  }
  std::map<uint32_t, size_t> index;
  std::vector<Life> lives;
  for (size_t s = 0; s < steps_.size(); ++s)
    for (uint32_t o : steps_[s].outputs)
      if (!partition_outputs_.count(o) && !index.count(o)) {
        index[o] = lives.size();
        // XNNPACK's read slack past each tensor, 64-byte aligned starts.
        const size_t bytes = (model_.operands[o].byte_size() + kTensorSlackBytes + 63) / 64 * 64;
        const size_t first = written_at.at(o);
        auto r = last_read.find(o);
        lives.push_back({o, first, r != last_read.end() ? std::max(first, r->second) : first, bytes});
      }
  std::vector<size_t> order(lives.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lives[a].bytes > lives[b].bytes; });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t k : order) {
    Life& l = lives[k];
    std::vector<std::pair<size_t, size_t>> taken;  // [offset, end) of overlapping lives
    for (size_t p : placed)
      if (lives[p].first <= l.last && l.first <= lives[p].last)
        taken.push_back({lives[p].offset, lives[p].offset + lives[p].bytes});
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + l.bytes <= begin) break;
      offset = std::max(offset, end);
    }
    l.offset = offset;
    total = std::max(total, offset + l.bytes);
    placed.push_back(k);
  }
  arena_ = AlignedBuffer(total);
  NN_CHECK_OR_RETURN(arena_.ok(), StatusCode::kOutOfMemory,
                     "cpu delegate: " + std::to_string(total) + " bytes for intermediate tensors");
  for (const Life& l : lives) internal_[l.operand] = arena_.data() + l.offset;
  return Status::ok();
}


Status CpuPartition::prepare(std::span<void* const> buffers) {
  auto pointer = [&](uint32_t operand) -> void* {
    if (const void* s = static_data(operand)) return const_cast<void*>(s);
    auto it = internal_.find(operand);
    if (it != internal_.end()) return it->second;
    return operand < buffers.size() ? buffers[operand] : nullptr;
  };
  const OpRegistry& registry = OpRegistry::instance();
  for (Step& step : steps_) {
    if (step.xnn) {
      step.external_values.clear();
      for (size_t id = 0; id < step.external_operands.size(); ++id) {
        void* p = pointer(step.external_operands[id]);
        NN_CHECK_OR_RETURN(
            p, StatusCode::kInternal,
            step.label + ": no buffer for operand " + std::to_string(step.external_operands[id]));
        step.external_values.push_back({static_cast<uint32_t>(id), p});
      }
      xnn_status s =
          xnn_setup_runtime(step.runtime.get(), step.external_values.size(), step.external_values.data());
      NN_CHECK_OR_RETURN(s == xnn_status_success, StatusCode::kInternal,
                         step.label + ": xnn_setup_runtime: " + xnn_status_name(s));
      continue;
    }
    step.ref_ops.clear();
    if (step.kind == kNativeStep) {
      for (uint32_t k : step.ops) {
        if (absorbed(k)) continue;
        const FusedOp& f = rec(k);
        RefOp r;
        r.op = k;
        if (f.data) {
          r.data = f.data.get();
          for (uint32_t i : r.data->operands()) r.in.push_back(pointer(i));
          r.out.push_back(pointer(model_.operations[k].outputs[0]));
          for (const void* p : r.in) NN_CHECK_OR_RETURN(p, StatusCode::kInternal, step.label + ": no input buffer");
          NN_CHECK_OR_RETURN(r.out[0], StatusCode::kInternal, step.label + ": no output buffer");
          step.ref_ops.push_back(std::move(r));
          continue;
        }
        r.native = f.kernel.get();
        r.in.push_back(pointer(f.gated    ? f.gated->x
                               : f.resize ? model_.operations[*f.resize].inputs[0]
                                          : model_.operations[k].inputs[0]));
        r.in.push_back(f.residual ? pointer(*f.residual) : nullptr);
        if (f.gated) {  // in[2] the gate, in[3] the sum (or null)
          r.in.push_back(pointer(f.gated->gate));
          r.in.push_back(f.gated->sum ? pointer(*f.gated->sum) : nullptr);
          NN_CHECK_OR_RETURN(r.in[2] && (!f.gated->sum || r.in[3]), StatusCode::kInternal,
                             step.label + ": no buffer for the gated input");
        }
        r.out.push_back(pointer(written(f)));
        NN_CHECK_OR_RETURN(r.native && r.in[0] && r.out[0] && (!f.residual || r.in[1]), StatusCode::kInternal,
                           step.label + ": no buffer");
        step.ref_ops.push_back(std::move(r));
      }
      continue;
    }
    for (uint32_t k : step.ops) {
      const Operation& op = model_.operations[k];
      RefOp r;
      r.op = k;
      r.def = registry.find(op.type);
      for (uint32_t i : op.inputs) {
        void* p = model_.has_value(i) ? pointer(i) : nullptr;
        NN_CHECK_OR_RETURN(p || !model_.has_value(i), StatusCode::kInternal,
                           op_label(model_, k) + ": no buffer for input operand " + std::to_string(i));
        r.in.push_back(p);
      }
      for (uint32_t o : op.outputs) {
        void* p = pointer(o);
        NN_CHECK_OR_RETURN(p, StatusCode::kInternal,
                           op_label(model_, k) + ": no buffer for output operand " + std::to_string(o));
        r.out.push_back(p);
      }
      step.ref_ops.push_back(std::move(r));
    }
  }
  return Status::ok();
}

// Profiling clock: with no thread pool, the calling thread's CPU time (steady under load
// from other processes); with a pool, wall time (the workers' time is not ours to read).
double profile_clock_ms(bool use_cpu_time) {
  if (use_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status CpuPartition::run() {
  const bool cpu_clock = options_.threadpool == nullptr;
  for (Step& step : steps_) {
    const double t0 = options_.profile ? profile_clock_ms(cpu_clock) : 0;
    if (step.xnn) {
      xnn_status s = xnn_invoke_runtime(step.runtime.get());
      NN_CHECK_OR_RETURN(s == xnn_status_success, StatusCode::kInternal,
                         step.label + ": xnn_invoke_runtime: " + xnn_status_name(s));
    } else if (step.kind == kNativeStep) {
      for (const RefOp& r : step.ref_ops) {
        auto in = [&](size_t i) { return static_cast<const float*>(r.in[i]); };
        if (r.data)
          r.data->run(r.in, r.out[0], options_.threadpool);
        else if (r.in.size() > 2)
          static_cast<const NativeConv&>(*r.native)
              .run_scaled(in(0), in(2), in(3), in(1), static_cast<float*>(r.out[0]), options_.threadpool);
        else
          r.native->run(in(0), in(1), static_cast<float*>(r.out[0]), options_.threadpool);
      }
    } else {
      for (const RefOp& r : step.ref_ops) {
        OpContext ctx{model_, model_.operations[r.op], r.in, r.out};
        Status s = r.def->reference(ctx);
        if (!s.is_ok()) return s.with_context(op_label(model_, r.op));
      }
    }
    if (options_.profile) step.last_ms = profile_clock_ms(cpu_clock) - t0;
  }
  return Status::ok();
}

std::vector<StepTiming> CpuPartition::step_timings() const {
  std::vector<StepTiming> t;
  if (!options_.profile) return t;
  for (const Step& s : steps_) {
    // Profiled steps hold one head op and its fused chain (or XNNPACK's one node).
    t.push_back({s.label, s.last_ms, s.ops, kernel_name(s.ops.front())});
  }
  return t;
}

std::string CpuPartition::kernel_name(uint32_t k) const {
  const FusedOp& f = ops_.at(k);
  if (f.data) return f.data->kernel();
  if (f.native == NativeKind::kNone) return f.lowers ? "xnnpack" : "reference";
  std::string name;
  switch (f.native) {
    case NativeKind::kConv:
      name = f.depthwise ? "native conv+depthwise"
             : f.resize  ? "native conv+resize"
             : f.gated   ? "native conv (gated input)"
                         : "native conv";
      break;
    case NativeKind::kDepthwise: name = "native depthwise"; break;
    case NativeKind::kDeconv: name = "native deconv"; break;
    case NativeKind::kResize: name = "native resize"; break;
    case NativeKind::kAddMean: name = "native add+mean"; break;
    case NativeKind::kNone: break;
  }
  name += isa_.avx512 ? " AVX-512" : " AVX2";
  // The variants a CpuOptions switch picks, so --explain and --profile show them.
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && f.kernel &&
      static_cast<const NativeConv*>(f.kernel.get())->ymm_last_panel())
    name += ", ymm last panel";
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && f.kernel) {
    const NativeConvShape& s = static_cast<const NativeConv*>(f.kernel.get())->shape();
    const Dims& filter = model_.operands[model_.operations[k].inputs[1]].dims;
    if (s.kernel_h != filter[1] || s.kernel_w != filter[2])
      name += ", " + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " live taps";
  }
  if (f.native == NativeKind::kDepthwise && f.kernel &&
      static_cast<const NativeDepthwise*>(f.kernel.get())->row_pairs())
    name += ", row pairs";
  return name;
}

std::vector<StepTiming> CpuPartition::kernels() const {
  std::vector<StepTiming> t;
  for (const Step& s : steps_)
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const uint32_t k = s.ops[i];
      if (absorbed(k)) continue;
      StepTiming e{op_label(model_, k), 0, {k}, kernel_name(k)};
      for (size_t j = i + 1; j < s.ops.size() && absorbed(s.ops[j]); ++j) e.ops.push_back(s.ops[j]);
      t.push_back(std::move(e));
    }
  return t;
}

class CpuDelegate final : public Delegate {
 public:
  explicit CpuDelegate(bool use_xnnpack) : use_xnnpack_(use_xnnpack) {}
  std::string name() const override { return use_xnnpack_ ? "cpu" : "reference"; }
  Status available() const override { return Status::ok(); }

  SupportResult supports(const Model& model, uint32_t op_index) const override {
    const OpDef* def = OpRegistry::instance().find(model.operations[op_index].type);
    if (def && def->reference) return SupportResult::yes();
    if (use_xnnpack_ && xnnpack_ready().is_ok()) {
      StaticLookup constants = [&](uint32_t o) -> const void* {
        return model.operands[o].is_constant() ? model.operands[o].data : nullptr;
      };
      if (xnn_can_lower(model, op_index, constants).supported) return SupportResult::yes();
    }
    return SupportResult::no("no kernel for " +
                             std::string(operation_type_name(model.operations[op_index].type)));
  }

  Result<std::unique_ptr<CompiledPartition>> compile(const Model& model, const PartitionSpec& spec,
                                                     const CompileOptions& options) override {
    const bool xnn = use_xnnpack_ && xnnpack_ready().is_ok();
    std::map<uint32_t, std::string> force_reference;
    for (size_t attempt = 0; attempt <= spec.ops.size() + 1; ++attempt) {
      auto partition = std::make_unique<CpuPartition>(model, spec, options);
      int64_t retry_op = -1;
      Status s = partition->build(xnn, force_reference, &retry_op);
      if (s.is_ok()) return std::unique_ptr<CompiledPartition>(std::move(partition));
      if (retry_op < 0 || force_reference.count(static_cast<uint32_t>(retry_op))) return s;
      // XNNPACK refused a node that xnn_can_lower accepted: run that op on the reference
      // kernels and say so.
      log_line(log_, op_label(model, static_cast<uint32_t>(retry_op)) +
                         " runs on reference kernels inside cpu: " + s.message());
      force_reference[static_cast<uint32_t>(retry_op)] = s.message();
    }
    return Status(StatusCode::kInternal, "cpu delegate: partition did not converge");
  }

 private:
  bool use_xnnpack_;
  std::function<void(const std::string&)> log_;
};

}  // namespace
}  // namespace cpu

std::unique_ptr<Delegate> make_cpu_delegate() {
  return std::make_unique<cpu::CpuDelegate>(true);
}
std::unique_ptr<Delegate> make_reference_delegate() {
  return std::make_unique<cpu::CpuDelegate>(false);
}

}  // namespace nn
