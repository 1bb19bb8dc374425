// Post-training quantization's driver: calibration, each op's error quantized alone, the
// choice of ops, the rewrite and the report (nn/quantize/quantize.h).
#include "nn/quantize/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "nn/ops/registry.h"
#include "nn/runtime/session.h"
#include "quantize/range_observer.h"
#include "quantize/rewrite.h"
#include "quantize/weight_rounding.h"

namespace nn::quantize {
namespace {

constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
// The automatic range margin's held-out chunks.
constexpr size_t kMarginChunks = 4;

// What calibration keeps: each float activation's observer, and every float activation of
// the first few samples (to measure each op's error on real inputs).
struct Calibration {
  std::vector<std::unique_ptr<RangeObserver>> observers;  // per operand of the float model
  // The same per contiguous chunk of the samples (the automatic margin): [chunk][operand].
  std::vector<std::vector<std::unique_ptr<RangeObserver>>> chunks;
  std::vector<std::vector<std::vector<float>>> kept;     // [sample][operand]
  // Adaptive rounding's samples, as kept: others than the error samples (the error its
  // rounding saves is then measured on inputs it was not fitted to). Empty: none asked, or
  // the set has no others (then it fits on the error samples).
  std::vector<std::vector<std::vector<float>>> fit;
};

bool is_float_activation(const Operand& o) {
  return o.type == kF32 && !o.is_constant() && o.lifetime != Lifetime::NO_VALUE;
}

// The float model with every float activation also a model output, so a session (any
// delegate) hands all of them back. Fusions that would hide one cannot apply to it.
std::shared_ptr<Model> observer_model(const Model& model, std::vector<uint32_t>* observed) {
  auto m = std::make_shared<Model>(model);
  observed->assign(model.outputs.begin(), model.outputs.end());
  std::vector<bool> is_output(model.operands.size(), false);
  for (uint32_t o : model.outputs) is_output[o] = true;
  for (const Operation& op : model.operations)
    for (uint32_t o : op.outputs)
      if (!is_output[o] && is_float_activation(model.operands[o])) {
        m->operands[o].lifetime = Lifetime::MODEL_OUTPUT;
        m->outputs.push_back(o);
        observed->push_back(o);
        is_output[o] = true;
      }
  return m;
}

Result<Calibration> calibrate(const Model& model, size_t samples, const InputProvider& provider,
                              const QuantizeOptions& options) {
  std::vector<uint32_t> observed;
  std::shared_ptr<Model> om = observer_model(model, &observed);
  NN_RETURN_IF_ERROR(om->validate_and_infer_shapes());
  SessionOptions so;
  so.delegates = options.delegates;
  so.threads = options.threads;
  NN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::open(om, so));

  Calibration cal;
  cal.observers.resize(model.operands.size());
  for (uint32_t i : model.inputs)
    if (is_float_activation(model.operands[i])) cal.observers[i] = std::make_unique<RangeObserver>();
  for (uint32_t o : observed) cal.observers[o] = std::make_unique<RangeObserver>();
  cal.chunks.resize(std::min(kMarginChunks, samples));
  for (auto& chunk : cal.chunks) {
    chunk.resize(model.operands.size());
    for (size_t i = 0; i < cal.observers.size(); ++i)
      if (cal.observers[i]) chunk[i] = std::make_unique<RangeObserver>();
  }

