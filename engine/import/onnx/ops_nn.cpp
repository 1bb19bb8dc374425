// Convolutions, pooling, normalization, dense layers, resize and GRU: the ops that carry
// NCHW -> NHWC and OIHW -> OHWI bridging, BatchNorm folding and activation fusion.
#include <algorithm>
#include <cmath>

#include "import/onnx/converter.h"

namespace nn::onnx_import {

namespace {

constexpr int32_t kFloat = 1;

// Conv/pool window along H and W. 1-D ops are lifted to 2-D with H = 1.
struct Window {
  int64_t k[2], s[2], d[2], pb[2], pe[2], out[2];  // [0] = H, [1] = W
};

Status window_params(Converter& c, const Shape& x, int64_t kh, int64_t kw, bool one_d, bool ceil_mode,
                     Window* w) {
  const size_t nsp = one_d ? 1 : 2;
  auto axis_attr = [&](const char* name, int64_t def, std::vector<int64_t>* out) -> Status {
    std::vector<int64_t> v = c.attr_ints(name);
    if (v.empty()) v.assign(nsp, def);
    if (v.size() != nsp)
      return c.invalid(std::string(name) + " has " + std::to_string(v.size()) + " entries");
    out->assign(2, def);
    for (size_t i = 0; i < nsp; ++i) (*out)[2 - nsp + i] = v[i];
    return Status::ok();
  };
  std::vector<int64_t> s, d;
  NN_RETURN_IF_ERROR(axis_attr("strides", 1, &s));
  NN_RETURN_IF_ERROR(axis_attr("dilations", 1, &d));
  std::vector<int64_t> pads = c.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * nsp, 0);
  if (pads.size() != 2 * nsp) return c.invalid("pads has " + std::to_string(pads.size()) + " entries");
  const std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
  const int64_t in[2] = {x[2], x[3]}, k[2] = {kh, kw};
  for (int a = 0; a < 2; ++a) {
    w->k[a] = k[a];
    w->s[a] = s[a];
    w->d[a] = d[a];
    if (s[a] < 1 || d[a] < 1 || k[a] < 1) return c.invalid("bad kernel, stride or dilation");
    // NNAPI takes these as INT32; bounding them here also keeps the arithmetic below exact.
    constexpr int64_t kMaxWindow = int64_t{1} << 24;
    if (s[a] > kMaxWindow || d[a] > kMaxWindow || k[a] > kMaxWindow || in[a] > kMaxWindow)
      return c.invalid("kernel, stride, dilation or input size over 2^24");
    const int64_t eff = (k[a] - 1) * d[a] + 1;
    int64_t b = 0, e = 0;
    if (a >= static_cast<int>(2 - nsp)) {
      b = pads[a - (2 - nsp)];
      e = pads[a - (2 - nsp) + nsp];
    }
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[a] + s[a] - 1) / s[a];
      const int64_t total = std::max<int64_t>((out - 1) * s[a] + eff - in[a], 0);
      b = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      e = total - b;
    } else if (auto_pad == "VALID") {
      b = e = 0;
    } else if (auto_pad != "NOTSET") {
      return c.unsupported("auto_pad '" + auto_pad + "'");
    }
    if (b < 0 || e < 0) return c.unsupported("negative pads");
    if (b > kMaxWindow || e > kMaxWindow) return c.invalid("pads over 2^24");
    const int64_t span = in[a] + b + e - eff;
    if (span < 0) return c.invalid("kernel larger than the padded input");
    int64_t out = (ceil_mode ? (span + s[a] - 1) / s[a] : span / s[a]) + 1;
    if (ceil_mode) {
      // The last window may hang over the end: pad the end so it fits, but never emit a
      // window that starts in the end padding.
      if ((out - 1) * s[a] >= in[a] + b) --out;
      e = std::max<int64_t>(e, (out - 1) * s[a] + eff - in[a] - b);
    }
    w->pb[a] = b;
    w->pe[a] = e;
    w->out[a] = out;
  }
  return Status::ok();
}

// Lifts [N,C,L] to [N,C,1,L] for 1-D ops.
Result<Value> lift_1d(Converter& c, Value& x) {
  return c.reshaped(x, {x.dims[0], x.dims[1], 1, x.dims[2]});
}

