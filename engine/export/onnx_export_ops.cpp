// IR operations -> ONNX (opset 14) nodes in NCHW. Operand lists are OPS.md's; the model
// was validated (and its shapes inferred) before translation, so counts and scalar types
// hold. Whatever cannot be expressed exactly is refused with kUnsupportedOp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "export/onnx_exporter.h"
#include "ops/conv_util.h"
#include "ops/op_params.h"

namespace nn::onnx_export {

namespace {

Status unsupported(std::string message) {
  return {StatusCode::kUnsupportedOp, std::move(message)};
}

std::vector<int64_t> to_i64(const Dims& d) {
  return std::vector<int64_t>(d.begin(), d.end());
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0 && mant == 0) {
    bits = sign;
  } else if (exp == 0) {  // subnormal: normalize
    exp = 127 - 15 + 1;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Writes `type`'s result to `out` (in `layout`), through the fused activation when there is one.
std::string result_name(Exporter& e, uint32_t out, Layout layout, int32_t fuse) {
  return fuse == 0 ? e.define(out, layout) : e.temp(e.operand(out).name + "/linear");
}

Status finish(Exporter& e, uint32_t out, Layout layout, int32_t fuse, const std::string& linear) {
  if (fuse == 0) return Status::ok();
  return e.activation(fuse, linear, e.define(out, layout));
}

// ------------------------------------------------------------------------------------------
// Convolutions

using conv_util::ConvKind;

Status conv(Exporter& e, const Operation& op, ConvKind kind) {
  const Model& m = e.model();
  NN_ASSIGN_OR_RETURN(const ConvParams p, decode_conv(m, op, kind));
  const Operand& in = e.operand(op.inputs[0]);
  const Operand& filter = e.operand(op.inputs[1]);
  const Operand& out = e.operand(op.outputs[0]);
  if (!e.is_constant(op.inputs[1])) return unsupported("input 1 (filter) must be a constant to export");
  if (!e.is_constant(op.inputs[2])) return unsupported("input 2 (bias) must be a constant to export");
  NN_ASSIGN_OR_RETURN(std::vector<float> w, e.const_f32(op.inputs[1]));
  NN_ASSIGN_OR_RETURN(std::vector<float> bias, e.const_f32(op.inputs[2]));

  const int64_t stride_w = p.stride_w, stride_h = p.stride_h, dil_w = p.dil_w, dil_h = p.dil_h;
  const int32_t fuse = p.fuse;
  const size_t in_c = in.dims[3];
  const size_t f0 = filter.dims[0], kh = filter.dims[1], kw = filter.dims[2], f3 = filter.dims[3];

  // Weights: OHWI -> OIHW (conv, grouped), [1,H,W,C] -> [C,1,H,W] (depthwise),
  // OHWI -> IOHW (ConvTranspose).
  std::vector<float> wt(w.size());
  std::vector<int64_t> wdims;
  int64_t group = 1;
  if (kind == ConvKind::kDepthwise) {
    const size_t c = f3;
    for (size_t h = 0; h < kh; ++h)
      for (size_t x = 0; x < kw; ++x)
        for (size_t ch = 0; ch < c; ++ch) wt[(ch * kh + h) * kw + x] = w[(h * kw + x) * c + ch];
    wdims = {static_cast<int64_t>(c), 1, static_cast<int64_t>(kh), static_cast<int64_t>(kw)};
    group = static_cast<int64_t>(in_c);
  } else if (kind == ConvKind::kTranspose) {
    for (size_t o = 0; o < f0; ++o)
      for (size_t h = 0; h < kh; ++h)
        for (size_t x = 0; x < kw; ++x)
          for (size_t i = 0; i < f3; ++i)
            wt[((i * f0 + o) * kh + h) * kw + x] = w[((o * kh + h) * kw + x) * f3 + i];
    wdims = {static_cast<int64_t>(f3), static_cast<int64_t>(f0), static_cast<int64_t>(kh),
             static_cast<int64_t>(kw)};
  } else {
    for (size_t o = 0; o < f0; ++o)
      for (size_t h = 0; h < kh; ++h)
        for (size_t x = 0; x < kw; ++x)
          for (size_t i = 0; i < f3; ++i)
            wt[((o * f3 + i) * kh + h) * kw + x] = w[((o * kh + h) * kw + x) * f3 + i];
    wdims = {static_cast<int64_t>(f0), static_cast<int64_t>(f3), static_cast<int64_t>(kh),
             static_cast<int64_t>(kw)};
    if (kind == ConvKind::kGrouped) group = p.groups;
  }

  // Padding, explicit in ONNX order [top, left, bottom, right].
  conv_util::AxisPadding pw = p.pad_w, ph = p.pad_h;
  int64_t out_pad_w = 0, out_pad_h = 0;
  if (kind == ConvKind::kTranspose) {
    // A negative tail pad (implicit SAME) means the output runs past the last input's
    // window: ONNX says that with output_padding.
    if (pw.after < 0) out_pad_w = -std::exchange(pw.after, 0);
    if (ph.after < 0) out_pad_h = -std::exchange(ph.after, 0);
    if (pw.before < 0 || ph.before < 0) return unsupported("negative leading padding");
  }

  // OpenCV 4.6 refuses asymmetric ConvTranspose pads: pad the common part and crop the rest
  // with a Slice (a forward Conv takes asymmetric pads everywhere).
  int64_t crop_t = 0, crop_l = 0;
  bool crop = false;
  if (kind == ConvKind::kTranspose && (ph.before != ph.after || pw.before != pw.after)) {
    const int64_t ch = std::min(ph.before, ph.after), cw = std::min(pw.before, pw.after);
    crop_t = ph.before - ch;
    crop_l = pw.before - cw;
    ph = {ch, ch};
    pw = {cw, cw};
    crop = true;
  }

  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kNchw));
  // Output channels are ONNX axis 0 of the weights (1 for ConvTranspose's IOHW).
  const std::string wname =
      e.weight(op.inputs[1], filter.name + "/oihw", wdims, wt, kind == ConvKind::kTranspose ? 1 : 0);
  const std::string bname =
      e.weight(op.inputs[2], e.operand(op.inputs[2]).name.empty() ? filter.name + "/bias" : e.operand(op.inputs[2]).name,
               {static_cast<int64_t>(bias.size())}, bias, 0);
  const std::string y = result_name(e, op.outputs[0], Layout::kNchw, fuse);
  const std::string raw = crop ? e.temp(out.name + "/uncropped") : y;
  auto& n = e.node(kind == ConvKind::kTranspose ? "ConvTranspose" : "Conv", {x, wname, bname}, {raw});
  attr_ints(n, "kernel_shape", {static_cast<int64_t>(kh), static_cast<int64_t>(kw)});
  attr_ints(n, "strides", {stride_h, stride_w});
  attr_ints(n, "pads", {ph.before, pw.before, ph.after, pw.after});
  if (kind != ConvKind::kTranspose) attr_ints(n, "dilations", {dil_h, dil_w});
  attr_int(n, "group", group);
  if (out_pad_h || out_pad_w) attr_ints(n, "output_padding", {out_pad_h, out_pad_w});
  if (crop) {
    const int64_t oh = out.dims[1], ow = out.dims[2];
    e.node("Slice",
           {raw, e.init_i64(y + "/starts", {crop_t, crop_l}),
            e.init_i64(y + "/ends", {crop_t + oh, crop_l + ow}), e.init_i64(y + "/axes", {2, 3})},
           {y});
  }
  return finish(e, op.outputs[0], Layout::kNchw, fuse, y);
}

// ------------------------------------------------------------------------------------------
// Pooling

Status pool(Exporter& e, const Operation& op, bool average) {
  const Model& m = e.model();
  NN_ASSIGN_OR_RETURN(const PoolParams p, decode_pool(m, op));
  const Operand& in = e.operand(op.inputs[0]);
  const Operand& out = e.operand(op.outputs[0]);
  const int64_t stride_w = p.stride_w, stride_h = p.stride_h, fw = p.filter_w, fh = p.filter_h;
  const int32_t fuse = p.fuse;
  const conv_util::AxisPadding pw = p.pad_w, ph = p.pad_h;
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kNchw));
  const std::string y = result_name(e, op.outputs[0], Layout::kNchw, fuse);
  const bool global = fh == in.dims[1] && fw == in.dims[2] && out.dims[1] == 1 && out.dims[2] == 1 &&
                      pw.before == 0 && pw.after == 0 && ph.before == 0 && ph.after == 0;
  if (global) {
    e.node(average ? "GlobalAveragePool" : "GlobalMaxPool", {x}, {y});
  } else {
    auto& n = e.node(average ? "AveragePool" : "MaxPool", {x}, {y});
    attr_ints(n, "kernel_shape", {fh, fw});
    attr_ints(n, "strides", {stride_h, stride_w});
    attr_ints(n, "pads", {ph.before, pw.before, ph.after, pw.after});
    if (average) attr_int(n, "count_include_pad", 0);
  }
  return finish(e, op.outputs[0], Layout::kNchw, fuse, y);
}

