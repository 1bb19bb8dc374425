// The CPU delegate's rules for native kernels (native_choice.h).
#include "delegates/cpu/native_choice.h"

#include <algorithm>
#include <limits>
#include <string>

#include "delegates/cpu/native_dot_conv.h"
#include "delegates/cpu/native_grouped_conv.h"
#include "delegates/cpu/native_winograd.h"
#include "ops/activation.h"
#include "ops/op_params.h"

namespace nn::cpu {

bool is_activation(OperationType t) {
  return clamp_activation_code(t).has_value();
}

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

bool feeds_epilogue_op(const Model& m, uint32_t k, const Readers& readers,
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

// Whether depthwise op d reads a native conv (through its activation ops, each the only
// reader of what it reads) and would run with it (NativeExpandDepthwise, at one thread:
// expand_depthwise_pays).
static bool fed_by_expansion(const Model& m, uint32_t d, const Readers& readers, const NativeIsa& isa) {
  uint32_t in = m.operations[d].inputs[0];
  for (int hop = 0; hop < 3; ++hop) {
    auto r = readers.find(in);
    if (r == readers.end() || r->second.size() != 1) return false;
    const Operation* producer = nullptr;
    for (const Operation& op : m.operations)
      if (!op.outputs.empty() && op.outputs[0] == in) producer = &op;
    if (!producer) return false;
    if (!is_activation(producer->type))
      return dense_conv_candidate(m, *producer) && expand_depthwise_pays(m, d, 1, isa);
    in = producer->inputs[0];
  }
  return false;
}

namespace {

// FULLY_CONNECTED as a 1x1 conv over its rows: input [.., K] flattened to M rows of K,
// weights [N, K] (a conv filter [N, 1, 1, K]), output M rows of N.
std::optional<NativeConvShape> fully_connected_shape(const Model& m, const Operation& op) {
  if (op.type != OperationType::FULLY_CONNECTED || op.inputs.size() != 4) return std::nullopt;
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& w = m.operands[op.inputs[1]];
  if (in.type != OperandType::TENSOR_FLOAT32 || w.dims.size() != 2 || w.dims[1] == 0) return std::nullopt;
  const size_t k = w.dims[1], elements = num_elements(in.dims);
  if (elements % k != 0 || elements / k > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  NativeConvShape s;
  s.in_h = s.out_h = 1;
  s.in_w = s.out_w = uint32_t(elements / k);
  s.in_c = uint32_t(k);
  s.out_c = w.dims[0];
  return s;
}

}  // namespace

bool grouped_conv_pays(const Model& m, const Operation& op, const WindowParams& p, const CpuOptions& options,
                       const NativeIsa& isa) {
  const Operand& out = m.operands[op.outputs[0]];
  if (!options.native_grouped_conv || op.type != OperationType::GROUPED_CONV_2D || out.dims.size() != 4 ||
      p.groups < 2 || size_t(out.dims[0]) * out.dims[1] * out.dims[2] < 6)
    return false;
  // Every tile runs per-tap segments (NativeConv: at most 16). On AVX-512 XNNPACK's grouped
  // GEMMs beat NativeConv's (16 output channels per group, RegNet's group width, leave its
  // 8x16 kernel 8 accumulators), so there NativeGroupedConv takes 8-16 channels per group,
  // two groups per call (NativeIsa::grouped_pairs), and XNNPACK the rest; on AVX2
  // NativeConv's 6x16 kernel wins (figures: bench/README.md, grouped convs).
  if (isa.avx512) {
    const std::optional<NativeConvShape> s = conv_shape(m, op);
    return isa.grouped_pairs && s && s->out_c / s->groups >= 8 && NativeGroupedConv::supports(*s, isa);
  }
  return p.filter_h * p.filter_w <= 16;
}

NativeKind native_candidate(const Model& m, uint32_t k,
                            const Readers& readers,
                            const StaticLookup& statics, const CpuOptions& options, const NativeIsa& isa) {
  if (!native_conv_supported() || !options.native_kernels) return NativeKind::kNone;
  const Operation& op = m.operations[k];
  if (op.type == OperationType::FULLY_CONNECTED) {
    // Rows enough for a micro-tile (as dense_conv_candidate); a single row (a classifier)
    // is a matrix-vector product XNNPACK streams as fast.
    if (!options.native_fully_connected || !statics(op.inputs[1]) ||
        (m.has_value(op.inputs[2]) && !statics(op.inputs[2])))
      return NativeKind::kNone;
    const std::optional<NativeConvShape> s = fully_connected_shape(m, op);
    const uint32_t rows = s ? s->out_w : 0;
    return rows >= 6 ? NativeKind::kConv : NativeKind::kNone;
  }
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
    case OperationType::GROUPED_CONV_2D:
      return grouped_conv_pays(m, op, *p, options, isa) ? NativeKind::kConv : NativeKind::kNone;
    case OperationType::DEPTHWISE_CONV_2D:
      if (p->depth_multiplier != 1 || out.dims[3] != in.dims[3] || p->filter_h > NativeDepthwise::kMaxKernelH)
        return NativeKind::kNone;
      // On AVX2, XNNPACK's 3x3 up16x9 dwconv (its AVX2 kernel: bench/cpuinfo_no_avx512.py)
      // beats ours only on small maps of wide layers with nothing to fuse (MobileNetV2's
      // 7x7x576-960); from 14x14 on ours is as fast or faster, and where the epilogue saves a
      // pass or it runs with its expansion. Ours on AVX-512 wins everywhere (bench/README.md).
      if (!isa.avx512 && p->filter_h == 3 && p->filter_w == 3 && out.dims[3] > 32 && out.dims[2] < 14 &&
          !feeds_epilogue_op(m, k, readers, statics) && !fed_by_expansion(m, k, readers, isa))
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

std::optional<NativeResizeShape> resize_shape(const Model& m, const Operation& op, uint32_t channels) {
  std::string why;
  auto r = parse_resize(m, op, &why);
  if (!r) return std::nullopt;
  const Dims& in = m.operands[op.inputs[0]].dims;
  return NativeResizeShape{uint32_t(in[0]), uint32_t(in[1]), uint32_t(in[2]),  channels,
                           r->out_h,        r->out_w,        r->align_corners, r->half_pixel_centers};
}

std::optional<NativeConvShape> conv_shape(const Model& m, const Operation& op) {
  if (op.type == OperationType::FULLY_CONNECTED) return fully_connected_shape(m, op);
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
  if (op.type == OperationType::GROUPED_CONV_2D) s.groups = p->groups;
  return s;
}

// Micro-kernel cost of a conv over one row of `width` pixels, in pixels at the full
// tile's rate. AVX-512: a tail costs a whole 8-row tile (as measured when the fusion was
// tuned). AVX2: a tail runs the 4-, 2- or 1-row kernel, or the 6-row one for 5 rows (a
// 56-pixel row: 9 tiles and a 2-row one; fused, MobileNetV2's 56x56x144 expansions and
// their depthwise ran 4-7% faster than apart).
static size_t row_tile_cost(size_t width, const NativeIsa& isa) {
  const size_t tile = NativeConv::tile_pixels(isa), tail = width % tile;
  const size_t tail_cost = tail == 0 ? 0 : isa.avx512 || tail > 4 ? tile : tail > 2 ? 4 : tail;
  return width - tail + tail_cost;
}

bool expand_depthwise_pays(const Model& m, uint32_t d, int threads, const NativeIsa& isa) {
  auto s = conv_shape(m, m.operations[d]);
  if (!s) return false;
  const size_t halo = NativeExpandDepthwise::halo_rows(*s) * size_t(std::max(1, threads) - 1);
  const size_t width = s->in_w;
  const size_t bytes = size_t(s->batch) * s->in_h * s->in_w * s->in_c * sizeof(float);
  // AVX2: rows of at least 6 tiles (MobileNetV2's 28-pixel rows, 4 tiles and a 4-row one,
  // ran 5% slower fused than apart: too few pixels per pass over the weights).
  const bool enough_tiles = isa.avx512 || width >= 6 * NativeConv::tile_pixels(isa);
  return bytes >= (size_t(512) << 10) && halo * 25 <= s->in_h && enough_tiles &&
         row_tile_cost(width, isa) * 100 <= width * 103;
}

bool depthwise_project_pays(const Model& m, uint32_t d, uint32_t p) {
  auto s = conv_shape(m, m.operations[d]), q = conv_shape(m, m.operations[p]);
  if (!s || !q || q->groups != 1 || q->batch != s->batch || q->in_h != s->out_h || q->in_w != s->out_w ||
      q->in_c != s->out_c)
    return false;
  // As for the expansion: where the depthwise's output (written and read back apart) does
  // not stay in L2. Smaller ones gained nothing (selfie's 32x32x72: 1.01 / 0.99 of the two
  // ops apart on AVX2 / AVX-512; MobileNetV2's 28x28x144: 1.01 / 0.99).
  const size_t bytes = size_t(s->batch) * s->out_h * s->out_w * s->out_c * sizeof(float);
  return bytes >= (size_t(512) << 10);
}

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
  const size_t c = s->in_c / std::max<uint32_t>(1, s->groups);  // the filter's input channels
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

std::pair<const float*, const float*> conv_weights(const Model& m, const Operation& op,
                                                   const StaticLookup& statics) {
  return {static_cast<const float*>(statics(op.inputs[1])),
          m.has_value(op.inputs[2]) ? static_cast<const float*>(statics(op.inputs[2])) : nullptr};
}

// at_size: build a pointwise conv for this NHWC size instead of its own (the conv moved in
// front of a resize, NativeConvThenResize).
std::unique_ptr<NativeOp> make_native_op(const Model& m, uint32_t k, NativeKind kind,
                                         const StaticLookup& statics, const Epilogue& epilogue,
                                         const NativeIsa& isa, bool dead_taps, const Dims* at_size,
                                         int winograd_threads, bool winograd_split, bool winograd_f2,
                                         bool winograd_dilated) {
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
      if (s.groups > 1 && isa.grouped_pairs && NativeGroupedConv::supports(s, isa))
        return std::make_unique<NativeGroupedConv>(s, weights, bias, epilogue);
      if (isa.dot_conv && !at_size && NativeDotConv::supports(s, epilogue, isa))
        return std::make_unique<NativeDotConv>(s, weights, bias, epilogue, isa);
      const uint32_t tile =
          winograd_threads > 0 && s.groups == 1
              ? winograd_choice(s, winograd_threads, winograd_split, isa, winograd_f2, winograd_dilated)
              : 0;
      if (tile != 0)
        return std::make_unique<NativeWinograd>(s, weights, bias, epilogue, size_t(winograd_threads), tile, isa,
                                                winograd_split);
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

}  // namespace nn::cpu