// If the only reader of `name` is an inference-mode BatchNormalization with constant
// parameters, absorbs it: per-channel scale and shift to fold into the producer's weights.
bool absorb_batchnorm(Converter& c, std::string* name, int64_t channels, std::vector<double>* scale,
                      std::vector<double>* shift) {
  auto idx = c.sole_consumer(*name);
  if (!idx) return false;
  const onnx::NodeProto& bn = c.node_at(*idx);
  if (bn.op_type() != "BatchNormalization" || bn.input_size() != 5 || bn.input(0) != *name) return false;
  for (int k = 1; k < bn.output_size(); ++k)
    if (!bn.output(k).empty()) return false;
  float eps = 1e-5f;
  for (const auto& a : bn.attribute()) {
    if (a.name() == "epsilon") eps = a.f();
    if (a.name() == "training_mode" && a.i() != 0) return false;
  }
  const HostTensor* p[4];
  for (int k = 0; k < 4; ++k) {
    const Value* v = c.find_value(bn.input(k + 1));
    if (!v || !v->is_const || v->host.numel() != static_cast<size_t>(channels)) return false;
    p[k] = &v->host;
  }
  scale->resize(channels);
  shift->resize(channels);
  for (int64_t m = 0; m < channels; ++m) {
    // Computed in float, as a runtime BatchNormalization would.
    float s = static_cast<float>(p[0]->v[m]) / std::sqrt(static_cast<float>(p[3]->v[m]) + eps);
    (*scale)[m] = s;
    (*shift)[m] = static_cast<float>(p[1]->v[m]) - static_cast<float>(p[2]->v[m]) * s;
  }
  c.absorb(*idx);
  *name = bn.output(0);
  return true;
}

void bind_result(Converter& c, const std::string& final_name, Value v) {
  if (final_name != c.node().output(0)) c.bind(final_name, v);
  c.set_out(0, std::move(v));
}

// Conv / ConvTranspose weights: a constant of the input's rank. A 1-D op ([N,C,W]) runs
// as a 2-D one with H = 1: the input and the weights get that axis.
Result<HostTensor> window_weights(Converter& c, Value& x, bool one_d) {
  NN_ASSIGN_OR_RETURN(const HostTensor* wt, c.const_in(1, "weights"));
  HostTensor w = *wt;
  if (w.dims.size() != x.rank()) return c.invalid("weights " + dims_str(w.dims) + " do not match input rank");
  if (one_d) {
    w.dims.insert(w.dims.begin() + 2, 1);
    NN_ASSIGN_OR_RETURN(x, lift_1d(c, x));
  }
  return w;
}

// A conv or pool made as a 2-D NHWC op writing `operand` ([N,C,H,W] `out` in ONNX order);
// a 1-D one ([N,C,W], run with H = 1) is reshaped back to rank 3.
Status bind_window_result(Converter& c, const std::string& final_name, uint32_t operand, const Shape& out,
                          bool one_d) {
  Value v = c.runtime(operand, out, kNhwc, kFloat);
  if (one_d) {
    NN_ASSIGN_OR_RETURN(v, c.reshaped(v, {out[0], out[1], out[3]}));
  }
  bind_result(c, final_name, std::move(v));
  return Status::ok();
}

Status t_conv(Converter& c) {
  Value x = c.in(0);
  const bool one_d = x.rank() == 3;
  if (x.rank() != 4 && !one_d) return c.unsupported("Conv on a rank-" + std::to_string(x.rank()) + " input");
  if (c.ir_type(x) != OperandType::TENSOR_FLOAT32) return c.unsupported("non-float Conv (use QLinearConv)");
  NN_ASSIGN_OR_RETURN(HostTensor w, window_weights(c, x, one_d));
  const int64_t M = w.dims[0], Cg = w.dims[1], kh = w.dims[2], kw = w.dims[3], C = x.dims[1];
  const int64_t group = c.attr_i("group", 1);
  if (group < 1 || Cg * group != C || M % group != 0)
    return c.invalid("weights " + dims_str(w.dims) + " with group " + std::to_string(group) + " do not fit " +
                     std::to_string(C) + " input channels");
  Window win;
  NN_RETURN_IF_ERROR(window_params(c, x.dims, kh, kw, one_d, false, &win));
  std::vector<double> bias(M, 0.0);
  if (c.has_input(2)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* b, c.const_in(2, "bias"));
    if (b->numel() != static_cast<size_t>(M)) return c.invalid("bias size differs from output channels");
    bias = b->v;
  }
  std::string name = c.node().output(0);
  std::vector<double> scale(M, 1.0), shift;
  if (absorb_batchnorm(c, &name, M, &scale, &shift))
    for (int64_t m = 0; m < M; ++m) bias[m] = static_cast<float>(bias[m]) * scale[m] + shift[m];
  const int32_t fuse = c.absorb_activation(name, &name);

  const bool depthwise = group > 1 && group == C && Cg == 1;
  OperationType type = OperationType::CONV_2D;
  HostTensor f;
  f.kind = ElemKind::kFloat;
  if (depthwise) {
    type = OperationType::DEPTHWISE_CONV_2D;
    f.dims = {1, kh, kw, M};
    f.v.resize(dims_numel(f.dims));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t h = 0; h < kh; ++h)
        for (int64_t q = 0; q < kw; ++q)
          f.v[(h * kw + q) * M + m] = static_cast<float>(w.v[(m * kh + h) * kw + q] * scale[m]);
  } else {
    if (group > 1) {
      type = OperationType::GROUPED_CONV_2D;
      if (win.d[0] != 1 || win.d[1] != 1) return c.unsupported("grouped convolution with dilation");
    }
    f.dims = {M, kh, kw, Cg};
    f.v.resize(dims_numel(f.dims));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t h = 0; h < kh; ++h)
          for (int64_t q = 0; q < kw; ++q)
            f.v[((m * kh + h) * kw + q) * Cg + ci] =
                static_cast<float>(w.v[((m * Cg + ci) * kh + h) * kw + q] * scale[m]);
  }
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, kNhwc));
  Model& md = c.model();
  std::vector<float> bias_f(bias.begin(), bias.end());
  std::vector<uint32_t> ops = {in,
                               c.constant(f, OperandType::TENSOR_FLOAT32),
                               c.const_f32({M}, bias_f),
                               md.add_scalar_i32(static_cast<int32_t>(win.pb[1])),
                               md.add_scalar_i32(static_cast<int32_t>(win.pe[1])),
                               md.add_scalar_i32(static_cast<int32_t>(win.pb[0])),
                               md.add_scalar_i32(static_cast<int32_t>(win.pe[0])),
                               md.add_scalar_i32(static_cast<int32_t>(win.s[1])),
                               md.add_scalar_i32(static_cast<int32_t>(win.s[0]))};
  if (type == OperationType::DEPTHWISE_CONV_2D) ops.push_back(md.add_scalar_i32(static_cast<int32_t>(M / C)));
  if (type == OperationType::GROUPED_CONV_2D) ops.push_back(md.add_scalar_i32(static_cast<int32_t>(group)));
  ops.push_back(md.add_scalar_i32(fuse));
  const bool dilated = win.d[0] != 1 || win.d[1] != 1;
  if (type == OperationType::GROUPED_CONV_2D || dilated) ops.push_back(md.add_scalar_bool(false));
  if (dilated) {
    ops.push_back(md.add_scalar_i32(static_cast<int32_t>(win.d[1])));
    ops.push_back(md.add_scalar_i32(static_cast<int32_t>(win.d[0])));
  }
  const Shape out = {x.dims[0], M, win.out[0], win.out[1]};
  uint32_t o = c.emit(type, ops, OperandType::TENSOR_FLOAT32, permute(out, kNhwc));
  return bind_window_result(c, name, o, out, one_d);
}