// ------------------------------------------------------------------------------------------
// Element-wise

// A binary op's input in the output's layout. Lower-rank inputs broadcast against the
// trailing IR dims, so in NCHW they are first made 4-D in IR order ([C] -> [1,1,1,C]) and
// then permuted ([1,C,1,1]). OpenCV 4.6 reads a broadcast constant only per channel, as a
// single value or at the full output shape, so other constants are expanded to the output.
Result<std::string> broadcast_input(Exporter& e, uint32_t index, const Dims& out_dims) {
  const Operand& o = e.operand(index);
  const size_t out_rank = out_dims.size();
  const std::string label = o.name.empty() ? "const_" + std::to_string(index) : o.name;
  if (e.is_constant(index) && num_elements(o.dims) == 1) {
    NN_ASSIGN_OR_RETURN(std::vector<float> v, e.const_f32(index));
    return e.scalar1_f32(v[0]);  // shape [1]: OpenCV 4.6 mishandles 0-d constants
  }
  if (out_rank != 4) return e.value(index, Layout::kIr);
  Dims d4(4 - o.dims.size(), 1);
  d4.insert(d4.end(), o.dims.begin(), o.dims.end());
  if (e.is_constant(index)) {
    NN_ASSIGN_OR_RETURN(std::vector<float> v, e.const_f32(index));
    const bool per_channel = d4[0] == 1 && d4[1] == 1 && d4[2] == 1;
    Dims target = per_channel ? d4 : out_dims;
    if (num_elements(target) > (size_t{1} << 26))
      return unsupported("broadcast constant too large to expand");
    // target[i] = v[broadcast index], NHWC -> NCHW in one pass.
    const size_t n = target[0], h = target[1], w = target[2], c = target[3];
    std::vector<float> t(num_elements(target));
    auto src = [&](size_t a, size_t y, size_t x, size_t ch) {
      a = d4[0] == 1 ? 0 : a;
      y = d4[1] == 1 ? 0 : y;
      x = d4[2] == 1 ? 0 : x;
      ch = d4[3] == 1 ? 0 : ch;
      return v[((a * d4[1] + y) * d4[2] + x) * d4[3] + ch];
    };
    for (size_t a = 0; a < n; ++a)
      for (size_t y = 0; y < h; ++y)
        for (size_t x = 0; x < w; ++x)
          for (size_t ch = 0; ch < c; ++ch) t[((a * c + ch) * h + y) * w + x] = src(a, y, x, ch);
    return e.init_f32(label + "/nchw", onnx_dims(target, Layout::kNchw), t);
  }
  if (o.dims.size() == 4) return e.value(index, Layout::kNchw);
  NN_ASSIGN_OR_RETURN(std::string ir, e.value(index, Layout::kIr));
  const std::string r4 = e.temp(ir + "/4d");
  e.node("Reshape", {ir, e.init_i64(r4 + "/shape", to_i64(d4))}, {r4});
  return e.convert(r4, d4, Layout::kIr, Layout::kNchw);
}

