#include "quantize/weight_rounding.h"

#include <algorithm>
#include <cmath>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "quantize/rewrite.h"

namespace nn::quantize {
namespace {

using T = OperationType;
// Patch rows each Gram matrix is estimated from, at most (spread evenly over positions and
// samples): the cost is rows x K^2, and a few thousand rows pin down a K <= 2048 form.
constexpr size_t kMaxRows = 8192;
constexpr size_t kMaxPatch = 2048;
constexpr int kMaxPasses = 8;

// sum x x^T and sum x over the rows seen: the quadratic form of the output error.
struct Gram {
  size_t k = 0;
  std::vector<double> h, mean;
  double rows = 0;
  explicit Gram(size_t dim) : k(dim), h(dim * dim, 0.0), mean(dim, 0.0) {}

  // Rows of a [count, k] block (row stride `stride` floats), every `step`-th one.
  void add(const float* data, size_t count, size_t stride, size_t step) {
    std::vector<float> acc(k * k, 0.f);  // float within a block (vectorises), double across
    for (size_t r = 0; r < count; r += step) {
      const float* p = data + r * stride;
      for (size_t i = 0; i < k; ++i) {
        const float a = p[i];
        mean[i] += a;
        if (a == 0.f) continue;  // ReLU outputs: many zeros
        float* row = acc.data() + i * k;
        for (size_t j = 0; j < k; ++j) row[j] += a * p[j];
      }
      rows += 1;
    }
    for (size_t i = 0; i < k * k; ++i) h[i] += acc[i];
  }

  // E[x x^T], or the covariance when centered; with `shrink` its off-diagonal scaled by
  // rows / (rows + k): few rows against k dimensions pin the form down in a few directions
  // only, and rounding fitted to them does worse on other inputs (a form that is only its
  // diagonal makes rounding to nearest the best). MobileNetV2, every op int8, 16 samples:
  // model error 0.1628 nearest, 0.1568 shrunk by k / rows, 0.1562 so.
  std::vector<double> form(bool centered, bool shrink) const {
    std::vector<double> f(k * k);
    const double n = std::max(1.0, rows);
    const double keep = shrink ? n / (n + static_cast<double>(k)) : 1.0;
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < k; ++j)
        f[i * k + j] = (h[i * k + j] / n - (centered ? (mean[i] / n) * (mean[j] / n) : 0.0)) * (i == j ? 1.0 : keep);
    return f;
  }
};

// One channel: x = w / scale (k values, `stride` apart in `q`), q its int8 values rounded
// to nearest on entry. Greedy passes: each value whose other rounding (floor <-> ceil)
// lowers e^T H e (e = q - x) takes it, the gradient H e kept up to date. Returns the error
// before and after (in steps^2) and the number of values that changed.
struct ChannelResult {
  double before = 0, after = 0;
  size_t flipped = 0;
};
double quadratic(const std::vector<double>& h, size_t k, const std::vector<double>& e) {
  double s = 0;
  for (size_t i = 0; i < k; ++i) {
    if (e[i] == 0) continue;
    double row = 0;
    for (size_t j = 0; j < k; ++j) row += h[i * k + j] * e[j];
    s += e[i] * row;
  }
  return s;
}

// `raw`: the unshrunk form, for the figures reported.
ChannelResult round_channel(const std::vector<double>& h, const std::vector<double>& raw, size_t k, const float* x,
                            int8_t* q, size_t stride) {
  std::vector<double> e(k), g(k, 0.0);
  for (size_t i = 0; i < k; ++i) e[i] = q[i * stride] - static_cast<double>(x[i]);
  for (size_t i = 0; i < k; ++i) {
    if (e[i] == 0) continue;
    for (size_t j = 0; j < k; ++j) g[j] += h[j * k + i] * e[i];
  }
  ChannelResult r;
  r.before = quadratic(raw, k, e);
  double current = 0;
  for (size_t i = 0; i < k; ++i) current += e[i] * g[i];
  std::vector<bool> changed(k, false);
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    bool any = false;
    for (size_t i = 0; i < k; ++i) {
      const double fl = std::floor(static_cast<double>(x[i])), ce = std::ceil(static_cast<double>(x[i]));
      if (fl == ce) continue;
      const double cur = q[i * stride];
      const double alt = cur == fl ? ce : fl;
      if (alt < -127 || alt > 127) continue;
      const double d = alt - cur;
      const double gain = 2 * d * g[i] + d * d * h[i * k + i];
      if (gain >= -1e-12 * std::max(1e-30, std::fabs(current))) continue;
      q[i * stride] = static_cast<int8_t>(alt);
      e[i] += d;
      for (size_t j = 0; j < k; ++j) g[j] += h[j * k + i] * d;
      current += gain;
      changed[i] = !changed[i];
      any = true;
    }
    if (!any) break;
  }
  r.after = quadratic(raw, k, e);
  r.flipped = static_cast<size_t>(std::count(changed.begin(), changed.end(), true));
  return r;
}