Status t_conv_transpose(Converter& c) {
  Value x = c.in(0);
  const bool one_d = x.rank() == 3;
  if (x.rank() != 4 && !one_d)
    return c.unsupported("ConvTranspose on a rank-" + std::to_string(x.rank()) + " input");
  NN_ASSIGN_OR_RETURN(HostTensor w, window_weights(c, x, one_d));
  if (c.attr_i("group", 1) != 1) return c.unsupported("grouped ConvTranspose");
  const int64_t C = w.dims[0], M = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  if (C != x.dims[1])
    return c.invalid("weights " + dims_str(w.dims) + " do not fit " + std::to_string(x.dims[1]) +
                     " channels");
  const size_t nsp = one_d ? 1 : 2;
  auto axis_attr = [&](const char* name, int64_t def) {
    std::vector<int64_t> v = c.attr_ints(name), out(2, def);
    for (size_t i = 0; i < std::min(v.size(), nsp); ++i) out[2 - nsp + i] = v[i];
    return out;
  };
  const std::vector<int64_t> s = axis_attr("strides", 1), d = axis_attr("dilations", 1),
                             opad = axis_attr("output_padding", 0);
  std::vector<int64_t> pads = c.attr_ints("pads"), out_shape = c.attr_ints("output_shape");
  const std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
  const int64_t in[2] = {x.dims[2], x.dims[3]}, k[2] = {kh, kw};
  int64_t pb[2], pe[2], out[2], keff[2];
  for (int a = 0; a < 2; ++a) {
    if (s[a] < 1 || d[a] < 1) return c.invalid("bad stride or dilation");
    keff[a] = (k[a] - 1) * d[a] + 1;
    const int64_t full = s[a] * (in[a] - 1) + keff[a] + opad[a];
    const bool spatial = a >= static_cast<int>(2 - nsp);
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t target = in[a] * s[a];
      if (!out_shape.empty()) {
        if (out_shape.size() != nsp && out_shape.size() != nsp + 2) return c.invalid("bad output_shape");
        target = spatial ? out_shape[out_shape.size() - nsp + (a - (2 - nsp))] : 1;
      }
      const int64_t total = full - target;
      // Floor division: a negative total (output larger than the conv writes) grows the end.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        pb[a] = half;
        pe[a] = total - half;
      } else {
        pb[a] = total - half;
        pe[a] = half;
      }
    } else {
      pb[a] = pe[a] = 0;
      if (!pads.empty()) {
        if (pads.size() != 2 * nsp) return c.invalid("bad pads");
        if (spatial) {
          pb[a] = pads[a - (2 - nsp)];
          pe[a] = pads[a - (2 - nsp) + nsp];
        }
      }
    }
    if (pb[a] < 0) return c.unsupported("negative begin padding");
    out[a] = full - pb[a] - pe[a];
    pe[a] -= opad[a];  // output_padding extends the end: it cancels end padding first
    if (out[a] < 1) return c.invalid("empty output");
  }
  std::vector<float> bias(M, 0.f);
  if (c.has_input(2)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* b, c.const_in(2, "bias"));
    if (b->numel() != static_cast<size_t>(M)) return c.invalid("bias size differs from output channels");
    for (int64_t m = 0; m < M; ++m) bias[m] = static_cast<float>(b->v[m]);
  }
  // Filter OHWI, dilation expanded into zero taps (exact).
  HostTensor f;
  f.dims = {M, keff[0], keff[1], C};
  f.v.assign(dims_numel(f.dims), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t ci = 0; ci < C; ++ci)
      for (int64_t h = 0; h < kh; ++h)
        for (int64_t q = 0; q < kw; ++q)
          f.v[((m * keff[0] + h * d[0]) * keff[1] + q * d[1]) * C + ci] =
              w.v[((ci * M + m) * kh + h) * kw + q];
  const bool grow = pe[0] < 0 || pe[1] < 0;  // output larger than the conv writes: pad, add bias after
  std::string name = c.node().output(0);
  const int32_t fuse = grow ? 0 : c.absorb_activation(name, &name);
  NN_ASSIGN_OR_RETURN(uint32_t xin, c.operand(x, kNhwc));
  Model& md = c.model();
  const int64_t ce[2] = {std::max<int64_t>(pe[0], 0), std::max<int64_t>(pe[1], 0)};
  const Shape conv_out = {x.dims[0], M, out[0] - (ce[0] - pe[0]), out[1] - (ce[1] - pe[1])};
  std::vector<float> zero(M, 0.f);
  uint32_t o =
      c.emit(OperationType::TRANSPOSE_CONV_2D,
             {xin, c.constant(f, OperandType::TENSOR_FLOAT32), c.const_f32({M}, grow ? zero : bias),
              md.add_scalar_i32(static_cast<int32_t>(pb[1])), md.add_scalar_i32(static_cast<int32_t>(ce[1])),
              md.add_scalar_i32(static_cast<int32_t>(pb[0])), md.add_scalar_i32(static_cast<int32_t>(ce[0])),
              md.add_scalar_i32(static_cast<int32_t>(s[1])), md.add_scalar_i32(static_cast<int32_t>(s[0])),
              md.add_scalar_i32(fuse), md.add_scalar_bool(false)},
             OperandType::TENSOR_FLOAT32, permute(conv_out, kNhwc));
  const Shape full_out = {x.dims[0], M, out[0], out[1]};
  if (grow) {
    std::vector<int32_t> p = {
        0, 0, 0, static_cast<int32_t>(ce[0] - pe[0]), 0, static_cast<int32_t>(ce[1] - pe[1]), 0, 0};
    o = c.emit(OperationType::PAD, {o, c.const_i32({4, 2}, p)}, OperandType::TENSOR_FLOAT32,
               permute(full_out, kNhwc));
    o = c.emit(OperationType::ADD, {o, c.const_f32({M}, bias), md.add_scalar_i32(0)},
               OperandType::TENSOR_FLOAT32, permute(full_out, kNhwc));
  }
  Value v = c.runtime(o, full_out, kNhwc, kFloat);
  if (one_d) {
    NN_ASSIGN_OR_RETURN(v, c.reshaped(v, {full_out[0], full_out[1], full_out[3]}));
  }
  bind_result(c, name, std::move(v));
  return Status::ok();
}