Status binary(Exporter& e, const Operation& op, const char* type, bool has_fuse) {
  const Dims& out_dims = e.operand(op.outputs[0]).dims;
  const Layout layout = out_dims.size() == 4 ? Layout::kNchw : Layout::kIr;
  NN_ASSIGN_OR_RETURN(std::string a, broadcast_input(e, op.inputs[0], out_dims));
  NN_ASSIGN_OR_RETURN(std::string b, broadcast_input(e, op.inputs[1], out_dims));
  const int32_t fuse = has_fuse ? e.model().scalar_i32(op.inputs[2]) : 0;
  const std::string y = result_name(e, op.outputs[0], layout, fuse);
  e.node(type, {a, b}, {y});
  return finish(e, op.outputs[0], layout, fuse, y);
}

Status unary(Exporter& e, const Operation& op) {
  const Layout layout = e.preferred_layout(op.inputs[0]);
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], layout));
  switch (op.type) {
    case OperationType::RELU:
      return e.activation(1, x, e.define(op.outputs[0], layout));
    case OperationType::RELU1:
      return e.activation(2, x, e.define(op.outputs[0], layout));
    case OperationType::RELU6:
      return e.activation(3, x, e.define(op.outputs[0], layout));
    case OperationType::RSQRT: {
      const std::string root = e.temp(x + "/sqrt");
      e.node("Sqrt", {x}, {root});
      e.node("Reciprocal", {root}, {e.define(op.outputs[0], layout)});
      return Status::ok();
    }
    case OperationType::ELU: {
      auto& n = e.node("Elu", {x}, {e.define(op.outputs[0], layout)});
      attr_float(n, "alpha", e.model().scalar_f32(op.inputs[1]));
      return Status::ok();
    }
    default:
      break;
  }
  const char* type = nullptr;
  switch (op.type) {
    case OperationType::LOGISTIC:
      type = "Sigmoid";
      break;
    case OperationType::TANH:
      type = "Tanh";
      break;
    case OperationType::HARD_SWISH:
      type = "HardSwish";
      break;
    case OperationType::ABS:
      type = "Abs";
      break;
    case OperationType::EXP:
      type = "Exp";
      break;
    case OperationType::LOG:
      type = "Log";
      break;
    case OperationType::NEG:
      type = "Neg";
      break;
    case OperationType::SQRT:
      type = "Sqrt";
      break;
    case OperationType::SIN:
      type = "Sin";
      break;
    case OperationType::FLOOR:
      type = "Floor";
      break;
    case OperationType::NNPIPE_CEIL:
      type = "Ceil";
      break;
    case OperationType::NNPIPE_ERF:
      type = "Erf";
      break;
    default:
      return unsupported("not a unary op");
  }
  e.node(type, {x}, {e.define(op.outputs[0], layout)});
  return Status::ok();
}