  std::vector<Tensor> inputs;
  for (uint32_t i : model.inputs) inputs.push_back(Tensor::like(model.operands[i]));
  for (size_t s = 0; s < samples; ++s) {
    NN_RETURN_IF_ERROR(provider(s, inputs).with_context("calibration sample " + std::to_string(s)));
    for (size_t i = 0; i < inputs.size(); ++i)
      NN_RETURN_IF_ERROR(session->set_input(i, inputs[i].data(), inputs[i].bytes.size()));
    NN_RETURN_IF_ERROR(session->run().with_context("calibration sample " + std::to_string(s)));
    // The error samples spread over the calibration set (a video's first frames look alike).
    const size_t stride = std::max<size_t>(1, samples / std::max<size_t>(1, options.error_samples));
    const bool keep = s % stride == 0 && cal.kept.size() < options.error_samples;
    if (keep) cal.kept.emplace_back(model.operands.size());
    // The sample after each error sample fits adaptive rounding.
    const bool fit = options.weight_rounding == WeightRounding::kAdaptive && stride > 1 && s % stride == 1 &&
                     cal.fit.size() < options.error_samples;
    if (fit) cal.fit.emplace_back(model.operands.size());
    auto take = [&](uint32_t operand, const void* data) {
      const size_t n = num_elements(model.operands[operand].dims);
      const float* f = static_cast<const float*>(data);
      cal.observers[operand]->observe(f, n);
      cal.chunks[s * cal.chunks.size() / samples][operand]->observe(f, n);
      if (keep) cal.kept.back()[operand].assign(f, f + n);
      if (fit) cal.fit.back()[operand].assign(f, f + n);
    };
    for (size_t i = 0; i < inputs.size(); ++i)
      if (cal.observers[model.inputs[i]]) take(model.inputs[i], inputs[i].data());
    for (size_t j = 0; j < observed.size(); ++j) take(observed[j], session->output_data(j));
  }
  return cal;
}

// How far one side of a held-out chunk's range (lo or hi) reaches past the same side
// calibrated without it, as a fraction of the latter: |held| / |rest| - 1, within [0, cap].
double overshoot(float held, float rest, double cap) {
  const double x = std::fabs(static_cast<double>(held)), y = std::fabs(static_cast<double>(rest));
  if (x <= y) return 0.0;
  return y > 0 ? std::min(cap, x / y - 1) : cap;
}

// Relative RMS error accumulated over samples: sqrt(sum (q - f)^2 / sum f^2), so a sample
// whose reference is near zero (a black frame) weighs in by its energy, not as a ratio.
struct ErrorSum {
  double err = 0, ref = 0;
  void add(const float* q, const std::vector<float>& f) {
    for (size_t i = 0; i < f.size(); ++i) {
      const double d = static_cast<double>(q[i]) - f[i];
      err += d * d;
      ref += static_cast<double>(f[i]) * f[i];
    }
  }
  double relative() const {
    if (ref <= 0) return err <= 0 ? 0.0 : 1.0;
    return std::sqrt(err / ref);
  }
};

// Op k quantized alone (QUANTIZE in, DEQUANTIZE out), run by the reference kernels on the
// kept samples' float inputs: its output error, or why it cannot be quantized.
// `readers_clip`: per operand, the range outside which its readers cannot tell values apart
// (a HARD_SWISH reader's -3): the reference is clamped to it before comparing.
Result<double> op_error(const Model& model, uint32_t k, const Ranges& ranges, const Ranges& readers_clip,
                        const Calibration& cal, bool per_channel, const std::vector<float>& bias_shift,
                        const std::vector<int8_t>& filter) {
  Ranges sub_ranges;
  std::vector<uint32_t> input_operands;
  Model sub = extract_op(model, k, ranges, &sub_ranges, &input_operands);
  const BiasShifts shifts = {bias_shift};
  const FilterValues filters = {filter};
  NN_ASSIGN_OR_RETURN(Model qsub, rewrite_quantized(sub, {true}, sub_ranges, per_channel, &shifts, &filters));
  const Operation& op = model.operations[k];
  ErrorSum sum;
  std::vector<std::vector<float>> outs(op.outputs.size());
  for (const auto& sample : cal.kept) {
    std::vector<const void*> in;
    for (uint32_t t : input_operands) in.push_back(sample[t].data());
    std::vector<void*> out;
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      outs[j].resize(num_elements(model.operands[op.outputs[j]].dims) + 4);
      out.push_back(outs[j].data());
    }
    NN_RETURN_IF_ERROR(run_reference(qsub, in, out));
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      const uint32_t t = op.outputs[j];
      if (!readers_clip[t]) {
        sum.add(outs[j].data(), sample[t]);
        continue;
      }
      std::vector<float> ref = sample[t];
      for (float& v : ref) v = std::clamp(v, readers_clip[t]->lo, readers_clip[t]->hi);
      sum.add(outs[j].data(), ref);
    }
  }
  return sum.relative();
}