HostTensor channel_const(const std::vector<double>& v, size_t rank, bool nhwc) {
  HostTensor h;
  h.kind = ElemKind::kFloat;
  h.v = v;
  if (nhwc) {
    h.dims = {static_cast<int64_t>(v.size())};  // broadcasts over the last (C) axis of NHWC data
  } else {
    h.dims.assign(rank - 1, 1);
    h.dims[0] = static_cast<int64_t>(v.size());
  }
  return h;
}

// y = x * s + t with per-channel constants on ONNX axis 1, in the input's layout.
Status channel_affine(Converter& c, Value& x, const std::vector<double>& s, const std::vector<double>& t,
                      int32_t fuse, Value* out) {
  const Perm perm = c.layout_of(x);
  const bool nhwc = x.rank() == 4 && perm == kNhwc;
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  const Shape ir = permute(x.dims, perm);
  uint32_t sc, sh;
  if (nhwc || x.rank() == 2) {
    sc = c.constant(channel_const(s, x.rank(), true), OperandType::TENSOR_FLOAT32);
    sh = c.constant(channel_const(t, x.rank(), true), OperandType::TENSOR_FLOAT32);
  } else {
    if (!is_identity(perm)) {
      NN_ASSIGN_OR_RETURN(in, c.onnx_order(x));
    }
    sc = c.constant(channel_const(s, x.rank(), false), OperandType::TENSOR_FLOAT32);
    sh = c.constant(channel_const(t, x.rank(), false), OperandType::TENSOR_FLOAT32);
  }
  const Perm p = (nhwc || x.rank() == 2) ? perm : identity_perm(x.rank());
  const Shape dims = permute(x.dims, p);
  Model& md = c.model();
  uint32_t m = c.emit(OperationType::MUL, {in, sc, md.add_scalar_i32(0)}, OperandType::TENSOR_FLOAT32, dims);
  uint32_t a =
      c.emit(OperationType::ADD, {m, sh, md.add_scalar_i32(fuse)}, OperandType::TENSOR_FLOAT32, dims);
  (void)ir;
  *out = c.runtime(a, x.dims, p, kFloat);
  return Status::ok();
}