// ------------------------------------------------------------------------------------------
// Reductions

// Axes of a rank-r tensor, normalized, sorted, unique.
Result<std::vector<int>> read_axes(Exporter& e, uint32_t index, size_t rank) {
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> raw, e.const_i32(index));
  std::vector<int> axes;
  for (int32_t a : raw) axes.push_back(a < 0 ? a + static_cast<int>(rank) : a);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

Status reduce(Exporter& e, const Operation& op, const char* type) {
  const Model& m = e.model();
  const Operand& in = e.operand(op.inputs[0]);
  const Operand& out = e.operand(op.outputs[0]);
  const bool keep =
      op.type == OperationType::MEAN ? m.scalar_i32(op.inputs[2]) > 0 : m.scalar_bool(op.inputs[2]);
  NN_ASSIGN_OR_RETURN(std::vector<int> axes, read_axes(e, op.inputs[1], in.dims.size()));
  const bool sum = std::string_view(type) == "ReduceSum";  // opset 13: axes as an input
  auto emit = [&](const std::string& x, const std::vector<int64_t>& onnx_axes, bool keepdims,
                  const std::string& y) {
    std::vector<std::string> ins = {x};
    if (sum) ins.push_back(e.init_i64(y + "/axes", onnx_axes));
    auto& n = e.node(type, ins, {y});
    if (!sum) attr_ints(n, "axes", onnx_axes);
    attr_int(n, "keepdims", keepdims ? 1 : 0);
  };
  if (in.dims.size() != 4) {
    NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kIr));
    emit(x, std::vector<int64_t>(axes.begin(), axes.end()), keep, e.define(op.outputs[0], Layout::kIr));
    return Status::ok();
  }
  // 4-D: reduce in NCHW keeping dims, so the result is the keep_dims tensor in NCHW.
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kNchw));
  Dims kept = in.dims;
  for (int a : axes) kept[a] = 1;
  const std::string y = keep ? e.define(op.outputs[0], Layout::kNchw) : e.temp(out.name + "/keepdims");
  if (op.type == OperationType::MEAN && axes == std::vector<int>{1, 2}) {
    e.node("GlobalAveragePool", {x}, {y});
  } else if (op.type == OperationType::REDUCE_MAX && axes == std::vector<int>{1, 2}) {
    e.node("GlobalMaxPool", {x}, {y});
  } else {
    std::vector<int64_t> onnx_axes;
    for (int a : axes) onnx_axes.push_back(nchw_axis(a));
    std::sort(onnx_axes.begin(), onnx_axes.end());
    emit(x, onnx_axes, true, y);
  }
  if (keep) return Status::ok();
  // Dropped dims: back to the IR order (a Reshape when only unit dims move), then squeeze.
  const std::string ir = e.convert(y, kept, Layout::kNchw, Layout::kIr);
  const std::string final_name = e.define(op.outputs[0], Layout::kIr);
  e.node("Reshape", {ir, e.init_i64(final_name + "/shape", to_i64(out.dims))}, {final_name});
  return Status::ok();
}