// Runs `m` (one op, one activation input) on each input; calls take(output, dims).
template <typename F>
Status run_each(const Model& m, const std::vector<const std::vector<float>*>& inputs, F&& take) {
  const Dims dims = m.operands[m.outputs[0]].dims;
  std::vector<float> out(num_elements(dims));
  for (const std::vector<float>* in : inputs) {
    const void* ins[] = {in->data()};
    void* outs[] = {out.data()};
    NN_RETURN_IF_ERROR(run_reference(m, ins, outs));
    take(out, dims);
  }
  return Status::ok();
}

// Op k alone with its filter replaced by `filter` (dims `filter_dims`), a zero bias of
// `out_channels` and no activation: a conv whose outputs are its input patches.
Result<Model> with_filter(const Model& model, uint32_t k, Dims filter_dims, const std::vector<float>& filter,
                          size_t out_channels) {
  Ranges none, sub_ranges;
  std::vector<uint32_t> input_operands;
  Model m = without_activation(extract_op(model, k, none, &sub_ranges, &input_operands));
  Operation& op = m.operations[0];
  op.inputs[1] = m.add_constant_f32(std::move(filter_dims), filter, "patch_filter");
  op.inputs[2] = m.add_constant_f32({static_cast<uint32_t>(out_channels)}, std::vector<float>(out_channels, 0.f),
                                    "patch_bias");
  m.operands[m.outputs[0]].dims = {};
  NN_RETURN_IF_ERROR(m.validate_and_infer_shapes());
  return m;
}

size_t row_step(size_t rows_per_sample, size_t samples) {
  return std::max<size_t>(1, rows_per_sample * samples / kMaxRows);
}

}  // namespace