Status t_batchnorm(Converter& c) {
  if (c.attr_i("training_mode", 0) != 0 || c.has_output(1)) return c.unsupported("training mode");
  Value& x = c.in(0);
  if (x.rank() < 2) return c.invalid("input must have a channel axis");
  const int64_t C = x.dims[1];
  const HostTensor* p[4];
  const char* what[4] = {"scale", "B", "mean", "var"};
  for (int k = 0; k < 4; ++k) {
    NN_ASSIGN_OR_RETURN(p[k], c.const_in(k + 1, what[k]));
    if (p[k]->numel() != static_cast<size_t>(C))
      return c.invalid(std::string(what[k]) + " size differs from channels");
  }
  const float eps = c.attr_f("epsilon", 1e-5f);
  std::vector<double> s(C), t(C);
  for (int64_t m = 0; m < C; ++m) {
    float sc = static_cast<float>(p[0]->v[m]) / std::sqrt(static_cast<float>(p[3]->v[m]) + eps);
    s[m] = sc;
    t[m] = static_cast<float>(p[1]->v[m]) - static_cast<float>(p[2]->v[m]) * sc;
  }
  std::string name = c.node().output(0);
  const int32_t fuse = c.absorb_activation(name, &name);
  Value v;
  NN_RETURN_IF_ERROR(channel_affine(c, x, s, t, fuse, &v));
  bind_result(c, name, std::move(v));
  return Status::ok();
}

Status t_pool(Converter& c) {
  const bool is_max = c.node().op_type() == "MaxPool";
  if (c.has_output(1)) return c.unsupported("the Indices output");
  Value x = c.in(0);
  const bool one_d = x.rank() == 3;
  if (x.rank() != 4 && !one_d)
    return c.unsupported("pooling on a rank-" + std::to_string(x.rank()) + " input");
  std::vector<int64_t> ks = c.attr_ints("kernel_shape");
  if (ks.size() != (one_d ? 1u : 2u)) return c.invalid("kernel_shape must have one entry per spatial axis");
  if (one_d) {
    ks.insert(ks.begin(), 1);
    NN_ASSIGN_OR_RETURN(x, lift_1d(c, x));
  }
  const bool ceil_mode = c.attr_i("ceil_mode", 0) != 0;
  Window w;
  NN_RETURN_IF_ERROR(window_params(c, x.dims, ks[0], ks[1], one_d, ceil_mode, &w));
  if (w.d[0] != 1 || w.d[1] != 1) return c.unsupported("pooling with dilations");
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, kNhwc));
  Model& md = c.model();
  const bool include_pad = !is_max && c.attr_i("count_include_pad", 0) != 0;
  if (include_pad && (w.pb[0] || w.pe[0] || w.pb[1] || w.pe[1])) {
    if (ceil_mode) return c.unsupported("count_include_pad with ceil_mode");
    // Zeros that count in the divisor: pad explicitly, then pool without padding.
    const Shape padded = {x.dims[0], x.dims[1], x.dims[2] + w.pb[0] + w.pe[0], x.dims[3] + w.pb[1] + w.pe[1]};
    std::vector<int32_t> p = {0,
                              0,
                              static_cast<int32_t>(w.pb[0]),
                              static_cast<int32_t>(w.pe[0]),
                              static_cast<int32_t>(w.pb[1]),
                              static_cast<int32_t>(w.pe[1]),
                              0,
                              0};
    in = c.emit(OperationType::PAD, {in, c.const_i32({4, 2}, p)}, OperandType::TENSOR_FLOAT32,
                permute(padded, kNhwc));
    w.pb[0] = w.pe[0] = w.pb[1] = w.pe[1] = 0;
  }
  std::string name = c.node().output(0);
  const int32_t fuse = c.absorb_activation(name, &name);
  const Shape out = {x.dims[0], x.dims[1], w.out[0], w.out[1]};
  uint32_t o = c.emit(
      is_max ? OperationType::MAX_POOL_2D : OperationType::AVERAGE_POOL_2D,
      {in, md.add_scalar_i32(static_cast<int32_t>(w.pb[1])), md.add_scalar_i32(static_cast<int32_t>(w.pe[1])),
       md.add_scalar_i32(static_cast<int32_t>(w.pb[0])), md.add_scalar_i32(static_cast<int32_t>(w.pe[0])),
       md.add_scalar_i32(static_cast<int32_t>(w.s[1])), md.add_scalar_i32(static_cast<int32_t>(w.s[0])),
       md.add_scalar_i32(static_cast<int32_t>(w.k[1])), md.add_scalar_i32(static_cast<int32_t>(w.k[0])),
       md.add_scalar_i32(fuse)},
      OperandType::TENSOR_FLOAT32, permute(out, kNhwc));
  return bind_window_result(c, name, o, out, one_d);
}