Status softmax(Exporter& e, const Operation& op, bool log) {
  const Model& m = e.model();
  const Operand& in = e.operand(op.inputs[0]);
  const float beta = m.scalar_f32(op.inputs[1]);
  int axis = op.inputs.size() >= 3 ? m.scalar_i32(op.inputs[2]) : -1;
  if (axis < 0) axis += static_cast<int>(in.dims.size());
  const Layout layout = e.preferred_layout(op.inputs[0]);
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], layout));
  if (beta != 1.f) {
    const std::string scaled = e.temp(x + "/beta");
    e.node("Mul", {x, e.scalar1_f32(beta)}, {scaled});
    x = scaled;
  }
  auto& n = e.node(log ? "LogSoftmax" : "Softmax", {x}, {e.define(op.outputs[0], layout)});
  attr_int(n, "axis", layout == Layout::kNchw ? nchw_axis(axis) : axis);
  return Status::ok();
}

// ------------------------------------------------------------------------------------------
// Resize, shape and data movement

Status resize(Exporter& e, const Operation& op, bool bilinear) {
  const Model& m = e.model();
  const size_t n = op.inputs.size();
  const bool align = n >= 6 && m.scalar_bool(op.inputs[4]);
  const bool half = n >= 6 && m.scalar_bool(op.inputs[5]);
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kNchw));
  const Operand& out = e.operand(op.outputs[0]);
  const std::string y = e.define(op.outputs[0], Layout::kNchw);
  const std::string sizes = e.init_i64(y + "/sizes", onnx_dims(out.dims, Layout::kNchw));
  auto& node = e.node("Resize", {x, "", "", sizes}, {y});
  // TFLite's rules (OPS.md) in ONNX terms. Bilinear: TFLite's half-pixel src (clamped to the
  // edge) is ONNX's half_pixel. Nearest: floor((dst + 0.5) * scale) is half_pixel's src
  // rounded with ties up; align_corners rounds half away from zero (= up, src >= 0).
  attr_string(node, "mode", bilinear ? "linear" : "nearest");
  attr_string(node, "coordinate_transformation_mode",
              align  ? "align_corners"
              : half ? "half_pixel"
                     : "asymmetric");
  if (!bilinear) attr_string(node, "nearest_mode", align || half ? "round_prefer_ceil" : "floor");
  return Status::ok();
}

Status concatenation(Exporter& e, const Operation& op) {
  const size_t count = op.inputs.size() - 1;
  const size_t rank = e.operand(op.outputs[0]).dims.size();
  int axis = e.model().scalar_i32(op.inputs[count]);
  if (axis < 0) axis += static_cast<int>(rank);
  const Layout layout = rank == 4 ? Layout::kNchw : Layout::kIr;
  std::vector<std::string> ins;
  for (size_t i = 0; i < count; ++i) {
    NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[i], layout));
    ins.push_back(x);
  }
  auto& n = e.node("Concat", ins, {e.define(op.outputs[0], layout)});
  attr_int(n, "axis", layout == Layout::kNchw ? nchw_axis(axis) : axis);
  return Status::ok();
}

// RESHAPE, SQUEEZE, EXPAND_DIMS: element order is the IR's, so the input is read in IR order.
Status reshape(Exporter& e, const Operation& op) {
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kIr));
  const std::string y = e.define(op.outputs[0], Layout::kIr);
  e.node("Reshape", {x, e.init_i64(y + "/shape", to_i64(e.operand(op.outputs[0]).dims))}, {y});
  return Status::ok();
}