// Bias correction (Nagel et al. 2019, "Data-Free Quantization", empirical form): the mean
// per output channel of what op k's int8 filter values (in float, activation off) add to
// its output on the kept samples' inputs. Rounding a filter is not zero-mean once the
// input's mean is not zero, and the shift passes through every later layer.
Result<std::vector<float>> bias_shift(const Model& model, uint32_t k, const Ranges& ranges, const Calibration& cal,
                                      bool per_channel, const std::vector<int8_t>& filter) {
  Ranges sub_ranges;
  std::vector<uint32_t> input_operands;
  const Model sub = extract_op(model, k, ranges, &sub_ranges, &input_operands);
  const Model exact = without_activation(sub), rounded = with_int8_filter_values(sub, per_channel, filter);
  const Dims& dims = model.operands[model.operations[k].outputs[0]].dims;
  const size_t n = num_elements(dims), channels = dims.empty() ? 1 : dims.back();
  std::vector<float> a(n), b(n);
  std::vector<double> sum(channels, 0.0);
  for (const auto& sample : cal.kept) {
    std::vector<const void*> in;
    for (uint32_t t : input_operands) in.push_back(sample[t].data());
    void* out_a[] = {a.data()};
    void* out_b[] = {b.data()};
    NN_RETURN_IF_ERROR(run_reference(exact, in, out_a));
    NN_RETURN_IF_ERROR(run_reference(rounded, in, out_b));
    for (size_t i = 0; i < n; ++i) sum[i % channels] += static_cast<double>(b[i]) - a[i];
  }
  std::vector<float> shift(channels);
  const double count = static_cast<double>(n / channels) * static_cast<double>(cal.kept.size());
  for (size_t c = 0; c < channels; ++c) shift[c] = static_cast<float>(sum[c] / count);
  return shift;
}

// The model's outputs from `q` against the float model's over the kept samples, per output.
Result<std::vector<double>> output_errors(const Model& model, const Model& q, const Calibration& cal,
                                          const QuantizeOptions& opt) {
  auto qm = std::make_shared<Model>(q);
  SessionOptions so;
  so.delegates = opt.delegates;
  so.threads = opt.threads;
  NN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::open(qm, so));
  std::vector<ErrorSum> sums(model.outputs.size());
  for (const auto& sample : cal.kept) {
    for (size_t i = 0; i < model.inputs.size(); ++i)
      NN_RETURN_IF_ERROR(session->set_input(i, sample[model.inputs[i]].data(),
                                            sample[model.inputs[i]].size() * sizeof(float)));
    NN_RETURN_IF_ERROR(session->run());
    for (size_t j = 0; j < model.outputs.size(); ++j) sums[j].add(session->output_f32(j), sample[model.outputs[j]]);
  }
  std::vector<double> errors;
  for (const ErrorSum& e : sums) errors.push_back(e.relative());
  return errors;
}

}  // namespace

std::optional<CalibrationMethod> calibration_method_from_name(std::string_view name) {
  if (name == "minmax") return CalibrationMethod::kMinMax;
  if (name == "percentile") return CalibrationMethod::kPercentile;
  if (name == "entropy") return CalibrationMethod::kEntropy;
  if (name == "mse") return CalibrationMethod::kMse;
  return std::nullopt;
}

std::optional<WeightRounding> weight_rounding_from_name(std::string_view name) {
  if (name == "nearest") return WeightRounding::kNearest;
  if (name == "adaptive") return WeightRounding::kAdaptive;
  return std::nullopt;
}

std::string_view calibration_method_name(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kMinMax: return "minmax";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kEntropy: return "entropy";
    case CalibrationMethod::kMse: return "mse";
  }
  return "?";
}

namespace {
// "  (rounding: N values flipped, filter error x0.NN)" when adaptive rounding applied.
std::string rounding_note(const OpQuantReport& op) {
  if (op.rounding_error_nearest <= 0) return "";
  char s[96];
  std::snprintf(s, sizeof s, "  (adaptive rounding: %zu values flipped, filter error x%.2f)", op.rounding_flipped,
                op.rounding_error_adapted / op.rounding_error_nearest);
  return s;
}
}  // namespace

