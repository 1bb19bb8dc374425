#include "import/onnx/ops_shape_util.h"

#include <algorithm>
#include <numeric>

namespace nn::onnx_import {

Status normalize_axis(Converter& c, int64_t axis, size_t rank, int64_t* out) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return c.invalid("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  *out = axis < 0 ? axis + r : axis;
  return Status::ok();
}

int ir_axis(const Perm& perm, int64_t axis) {
  for (size_t j = 0; j < perm.size(); ++j)
    if (perm[j] == axis) return static_cast<int>(j);
  return -1;
}

std::vector<int64_t> ints_of(const HostTensor& h) {
  std::vector<int64_t> out(h.numel());
  for (size_t k = 0; k < out.size(); ++k) out[k] = h.i(k);
  return out;
}

Result<std::vector<int64_t>> axes_param(Converter& c, size_t input_index, bool* present) {
  *present = false;
  if (c.has_input(input_index)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* t, c.const_in(input_index, "axes"));
    *present = true;
    return ints_of(*t);
  }
  if (c.has_attr("axes")) {
    *present = true;
    return c.attr_ints("axes");
  }
  return std::vector<int64_t>{};
}

namespace {

Result<std::vector<AxisSlice>> slice_params(Converter& c, const Shape& dims,
                                            const std::vector<int64_t>& starts,
                                            const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                            std::vector<int64_t> steps) {
  const size_t r = dims.size();
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return c.invalid("starts, ends, axes and steps differ in length");
  std::vector<AxisSlice> s(r);
  for (size_t i = 0; i < r; ++i) s[i] = {0, dims[i], 1, dims[i]};
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t ax;
    NN_RETURN_IF_ERROR(normalize_axis(c, axes[k], r, &ax));
    const int64_t d = dims[ax], step = steps[k];
    if (step == 0) return c.invalid("slice step 0");
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    int64_t len = step > 0 ? (e - b + step - 1) / step : (b - e + (-step) - 1) / (-step);
    s[ax] = {b, e, step, std::max<int64_t>(len, 0)};
  }
  return s;
}

}  // namespace

Result<std::vector<AxisSlice>> read_slice(Converter& c, const Shape& dims) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  } else {
    NN_ASSIGN_OR_RETURN(const HostTensor* s, c.const_in(1, "starts"));
    NN_ASSIGN_OR_RETURN(const HostTensor* e, c.const_in(2, "ends"));
    starts = ints_of(*s);
    ends = ints_of(*e);
    if (c.has_input(3)) {
      NN_ASSIGN_OR_RETURN(const HostTensor* a, c.const_in(3, "axes"));
      axes = ints_of(*a);
    }
    if (c.has_input(4)) {
      NN_ASSIGN_OR_RETURN(const HostTensor* st, c.const_in(4, "steps"));
      steps = ints_of(*st);
    }
  }
  return slice_params(c, dims, starts, ends, axes, steps);
}

}  // namespace nn::onnx_import