Status transpose(Exporter& e, const Operation& op) {
  const size_t rank = e.operand(op.inputs[0]).dims.size();
  std::vector<int64_t> perm(rank);
  if (op.inputs.size() >= 2 && e.model().has_value(op.inputs[1])) {
    NN_ASSIGN_OR_RETURN(std::vector<int32_t> p, e.const_i32(op.inputs[1]));
    for (size_t i = 0; i < rank; ++i) perm[i] = p[i] < 0 ? p[i] + static_cast<int64_t>(rank) : p[i];
  } else {
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  }
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kIr));
  auto& n = e.node("Transpose", {x}, {e.define(op.outputs[0], Layout::kIr)});
  attr_ints(n, "perm", perm);
  return Status::ok();
}

Status fully_connected(Exporter& e, const Operation& op) {
  const Operand& in = e.operand(op.inputs[0]);
  const Operand& weights = e.operand(op.inputs[1]);
  if (!e.is_constant(op.inputs[1])) return unsupported("input 1 (weights) must be a constant to export");
  const int64_t input_size = weights.dims[1];
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kIr));
  if (in.dims.size() != 2 || in.dims[1] != weights.dims[1]) {
    const std::string flat = e.temp(x + "/2d");
    e.node("Reshape", {x, e.init_i64(flat + "/shape", {-1, input_size})}, {flat});
    x = flat;
  }
  NN_ASSIGN_OR_RETURN(std::vector<float> wv, e.const_f32(op.inputs[1]));
  const std::string w = e.weight(op.inputs[1], weights.name, {weights.dims[0], weights.dims[1]}, wv, 0);
  std::vector<std::string> ins = {x, w};
  if (e.model().has_value(op.inputs[2])) {
    if (!e.is_constant(op.inputs[2])) return unsupported("input 2 (bias) must be a constant to export");
    NN_ASSIGN_OR_RETURN(std::vector<float> bv, e.const_f32(op.inputs[2]));
    ins.push_back(e.weight(op.inputs[2], weights.name + "/bias", {static_cast<int64_t>(bv.size())}, bv, 0));
  }
  const int32_t fuse = e.model().scalar_i32(op.inputs[3]);
  const std::string y = result_name(e, op.outputs[0], Layout::kIr, fuse);
  auto& n = e.node("Gemm", ins, {y});
  attr_int(n, "transB", 1);
  return finish(e, op.outputs[0], Layout::kIr, fuse, y);
}

Status pad(Exporter& e, const Operation& op) {
  const Operand& in = e.operand(op.inputs[0]);
  const size_t rank = in.dims.size();
  std::string mode = "constant";
  if (op.type == OperationType::MIRROR_PAD) {
    const int32_t m = e.model().scalar_i32(op.inputs[2]);
    if (m != 0) return unsupported("SYMMETRIC mirror padding has no ONNX equivalent");
    mode = "reflect";
  }
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> p, e.const_i32(op.inputs[1]));
  if (p.size() != rank * 2) return unsupported("paddings must be [rank, 2]");
  const Layout layout = rank == 4 ? Layout::kNchw : Layout::kIr;
  std::vector<int64_t> pads(rank * 2);
  for (size_t k = 0; k < rank; ++k) {
    const size_t ir_axis = layout == Layout::kNchw ? std::array<size_t, 4>{0, 3, 1, 2}[k] : k;
    pads[k] = p[ir_axis * 2];
    pads[rank + k] = p[ir_axis * 2 + 1];
  }
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], layout));
  const std::string y = e.define(op.outputs[0], layout);
  std::vector<std::string> ins = {x, e.init_i64(y + "/pads", pads)};
  if (op.type == OperationType::PAD_V2) {
    // Pad's constant_value is a scalar (rank 0) of the data's type.
    const std::string v = e.init_f32(y + "/value", {}, {e.model().scalar_f32(op.inputs[2])});
    ins.push_back(v);
  }
  auto& n = e.node("Pad", ins, {y});
  attr_string(n, "mode", mode);
  return Status::ok();
}

Status depth_space(Exporter& e, const Operation& op, bool to_space) {
  if (op.inputs.size() >= 3 && e.model().has_value(op.inputs[2]) && e.model().scalar_bool(op.inputs[2]))
    return unsupported("NCHW layout flag");
  NN_ASSIGN_OR_RETURN(std::string x, e.value(op.inputs[0], Layout::kNchw));
  auto& n = e.node(to_space ? "DepthToSpace" : "SpaceToDepth", {x}, {e.define(op.outputs[0], Layout::kNchw)});
  attr_int(n, "blocksize", e.model().scalar_i32(op.inputs[1]));
  // TF's (and NNAPI's) channel order is ONNX's DCR.
  if (to_space) attr_string(n, "mode", "DCR");
  return Status::ok();
}