size_t QuantizeReport::quantized_ops() const {
  size_t n = 0;
  for (const OpQuantReport& op : ops) n += op.quantized;
  return n;
}

std::string QuantizeReport::to_string() const {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line,
                "per op, only it quantized (relative RMS over the error samples): err = of its own output, "
                "out = of the model's output 0\n");
  s += line;
  for (const OpQuantReport& op : ops) {
    const std::string type(operation_type_name(op.type));
    if (op.error >= 0)
      std::snprintf(line, sizeof line, "  op %3u %-20s %-5s err %.4f  out %s  [%9.3g, %9.3g]  %s%s%s%s\n",
                    op.op_index, type.c_str(), op.quantized ? "int8" : "float", op.error,
                    op.output_error >= 0 ? (std::to_string(op.output_error).substr(0, 6)).c_str() : "  -   ",
                    op.range_lo, op.range_hi, op.output_name.c_str(), rounding_note(op).c_str(),
                    op.reason.empty() ? "" : "  -- ", op.reason.c_str());
    else
      std::snprintf(line, sizeof line, "  op %3u %-20s %-5s err   -     out   -     [%9.3g, %9.3g]  %s  -- %s\n", op.op_index,
                    type.c_str(), op.quantized ? "int8" : "float", op.range_lo, op.range_hi, op.output_name.c_str(),
                    op.reason.c_str());
    s += line;
  }
  std::snprintf(line, sizeof line, "%zu of %zu ops int8 (calibration: %s, %zu samples)\n", quantized_ops(),
                ops.size(), std::string(calibration_method_name(method)).c_str(), samples);
  s += line;
  if (!budget_steps.empty()) {
    std::snprintf(line, sizeof line, "output budget %.4g: %zu int8 ops at output error %.4f", output_budget,
                  budget_steps.front().quantized_ops, budget_steps.front().output_error);
    s += line;
    for (size_t i = 1; i < budget_steps.size(); ++i) {
      std::snprintf(line, sizeof line, "; op %u float -> %zu at %.4f", *budget_steps[i].op_index,
                    budget_steps[i].quantized_ops, budget_steps[i].output_error);
      s += line;
    }
    s += "\n";
  }
  for (size_t i = 0; i < output_errors.size(); ++i) {
    std::snprintf(line, sizeof line, "output %zu: relative RMS error of the int8 model vs float %.4f\n", i,
                  output_errors[i]);
    s += line;
  }
  return s;
}

std::string LatencyComparison::to_string() const {
  char line[320];
  std::snprintf(
      line, sizeof line,
      "latency here (cpu delegate, median of %zu alternating runs each): float %.3f ms, int8 %.3f ms: "
      "int8 %.2fx float\n",
      runs, float_ms, int8_ms, ratio());
  std::string s = line;
  if (ratio() >= 1.0) {
    std::snprintf(
        line, sizeof line,
        "int8 is not faster here: %zu of %zu ops stay float (the error limits above keep them) and %zu "
        "QUANTIZE / DEQUANTIZE ops convert at their borders\n",
        float_ops, float_ops + int8_ops, converts);
    s += line;
  }
  return s;
}