Status t_global_pool(Converter& c) {
  const bool is_max = c.node().op_type() == "GlobalMaxPool";
  Value& x = c.in(0);
  if (x.rank() < 3) return c.invalid("input needs spatial axes");
  const Perm perm = x.rank() == 4 ? kNhwc : identity_perm(x.rank());
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  std::vector<int32_t> axes;
  Shape out = x.dims;
  for (size_t k = 2; k < x.rank(); ++k) out[k] = 1;
  for (size_t j = 0; j < perm.size(); ++j)
    if (perm[j] >= 2) axes.push_back(static_cast<int32_t>(j));
  Model& md = c.model();
  uint32_t ax = c.const_i32({static_cast<int64_t>(axes.size())}, axes);
  uint32_t o = is_max ? c.emit(OperationType::REDUCE_MAX, {in, ax, md.add_scalar_bool(true)},
                               OperandType::TENSOR_FLOAT32, permute(out, perm))
                      : c.emit(OperationType::MEAN, {in, ax, md.add_scalar_i32(1)},
                               OperandType::TENSOR_FLOAT32, permute(out, perm));
  c.set_out(0, c.runtime(o, out, perm, kFloat));
  return Status::ok();
}

// FULLY_CONNECTED over A [M,K] in ONNX order with host weights [N,K] and bias [N].
Status fully_connected(Converter& c, Value& a, const HostTensor& weights, const std::vector<float>& bias,
                       int32_t fuse, Value* out) {
  const int64_t N = weights.dims[0], K = weights.dims[1];
  NN_ASSIGN_OR_RETURN(uint32_t in, c.onnx_order(a));
  const int64_t rows = static_cast<int64_t>(dims_numel(a.dims)) / K;
  uint32_t o = c.emit(OperationType::FULLY_CONNECTED,
                      {in, c.constant(weights, OperandType::TENSOR_FLOAT32), c.const_f32({N}, bias),
                       c.model().add_scalar_i32(fuse)},
                      OperandType::TENSOR_FLOAT32, {rows, N});
  *out = c.runtime(o, {rows, N}, identity_perm(2), kFloat);
  return Status::ok();
}

// A const addend that is a per-output-unit bias (shape [N], [1,N], [1] ...).
bool as_bias(const HostTensor& t, int64_t n, size_t out_rank, std::vector<float>* bias) {
  if (t.dims.size() > out_rank) return false;
  for (size_t k = 0; k + 1 < t.dims.size(); ++k)
    if (t.dims[k] != 1) return false;
  if (t.numel() != static_cast<size_t>(n) && t.numel() != 1) return false;
  bias->resize(n);
  for (int64_t k = 0; k < n; ++k) (*bias)[k] = static_cast<float>(t.v[t.numel() == 1 ? 0 : k]);
  return true;
}

Status t_gemm(Converter& c) {
  const float alpha = c.attr_f("alpha", 1.f), beta = c.attr_f("beta", 1.f);
  const bool ta = c.attr_i("transA", 0) != 0, tb = c.attr_i("transB", 0) != 0;
  Value a = c.in(0);
  if (a.rank() != 2 || c.in(1).rank() != 2) return c.invalid("Gemm inputs must be 2-D");
  if (ta) a = c.transposed(a, {1, 0});
  const int64_t K = a.dims[1];
  std::string name = c.node().output(0);
  if (!c.in_const(1)) {
    Value b = c.in(1);
    NN_ASSIGN_OR_RETURN(uint32_t ia, c.onnx_order(a));
    NN_ASSIGN_OR_RETURN(uint32_t ib, c.onnx_order(b));
    const int64_t N = tb ? b.dims[0] : b.dims[1];
    uint32_t o = c.emit(OperationType::BATCH_MATMUL,
                        {ia, ib, c.model().add_scalar_bool(false), c.model().add_scalar_bool(tb)},
                        OperandType::TENSOR_FLOAT32, {a.dims[0], N});
    Value v = c.runtime(o, {a.dims[0], N}, identity_perm(2), kFloat);
    if (alpha != 1.f) {
      uint32_t s = c.const_f32({1}, {alpha});
      o = c.emit(OperationType::MUL, {o, s, c.model().add_scalar_i32(0)}, OperandType::TENSOR_FLOAT32,
                 {a.dims[0], N});
      v = c.runtime(o, {a.dims[0], N}, identity_perm(2), kFloat);
    }
    if (c.has_input(2)) {
      Value cc = c.in(2);
      Value scaled;
      if (beta != 1.f) return c.unsupported("beta != 1 with a runtime B");
      Shape d;
      Perm p;
      NN_ASSIGN_OR_RETURN(auto ops, c.broadcast({&v, &cc}, &d, &p));
      o = c.emit(OperationType::ADD, {ops[0], ops[1], c.model().add_scalar_i32(0)},
                 OperandType::TENSOR_FLOAT32, d);
      v = c.runtime(o, d, p, kFloat);
    }
    c.set_out(0, std::move(v));
    return Status::ok();
  }
  HostTensor w = c.in(1).host;
  if (!tb) w = transpose_host(w, {1, 0});
  if (w.dims[1] != K)
    return c.invalid("A " + dims_str(a.dims) + " and B " + dims_str(c.in(1).dims) + " do not multiply");
  const int64_t N = w.dims[0];
  if (alpha != 1.f)
    for (double& x : w.v) x = static_cast<float>(x * alpha);
  std::vector<float> bias(N, 0.f);
  bool bias_done = !c.has_input(2);
  if (c.has_input(2) && c.in_const(2)) {
    HostTensor cb = c.in(2).host;
    for (double& x : cb.v) x = static_cast<float>(x * beta);
    bias_done = as_bias(cb, N, 2, &bias);
  }
  const int32_t fuse = bias_done ? c.absorb_activation(name, &name) : 0;
  Value v;
  NN_RETURN_IF_ERROR(fully_connected(c, a, w, bias, fuse, &v));
  if (!bias_done) {
    Value cc = c.in(2);
    if (beta != 1.f) {
      if (!cc.is_const) return c.unsupported("beta != 1 with a runtime C");
      for (double& x : cc.host.v) x = static_cast<float>(x * beta);
      cc.operands.clear();
    }
    Shape d;
    Perm p;
    NN_ASSIGN_OR_RETURN(auto ops, c.broadcast({&v, &cc}, &d, &p));
    uint32_t o = c.emit(OperationType::ADD, {ops[0], ops[1], c.model().add_scalar_i32(0)},
                        OperandType::TENSOR_FLOAT32, d);
    v = c.runtime(o, d, p, kFloat);
  }
  bind_result(c, name, std::move(v));
  return Status::ok();
}