// DEQUANTIZE of constant FP16 weights folds into float32 initializers.
Status dequantize(Exporter& e, const Operation& op) {
  const Operand& in = e.operand(op.inputs[0]);
  if (!in.is_constant() || in.type != OperandType::TENSOR_FLOAT16 || !in.data || in.length < in.byte_size())
    return unsupported("only DEQUANTIZE of constant TENSOR_FLOAT16 weights is exported, got " +
                       std::string(in.is_constant() ? "constant " : "runtime ") +
                       std::string(operand_type_name(in.type)));
  const size_t count = num_elements(in.dims);
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, in.data + i * 2, 2);
    v[i] = half_to_float(h);
  }
  e.fold(op.outputs[0], std::move(v));
  return Status::ok();
}

}  // namespace

Status translate(Exporter& e, const Operation& op) {
  using T = OperationType;
  switch (op.type) {
    case T::CONV_2D:
      return conv(e, op, ConvKind::kConv);
    case T::DEPTHWISE_CONV_2D:
      return conv(e, op, ConvKind::kDepthwise);
    case T::GROUPED_CONV_2D:
      return conv(e, op, ConvKind::kGrouped);
    case T::TRANSPOSE_CONV_2D:
      return conv(e, op, ConvKind::kTranspose);
    case T::AVERAGE_POOL_2D:
      return pool(e, op, true);
    case T::MAX_POOL_2D:
      return pool(e, op, false);
    case T::ADD:
      return binary(e, op, "Add", true);
    case T::SUB:
      return binary(e, op, "Sub", true);
    case T::MUL:
      return binary(e, op, "Mul", true);
    case T::DIV:
      return binary(e, op, "Div", true);
    case T::MAXIMUM:
      return binary(e, op, "Max", false);
    case T::MINIMUM:
      return binary(e, op, "Min", false);
    case T::POW:
      return binary(e, op, "Pow", false);
    case T::PRELU:
      return binary(e, op, "PRelu", false);
    case T::RELU:
    case T::RELU1:
    case T::RELU6:
    case T::LOGISTIC:
    case T::TANH:
    case T::HARD_SWISH:
    case T::ABS:
    case T::EXP:
    case T::LOG:
    case T::NEG:
    case T::SQRT:
    case T::RSQRT:
    case T::SIN:
    case T::FLOOR:
    case T::NNPIPE_CEIL:
    case T::NNPIPE_ERF:
    case T::ELU:
      return unary(e, op);
    case T::MEAN:
      return reduce(e, op, "ReduceMean");
    case T::REDUCE_SUM:
      return reduce(e, op, "ReduceSum");
    case T::REDUCE_MAX:
      return reduce(e, op, "ReduceMax");
    case T::REDUCE_MIN:
      return reduce(e, op, "ReduceMin");
    case T::REDUCE_PROD:
      return reduce(e, op, "ReduceProd");
    case T::SOFTMAX:
      return softmax(e, op, false);
    case T::LOG_SOFTMAX:
      return softmax(e, op, true);
    case T::RESIZE_BILINEAR:
      return resize(e, op, true);
    case T::RESIZE_NEAREST_NEIGHBOR:
      return resize(e, op, false);
    case T::CONCATENATION:
      return concatenation(e, op);
    case T::RESHAPE:
    case T::SQUEEZE:
    case T::EXPAND_DIMS:
      return reshape(e, op);
    case T::TRANSPOSE:
      return transpose(e, op);
    case T::FULLY_CONNECTED:
      return fully_connected(e, op);
    case T::PAD:
    case T::PAD_V2:
    case T::MIRROR_PAD:
      return pad(e, op);
    case T::DEPTH_TO_SPACE:
      return depth_space(e, op, true);
    case T::SPACE_TO_DEPTH:
      return depth_space(e, op, false);
    case T::DEQUANTIZE:
      return dequantize(e, op);
    default:
      return unsupported("not supported by the ONNX exporter");
  }
}

}  // namespace nn::onnx_export