Result<LatencyComparison> compare_latency(std::shared_ptr<const Model> float_model,
                                          std::shared_ptr<const Model> int8_model,
                                          const InputProvider& inputs, size_t runs, int threads,
                                          const CpuOptions& cpu) {
  NN_CHECK_OR_RETURN(runs > 0, StatusCode::kInvalidArgument, "latency comparison: runs must be positive");
  LatencyComparison c;
  c.runs = runs;
  for (const Operation& op : int8_model->operations) {
    if (op.type == OperationType::QUANTIZE || op.type == OperationType::DEQUANTIZE) {
      ++c.converts;
      continue;
    }
    bool int8 = false;
    for (uint32_t o : op.outputs) int8 |= int8_model->operands[o].type != kF32;
    ++(int8 ? c.int8_ops : c.float_ops);
  }
  SessionOptions so;
  so.delegates = {"cpu"};
  so.threads = threads;
  so.cpu = cpu;
  std::unique_ptr<Session> sessions[2];
  const std::shared_ptr<const Model> models[2] = {float_model, int8_model};
  for (int m = 0; m < 2; ++m) {
    NN_ASSIGN_OR_RETURN(sessions[m], Session::open(models[m], so));
    std::vector<Tensor> in;
    for (uint32_t i : models[m]->inputs) in.push_back(Tensor::like(models[m]->operands[i]));
    NN_RETURN_IF_ERROR(inputs(0, in));
    for (size_t i = 0; i < in.size(); ++i)
      std::memcpy(sessions[m]->input_data(i), in[i].data(), in[i].bytes.size());
  }
  std::vector<double> times[2];
  for (size_t r = 0; r < runs + 3; ++r)  // three warm-up rounds first
    for (int m = 0; m < 2; ++m) {
      NN_RETURN_IF_ERROR(sessions[m]->run());
      if (r >= 3) times[m].push_back(sessions[m]->last_run_ms());
    }
  for (int m = 0; m < 2; ++m) {
    std::nth_element(times[m].begin(), times[m].begin() + times[m].size() / 2, times[m].end());
    (m ? c.int8_ms : c.float_ms) = times[m][times[m].size() / 2];
  }
  return c;
}