Status t_matmul(Converter& c) {
  Value& a = c.in(0);
  Value& b = c.in(1);
  if (a.rank() < 2 || b.rank() < 2) return c.unsupported("MatMul with a 1-D operand");
  const int64_t K = a.dims.back();
  if (b.dims[b.rank() - 2] != K)
    return c.invalid(dims_str(a.dims) + " x " + dims_str(b.dims) + " do not multiply");
  const int64_t N = b.dims.back();
  Shape out = a.dims;
  out.back() = N;
  if (b.is_const && b.rank() == 2) {
    HostTensor w = transpose_host(b.host, {1, 0});
    std::vector<float> bias(N, 0.f);
    std::string name = c.node().output(0);
    // MatMul + Add(constant bias): the bias joins the FULLY_CONNECTED.
    if (auto idx = c.sole_consumer(name)) {
      const onnx::NodeProto& add = c.node_at(*idx);
      if (add.op_type() == "Add" && add.input_size() == 2) {
        const std::string& other = add.input(0) == name ? add.input(1) : add.input(0);
        const Value* bv = c.find_value(other);
        if (bv && bv->is_const && other != name && as_bias(bv->host, N, out.size(), &bias)) {
          c.absorb(*idx);
          name = add.output(0);
        }
      }
    }
    const int32_t fuse = c.absorb_activation(name, &name);
    Value v;
    NN_RETURN_IF_ERROR(fully_connected(c, a, w, bias, fuse, &v));
    if (out.size() != 2) {
      NN_ASSIGN_OR_RETURN(v, c.reshaped(v, out));
    }
    bind_result(c, name, std::move(v));
    return Status::ok();
  }
  if (a.rank() != b.rank()) return c.unsupported("MatMul of different ranks with a runtime B");
  for (size_t k = 0; k + 2 < a.rank(); ++k)
    if (a.dims[k] != b.dims[k]) return c.unsupported("MatMul with broadcast batch dimensions");
  NN_ASSIGN_OR_RETURN(uint32_t ia, c.onnx_order(a));
  NN_ASSIGN_OR_RETURN(uint32_t ib, c.onnx_order(b));
  uint32_t o = c.emit(OperationType::BATCH_MATMUL,
                      {ia, ib, c.model().add_scalar_bool(false), c.model().add_scalar_bool(false)},
                      OperandType::TENSOR_FLOAT32, out);
  c.set_out(0, c.runtime(o, out, identity_perm(out.size()), kFloat));
  return Status::ok();
}

Status t_lrn(Converter& c) {
  Value& x = c.in(0);
  if (x.rank() != 4) return c.unsupported("LRN on a rank-" + std::to_string(x.rank()) + " input");
  const int64_t size = c.attr_i("size", 0);
  if (size < 1 || size % 2 == 0)
    return c.unsupported("LRN size " + std::to_string(size) + " (only odd sizes map to a radius)");
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, kNhwc));
  Model& md = c.model();
  uint32_t o =
      c.emit(OperationType::LOCAL_RESPONSE_NORMALIZATION,
             {in, md.add_scalar_i32(static_cast<int32_t>(size / 2)), md.add_scalar_f32(c.attr_f("bias", 1.f)),
              md.add_scalar_f32(c.attr_f("alpha", 1e-4f) / static_cast<float>(size)),
              md.add_scalar_f32(c.attr_f("beta", 0.75f)), md.add_scalar_i32(-1)},
             OperandType::TENSOR_FLOAT32, permute(x.dims, kNhwc));
  c.set_out(0, c.runtime(o, x.dims, kNhwc, kFloat));
  return Status::ok();
}

