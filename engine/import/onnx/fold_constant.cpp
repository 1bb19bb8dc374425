// Host evaluation of ONNX nodes whose inputs are all constants: the Shape/Gather/Concat/...
// chains torch exports for Flatten/Reshape/Resize are folded so only tensor work reaches the IR.
#include <algorithm>
#include <cmath>
#include <functional>

#include "import/onnx/converter.h"
#include "import/onnx/ops_shape_util.h"

namespace nn::onnx_import {

namespace {

// Row-major strides.
std::vector<size_t> strides_of(const Shape& d) {
  std::vector<size_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * static_cast<size_t>(d[i]);
  return s;
}

// Numpy broadcasting of two host tensors.
Result<HostTensor> host_binary(Converter& c, const HostTensor& a, const HostTensor& b,
                               const std::function<double(double, double)>& f) {
  const size_t r = std::max(a.dims.size(), b.dims.size());
  Shape da(r, 1), db(r, 1), out(r, 1);
  std::copy(a.dims.begin(), a.dims.end(), da.begin() + (r - a.dims.size()));
  std::copy(b.dims.begin(), b.dims.end(), db.begin() + (r - b.dims.size()));
  for (size_t i = 0; i < r; ++i) {
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1)
      return c.invalid("constant inputs " + dims_str(a.dims) + " and " + dims_str(b.dims) +
                       " do not broadcast");
    out[i] = std::max(da[i], db[i]);
  }
  HostTensor h = a;
  h.dims = out;
  h.v.assign(dims_numel(out), 0);
  auto sa = strides_of(da), sb = strides_of(db);
  std::vector<int64_t> idx(r, 0);
  for (size_t k = 0; k < h.v.size(); ++k) {
    size_t ia = 0, ib = 0;
    for (size_t i = 0; i < r; ++i) {
      if (da[i] != 1) ia += idx[i] * sa[i];
      if (db[i] != 1) ib += idx[i] * sb[i];
    }
    h.v[k] = f(a.v[ia], b.v[ib]);
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return h;
}

HostTensor host_slice(const HostTensor& t, const std::vector<AxisSlice>& s) {
  HostTensor out = t;
  const size_t r = t.dims.size();
  for (size_t i = 0; i < r; ++i) out.dims[i] = s[i].len;
  out.v.assign(dims_numel(out.dims), 0);
  auto st = strides_of(t.dims);
  std::vector<int64_t> idx(r, 0);
  for (size_t k = 0; k < out.v.size(); ++k) {
    size_t src = 0;
    for (size_t i = 0; i < r; ++i) src += static_cast<size_t>(s[i].begin + idx[i] * s[i].step) * st[i];
    out.v[k] = t.v[src];
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < out.dims[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

}  // namespace

bool fold_constant_node(Converter& c, Status* status) {
  const std::string& op = c.node().op_type();
  auto in = [&](size_t i) -> const HostTensor& { return c.in(i).host; };
  auto done = [&](Result<HostTensor> r) {
    if (!r) {
      *status = r.status();
    } else {
      c.set_out_const(0, std::move(r.value()));
      *status = Status::ok();
    }
    return true;
  };
  // Ops whose translator already yields constants (or only reads dims).
  static const std::unordered_set<std::string> passthrough = {
      "Constant", "ConstantOfShape", "Shape",   "Size",      "Identity",
      "Reshape",  "Flatten",         "Squeeze", "Unsqueeze", "Transpose"};
  if (passthrough.count(op)) return false;
  static const std::unordered_map<std::string, std::function<double(double, double)>> binary = {
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
      {"Max", [](double a, double b) { return std::max(a, b); }},
      {"Min", [](double a, double b) { return std::min(a, b); }},
      {"Equal", [](double a, double b) { return double(a == b); }},
      {"Less", [](double a, double b) { return double(a < b); }},
      {"Greater", [](double a, double b) { return double(a > b); }},
      {"LessOrEqual", [](double a, double b) { return double(a <= b); }},
      {"GreaterOrEqual", [](double a, double b) { return double(a >= b); }},
      {"And", [](double a, double b) { return double(a != 0 && b != 0); }},
      {"Or", [](double a, double b) { return double(a != 0 || b != 0); }},
      {"Pow", [](double a, double b) { return std::pow(a, b); }},
  };
  if (op == "Div") {
    if (c.num_inputs() != 2) return false;
    const bool integer = in(0).kind == ElemKind::kInt;
    return done(host_binary(c, in(0), in(1), [integer](double a, double b) {
      if (!integer) return a / b;
      return b == 0 ? 0.0 : std::trunc(a / b);
    }));
  }
  auto it = binary.find(op);
  if (it != binary.end() && c.num_inputs() == 2) {
    auto r = host_binary(c, in(0), in(1), it->second);
    if (r && (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
              op == "GreaterOrEqual" || op == "And" || op == "Or")) {
      r->kind = ElemKind::kBool;
      r->onnx_type = kBool;
    }
    if (r && in(0).kind == ElemKind::kFloat && it->first != "Equal") {
      for (double& v : r->v) v = static_cast<float>(v);
    }
    return done(std::move(r));
  }
  if (op == "Neg" || op == "Abs" || op == "Floor" || op == "Ceil" || op == "Sqrt" || op == "Not" ||
      op == "Reciprocal" || op == "Relu") {
    HostTensor h = in(0);
    for (double& v : h.v) {
      if (op == "Neg")
        v = -v;
      else if (op == "Abs")
        v = std::fabs(v);
      else if (op == "Floor")
        v = std::floor(v);
      else if (op == "Ceil")
        v = std::ceil(v);
      else if (op == "Sqrt")
        v = static_cast<float>(std::sqrt(v));
      else if (op == "Reciprocal")
        v = static_cast<float>(1.0 / v);
      else if (op == "Relu")
        v = std::max(v, 0.0);
      else
        v = v == 0;
    }
    return done(h);
  }
  if (op == "Cast") {
    HostTensor h = in(0);
    const int32_t to = static_cast<int32_t>(c.attr_i("to", kFloat));
    if (!elem_kind_of(to, &h.kind)) return false;
    h.onnx_type = to;
    for (double& v : h.v) {
      if (h.kind == ElemKind::kFloat)
        v = static_cast<float>(v);
      else if (h.kind == ElemKind::kBool)
        v = v != 0;
      else
        v = std::trunc(v);
    }
    return done(h);
  }
  if (op == "Gather") {
    const HostTensor& x = in(0);
    const HostTensor& idx = in(1);
    int64_t axis;
    Status s = normalize_axis(c, c.attr_i("axis", 0), x.dims.size(), &axis);
    if (!s.is_ok()) return *status = s, true;
    HostTensor out = x;
    out.dims.clear();
    for (int64_t k = 0; k < axis; ++k) out.dims.push_back(x.dims[k]);
    out.dims.insert(out.dims.end(), idx.dims.begin(), idx.dims.end());
    for (size_t k = axis + 1; k < x.dims.size(); ++k) out.dims.push_back(x.dims[k]);
    size_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dims[k];
    for (size_t k = axis + 1; k < x.dims.size(); ++k) inner *= x.dims[k];
    const int64_t n = x.dims[axis];
    out.v.clear();
    for (size_t o = 0; o < outer; ++o)
      for (size_t j = 0; j < idx.numel(); ++j) {
        int64_t i = idx.i(j);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return *status = c.invalid("gather index out of range"), true;
        for (size_t q = 0; q < inner; ++q) out.v.push_back(x.v[(o * n + i) * inner + q]);
      }
    return done(out);
  }
  if (op == "Concat") {
    int64_t axis;
    Status s = normalize_axis(c, c.attr_i("axis", 0), in(0).dims.size(), &axis);
    if (!s.is_ok()) return *status = s, true;
    HostTensor out = in(0);
    size_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= out.dims[k];
    out.dims[axis] = 0;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      if (in(i).dims.size() != out.dims.size()) return *status = c.invalid("inputs differ in rank"), true;
      out.dims[axis] += in(i).dims[axis];
    }
    out.v.clear();
    for (size_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < c.num_inputs(); ++i) {
        const HostTensor& t = in(i);
        size_t chunk = outer ? t.numel() / outer : 0;
        out.v.insert(out.v.end(), t.v.begin() + o * chunk, t.v.begin() + (o + 1) * chunk);
      }
    if (out.v.size() != dims_numel(out.dims)) return *status = c.invalid("inputs differ off the axis"), true;
    return done(out);
  }
  if (op == "Slice") {
    auto s = read_slice(c, in(0).dims);
    if (!s) return *status = s.status(), true;
    return done(host_slice(in(0), *s));
  }
  if (op == "Where") {
    auto ab = host_binary(c, in(1), in(2), [](double a, double) { return a; });
    auto ba = host_binary(c, in(2), in(1), [](double b, double) { return b; });
    if (!ab || !ba) return done(ab);
    auto cond = host_binary(c, in(0), *ab, [](double x, double) { return x; });
    if (!cond) return done(cond);
    HostTensor out = *ab;
    for (size_t k = 0; k < out.v.size(); ++k) out.v[k] = cond->v[k] != 0 ? ab->v[k] : ba->v[k];
    return done(out);
  }
  if (op == "Range") {
    const double start = in(0).v.at(0), limit = in(1).v.at(0), delta = in(2).v.at(0);
    if (delta == 0) return *status = c.invalid("Range delta 0"), true;
    const double n = std::max(std::ceil((limit - start) / delta), 0.0);
    if (n > (1 << 24)) return *status = c.unsupported("Range too long"), true;
    HostTensor out = in(0);
    out.dims = {static_cast<int64_t>(n)};
    out.v.resize(static_cast<size_t>(n));
    for (size_t k = 0; k < out.v.size(); ++k) out.v[k] = start + static_cast<double>(k) * delta;
    return done(out);
  }
  if (op == "Expand") {
    const HostTensor& shape = in(1);
    HostTensor ones;
    ones.kind = in(0).kind;
    ones.onnx_type = in(0).onnx_type;
    for (size_t k = 0; k < shape.numel(); ++k) ones.dims.push_back(shape.i(k));
    ones.v.assign(dims_numel(ones.dims), 0);
    return done(host_binary(c, in(0), ones, [](double a, double) { return a; }));
  }
  return false;
}

}  // namespace nn::onnx_import