Result<Model> quantize_model(const Model& source, size_t num_samples, const InputProvider& provider,
                             const QuantizeOptions& options, QuantizeReport* report) {
  NN_CHECK_OR_RETURN(num_samples > 0, StatusCode::kInvalidArgument, "quantization needs calibration samples");
  for (const Operand& o : source.operands)
    NN_CHECK_OR_RETURN(o.type != OperandType::TENSOR_QUANT8_ASYMM && o.type != OperandType::TENSOR_QUANT8_ASYMM_SIGNED &&
                           o.type != OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL,
                       StatusCode::kInvalidArgument,
                       "operand '" + o.name + "' is " + std::string(operand_type_name(o.type)) +
                           ": the model is quantized already");
  NN_ASSIGN_OR_RETURN(const Model model, fold_activations(source));
  QuantizeOptions opt = options;
  opt.error_samples = std::max<size_t>(1, std::min(opt.error_samples, num_samples));
  NN_ASSIGN_OR_RETURN(Calibration cal, calibrate(model, num_samples, provider, opt));

  Ranges ranges(model.operands.size());
  for (size_t i = 0; i < model.operands.size(); ++i)
    if (cal.observers[i] && !cal.observers[i]->empty()) {
      FloatRange r = cal.observers[i]->range(opt.method, opt.percentile);
      double lo_margin = opt.range_margin.value_or(0), hi_margin = lo_margin;
      if (!opt.range_margin && cal.chunks.size() > 1) {
        // Each chunk held out: how far its range reaches past the other chunks' (the
        // calibrated range's miss on data it did not see); the largest miss is the margin.
        std::vector<FloatRange> per_chunk;
        for (const auto& chunk : cal.chunks)
          if (!chunk[i]->empty()) per_chunk.push_back(chunk[i]->range(opt.method, opt.percentile));
        for (size_t c = 0; c < per_chunk.size() && per_chunk.size() > 1; ++c) {
          FloatRange rest{0.f, 0.f};
          for (size_t d = 0; d < per_chunk.size(); ++d)
            if (d != c) rest = {std::min(rest.lo, per_chunk[d].lo), std::max(rest.hi, per_chunk[d].hi)};
          lo_margin = std::max(lo_margin, overshoot(per_chunk[c].lo, rest.lo, opt.max_auto_margin));
          hi_margin = std::max(hi_margin, overshoot(per_chunk[c].hi, rest.hi, opt.max_auto_margin));
        }
      }
      r.lo *= static_cast<float>(1 + lo_margin);
      r.hi *= static_cast<float>(1 + hi_margin);
      ranges[i] = r;
    }

  // A tensor only HARD_SWISH reads needs no int8 values below -3 (all give 0), one only
  // LOGISTIC reads none outside [-8, 8] (within 1/256 of 0 and 1, the int8 output's step).
  Ranges readers_clip(model.operands.size());
  {
    std::vector<int> readers(model.operands.size(), 0), swish(model.operands.size(), 0),
        logistic(model.operands.size(), 0);
    for (const Operation& op : model.operations)
      for (uint32_t i : op.inputs) {
        readers[i]++;
        swish[i] += op.type == OperationType::HARD_SWISH;
        logistic[i] += op.type == OperationType::LOGISTIC;
      }
    for (uint32_t o : model.outputs) readers[o]++;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (!ranges[i] || readers[i] == 0) continue;
      const float inf = std::numeric_limits<float>::infinity();
      if (swish[i] == readers[i]) readers_clip[i] = FloatRange{-3.f, inf};
      if (logistic[i] == readers[i]) readers_clip[i] = FloatRange{-8.f, 8.f};
      if (readers_clip[i]) {
        ranges[i]->lo = std::max(ranges[i]->lo, readers_clip[i]->lo);
        ranges[i]->hi = std::min(ranges[i]->hi, readers_clip[i]->hi);
      }
    }
  }

  // CONCATENATION's inputs and output share one range (the reference op takes no
  // requantization between them).
  for (const Operation& op : model.operations) {
    if (op.type != OperationType::CONCATENATION) continue;
    FloatRange u{0.f, 0.f};
    bool all = true;
    for (size_t s = 0; s + 1 < op.inputs.size(); ++s) {
      const auto& r = ranges[op.inputs[s]];
      if (!r) { all = false; break; }
      u.lo = std::min(u.lo, r->lo);
      u.hi = std::max(u.hi, r->hi);
    }
    if (!all) continue;
    for (size_t s = 0; s + 1 < op.inputs.size(); ++s) ranges[op.inputs[s]] = u;
    ranges[op.outputs[0]] = u;
  }

  QuantizeReport rep;
  rep.method = opt.method;
  rep.samples = num_samples;
  rep.output_budget = opt.max_output_error;
  BiasShifts shifts(model.operations.size());
  FilterValues filters(model.operations.size());
  std::vector<bool> quantize_op(model.operations.size(), false);
  for (uint32_t k = 0; k < model.operations.size(); ++k) {
    const Operation& op = model.operations[k];
    OpQuantReport r;
    r.op_index = k;
    r.type = op.type;
    r.output_name = op.outputs.empty() ? "" : model.operands[op.outputs[0]].name;
    if (!op.outputs.empty() && ranges[op.outputs[0]]) {
      r.range_lo = ranges[op.outputs[0]]->lo;
      r.range_hi = ranges[op.outputs[0]]->hi;
    }
    if (std::find(opt.keep_float.begin(), opt.keep_float.end(), k) != opt.keep_float.end()) {
      r.reason = "kept float (asked)";
    } else if (is_candidate(model, k, &r.reason)) {
      if (opt.weight_rounding == WeightRounding::kAdaptive && has_quantizable_bias(model, k)) {
        std::vector<const std::vector<float>*> inputs;
        for (const auto& sample : cal.fit.empty() ? cal.kept : cal.fit) inputs.push_back(&sample[op.inputs[0]]);
        auto adapted = adaptive_filter_rounding(model, k, inputs, opt.per_channel, opt.bias_correction);
        if (!adapted.is_ok()) return adapted.status().with_context("adaptive rounding of op " + std::to_string(k));
        RoundingResult& rounding = *adapted;
        if (!rounding.values.empty()) {
          filters[k] = std::move(rounding.values);
          r.rounding_error_nearest = rounding.nearest_error;
          r.rounding_error_adapted = rounding.adapted_error;
          r.rounding_flipped = rounding.flipped;
        }
      }
      if (opt.bias_correction && has_quantizable_bias(model, k)) {
        auto shift = bias_shift(model, k, ranges, cal, opt.per_channel, filters[k]);
        if (shift.is_ok()) shifts[k] = std::move(*shift);
      }
      auto err = op_error(model, k, ranges, readers_clip, cal, opt.per_channel, shifts[k], filters[k]);
      if (!err.is_ok()) {
        r.reason = "no valid int8 form: " + err.status().message();
      } else {
        r.error = *err;
        if (r.error > opt.max_op_error) {
          char why[96];
          std::snprintf(why, sizeof why, "error over the limit %.3g", opt.max_op_error);
          r.reason = why;
        } else {
          r.quantized = true;
        }
      }
    }
    quantize_op[k] = r.quantized;
    rep.ops.push_back(std::move(r));
  }
  // Each op that passed: the error it alone brings to the model's output.
  for (OpQuantReport& r : rep.ops) {
    if (!r.quantized || model.outputs.empty()) continue;
    std::vector<bool> only(model.operations.size(), false);
    only[r.op_index] = true;
    NN_ASSIGN_OR_RETURN(Model single, rewrite_quantized(model, only, ranges, opt.per_channel, &shifts, &filters));
    NN_ASSIGN_OR_RETURN(std::vector<double> e, output_errors(model, single, cal, opt));
    r.output_error = e[0];
    if (r.output_error > opt.max_op_output_error) {
      char why[96];
      std::snprintf(why, sizeof why, "output error over the limit %.3g", opt.max_op_output_error);
      r.reason = why;
      r.quantized = false;
      quantize_op[r.op_index] = false;
    }
  }
  NN_ASSIGN_OR_RETURN(Model q, rewrite_quantized(model, quantize_op, ranges, opt.per_channel, &shifts, &filters));
  // The whole int8 model against the float one on the kept samples.
  NN_ASSIGN_OR_RETURN(rep.output_errors, output_errors(model, q, cal, opt));

  // The whole-model budget: until the model's output 0 is within it (or nothing is int8),
  // one int8 op returns to float - of the budget_lookahead ops whose own output error is
  // largest, the one whose return leaves the model's error lowest (own errors are close
  // to each other in a deep model, and do not add up: the model's error says which helps).
  if (opt.max_output_error > 0 && !rep.output_errors.empty()) {
    std::vector<uint32_t> order;
    for (const OpQuantReport& r : rep.ops)
      if (r.quantized) order.push_back(r.op_index);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return rep.ops[a].output_error > rep.ops[b].output_error; });
    rep.budget_steps.push_back({std::nullopt, order.size(), rep.output_errors[0]});
    while (!order.empty() && rep.output_errors[0] > opt.max_output_error) {
      const size_t tries = std::min(order.size(), std::max<size_t>(1, opt.budget_lookahead));
      size_t best = 0;
      std::vector<double> best_errors;
      Model best_model;
      for (size_t t = 0; t < tries; ++t) {
        quantize_op[order[t]] = false;
        NN_ASSIGN_OR_RETURN(Model trial, rewrite_quantized(model, quantize_op, ranges, opt.per_channel, &shifts, &filters));
        quantize_op[order[t]] = true;
        NN_ASSIGN_OR_RETURN(std::vector<double> e, output_errors(model, trial, cal, opt));
        if (best_errors.empty() || e[0] < best_errors[0]) {
          best = t;
          best_errors = std::move(e);
          best_model = std::move(trial);
        }
      }
      const uint32_t k = order[best];
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(best));
      OpQuantReport& r = rep.ops[k];
      r.quantized = false;
      r.returned_by_budget = true;
      char why[128];
      std::snprintf(why, sizeof why, "returned to float: the model's output error %.4f was over the budget %.3g",
                    rep.output_errors[0], opt.max_output_error);
      r.reason = why;
      quantize_op[k] = false;
      q = std::move(best_model);
      rep.output_errors = std::move(best_errors);
      rep.budget_steps.push_back({k, order.size(), rep.output_errors[0]});
    }
  }
  q.metadata.extra["quantization"] = "int8 post-training, calibration " +
                                     std::string(calibration_method_name(opt.method)) + " on " +
                                     std::to_string(num_samples) + " samples" +
                                     (opt.per_channel ? ", per-channel filters" : ", per-tensor filters") +
                                     (opt.bias_correction ? ", bias correction" : "") +
                                     (opt.weight_rounding == WeightRounding::kAdaptive ? ", adaptive rounding" : "");
  if (report) *report = std::move(rep);
  return q;
}

}  // namespace nn::quantize