Result<RoundingResult> adaptive_filter_rounding(const Model& model, uint32_t k,
                                                const std::vector<const std::vector<float>*>& inputs,
                                                bool per_channel, bool centered) {
  RoundingResult result;
  const Operation& op = model.operations[k];
  if (inputs.empty() || !has_quantizable_bias(model, k)) return result;
  const Operand& w = model.operands[op.inputs[1]];
  const int dim = filter_channel_dim(op.type, per_channel);
  Int8Filter f = int8_filter(w, dim);
  const float* wv = w.as<float>();
  std::vector<float> x(f.values.size());  // w / scale of its channel
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = wv[i] / f.scales[f.scales.size() > 1 ? (i / f.inner) % f.scales.size() : 0];
  auto scale_of = [&](size_t c) { return static_cast<double>(f.scales[f.scales.size() > 1 ? c : 0]); };

  if (op.type == T::CONV_2D || op.type == T::FULLY_CONNECTED) {
    // One form for every output channel: the patches (conv) or rows (FC) of the input.
    const size_t out_channels = w.dims[0], patch = f.values.size() / out_channels;
    if (patch > kMaxPatch) return result;
    Gram gram(patch);
    if (op.type == T::CONV_2D) {
      auto slots = conv_util::pick_conv_slots(model, op, conv_util::ConvKind::kConv);
      if (!slots.is_ok()) return result;
      if (slots->layout < op.inputs.size() && model.has_value(op.inputs[slots->layout])) {
        auto nchw = conv_util::read_bool(model, op, slots->layout, "layout");
        if (!nchw.is_ok() || *nchw) return result;
      }
      if (model.operands[op.inputs[0]].dims.back() != w.dims[3]) return result;
      // A one-hot filter per patch element: output channel p copies patch element p.
      std::vector<float> onehot(patch * patch, 0.f);
      for (size_t p = 0; p < patch; ++p) onehot[p * patch + p] = 1.f;
      NN_ASSIGN_OR_RETURN(Model m, with_filter(model, k, {static_cast<uint32_t>(patch), w.dims[1], w.dims[2], w.dims[3]},
                                               onehot, patch));
      const size_t rows = num_elements(m.operands[m.outputs[0]].dims) / patch;
      const size_t step = row_step(rows, inputs.size());
      NN_RETURN_IF_ERROR(run_each(m, inputs, [&](const std::vector<float>& out, const Dims&) {
        gram.add(out.data(), rows, patch, step);
      }));
    } else {
      for (const std::vector<float>* in : inputs) {
        const size_t rows = in->size() / patch;
        gram.add(in->data(), rows, patch, row_step(rows, inputs.size()));
      }
    }
    const std::vector<double> h = gram.form(centered, true), raw = gram.form(centered, false);
    for (size_t c = 0; c < out_channels; ++c) {
      const ChannelResult r = round_channel(h, raw, patch, x.data() + c * patch, f.values.data() + c * patch, 1);
      const double s2 = scale_of(c) * scale_of(c);
      result.nearest_error += r.before * s2;
      result.adapted_error += r.after * s2;
      result.flipped += r.flipped;
    }
  } else if (op.type == T::DEPTHWISE_CONV_2D) {
    // Per channel its own taps: one run per tap with a filter picking that tap.
    const size_t channels = w.dims[3], taps = w.dims[1] * w.dims[2];
    if (model.operands[op.inputs[0]].dims.back() != channels || w.dims[0] != 1) return result;
    std::vector<Model> pick_tap;
    for (size_t t = 0; t < taps; ++t) {
      std::vector<float> onehot(taps * channels, 0.f);
      for (size_t c = 0; c < channels; ++c) onehot[t * channels + c] = 1.f;
      NN_ASSIGN_OR_RETURN(Model m, with_filter(model, k, w.dims, onehot, channels));
      pick_tap.push_back(std::move(m));
    }
    std::vector<std::vector<float>> tap_out(taps);
    std::vector<Gram> grams(channels, Gram(taps));
    for (const std::vector<float>* in : inputs) {
      for (size_t t = 0; t < taps; ++t)
        NN_RETURN_IF_ERROR(
            run_each(pick_tap[t], {in}, [&](const std::vector<float>& out, const Dims&) { tap_out[t] = out; }));
      const size_t positions = tap_out[0].size() / channels;
      const size_t step = row_step(positions, inputs.size());
      std::vector<double> patch(taps);
      for (size_t c = 0; c < channels; ++c) {
        Gram& g = grams[c];
        for (size_t pos = 0; pos < positions; pos += step) {
          for (size_t t = 0; t < taps; ++t) patch[t] = tap_out[t][pos * channels + c];
          for (size_t i = 0; i < taps; ++i) {
            g.mean[i] += patch[i];
            for (size_t j = 0; j < taps; ++j) g.h[i * taps + j] += patch[i] * patch[j];
          }
          g.rows += 1;
        }
      }
    }
    std::vector<float> xc(taps);
    for (size_t c = 0; c < channels; ++c) {
      for (size_t t = 0; t < taps; ++t) xc[t] = x[t * channels + c];
      const ChannelResult r = round_channel(grams[c].form(centered, true), grams[c].form(centered, false), taps,
                                            xc.data(), f.values.data() + c, channels);
      const double s2 = scale_of(c) * scale_of(c);
      result.nearest_error += r.before * s2;
      result.adapted_error += r.after * s2;
      result.flipped += r.flipped;
    }
  } else {
    return result;
  }
  result.values = std::move(f.values);
  return result;
}

}  // namespace nn::quantize