Status t_instance_norm(Converter& c) {
  Value& x = c.in(0);
  if (x.rank() != 4)
    return c.unsupported("InstanceNormalization on a rank-" + std::to_string(x.rank()) + " input");
  NN_ASSIGN_OR_RETURN(const HostTensor* scale, c.const_in(1, "scale"));
  NN_ASSIGN_OR_RETURN(const HostTensor* bias, c.const_in(2, "B"));
  const int64_t C = x.dims[1];
  if (scale->numel() != static_cast<size_t>(C) || bias->numel() != static_cast<size_t>(C))
    return c.invalid("scale/B size differs from channels");
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, kNhwc));
  Model& md = c.model();
  uint32_t o = c.emit(OperationType::INSTANCE_NORMALIZATION,
                      {in, md.add_scalar_f32(1.f), md.add_scalar_f32(0.f),
                       md.add_scalar_f32(c.attr_f("epsilon", 1e-5f)), md.add_scalar_bool(false)},
                      OperandType::TENSOR_FLOAT32, permute(x.dims, kNhwc));
  Value n = c.runtime(o, x.dims, kNhwc, kFloat), v;
  NN_RETURN_IF_ERROR(channel_affine(c, n, scale->v, bias->v, 0, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_depth_space(Converter& c) {
  const bool to_space = c.node().op_type() == "DepthToSpace";
  Value& x = c.in(0);
  if (x.rank() != 4) return c.invalid("input must be 4-D");
  const int64_t bs = c.attr_i("blocksize", 0);
  if (bs < 1) return c.invalid("bad blocksize");
  const std::string mode = c.attr_s("mode", "DCR");
  if (to_space && mode != "DCR" && mode != "CRD") return c.unsupported("DepthToSpace mode '" + mode + "'");
  Shape out = x.dims;
  if (to_space) {
    if (x.dims[1] % (bs * bs)) return c.invalid("channels not divisible by blocksize^2");
    out = {x.dims[0], x.dims[1] / (bs * bs), x.dims[2] * bs, x.dims[3] * bs};
  } else {
    if (x.dims[2] % bs || x.dims[3] % bs) return c.invalid("spatial dims not divisible by blocksize");
    out = {x.dims[0], x.dims[1] * bs * bs, x.dims[2] / bs, x.dims[3] / bs};
  }
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, kNhwc));
  if (to_space && mode == "CRD") {
    // CRD reads channel c*bs*bs + i*bs + j where DCR reads (i*bs + j)*C' + c: permute the
    // channels with a GATHER, then DEPTH_TO_SPACE (exact).
    const int64_t cout = out[1];
    std::vector<int32_t> idx(x.dims[1]);
    for (int64_t i = 0; i < bs * bs; ++i)
      for (int64_t ch = 0; ch < cout; ++ch) idx[i * cout + ch] = static_cast<int32_t>(ch * bs * bs + i);
    in = c.emit(OperationType::GATHER, {in, c.model().add_scalar_i32(3), c.const_i32({x.dims[1]}, idx)},
                c.model().operands[in].type, permute(x.dims, kNhwc));
  }
  uint32_t o =
      c.emit(to_space ? OperationType::DEPTH_TO_SPACE : OperationType::SPACE_TO_DEPTH,
             {in, c.model().add_scalar_i32(static_cast<int32_t>(bs)), c.model().add_scalar_bool(false)},
             c.model().operands[in].type, permute(out, kNhwc));
  c.set_out(0, c.runtime(o, out, kNhwc, x.onnx_type));
  return Status::ok();
}

}  // namespace

Status translate_resize(Converter& c);
Status translate_gru(Converter& c);

void register_nn_translators(std::unordered_map<std::string, Translator>& t) {
  t["Conv"] = t_conv;
  t["ConvTranspose"] = t_conv_transpose;
  t["BatchNormalization"] = t_batchnorm;
  t["MaxPool"] = t_pool;
  t["AveragePool"] = t_pool;
  t["GlobalAveragePool"] = t_global_pool;
  t["GlobalMaxPool"] = t_global_pool;
  t["Gemm"] = t_gemm;
  t["MatMul"] = t_matmul;
  t["LRN"] = t_lrn;
  t["InstanceNormalization"] = t_instance_norm;
  t["DepthToSpace"] = t_depth_space;
  t["SpaceToDepth"] = t_depth_space;
  t["Resize"] = translate_resize;
  t["Upsample"] = translate_resize;
  t["GRU"] = translate_gru;
}

}  // namespace nn::onnx_import
