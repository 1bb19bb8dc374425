// The CPU delegate's compile-time passes over a partition's FusedOp records, in the
// order CpuPartition::build runs them: constant folding, labelling (XNNPACK | native |
// reference), the fusions, and the native kernels the heads get.
#include <algorithm>
#include <limits>
#include <string>

#include "delegates/cpu/cpu_partition.h"
#include "delegates/cpu/native_int8.h"
#include "delegates/cpu/xnn_int8.h"

namespace nn::cpu {

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
    OpContext ctx{model_, op, in, out, options_.requantization};
    if (!def->reference(ctx).is_ok()) continue;  // left to run time, which reports it
    for (size_t j = 0; j < op.outputs.size(); ++j) folded_[op.outputs[j]] = std::move(made[j]);
    folded_ops_.insert(k);
  }
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
    std::string why_not_int8;  // int8 ops XNNPACK runs slowly or not at all (native_int8.h)
    if (allowed && options_.cpu.native_int8 && options_.requantization == Requantization::kNnapi) r.data = make_native_int8_op(model_, k, statics_, isa_, options_.cpu, &why_not_int8);
    r.lowers = !r.data && allowed && xnn_can_lower(model_, k, statics_).supported;
    if (r.data) {
      r.step = kNativeStep;
    } else if (r.lowers) {
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
      native = make_native_op(model_, k, r.native, statics_, r.epilogue, isa_, options_.cpu.drop_dead_taps, nullptr,
                              options_.cpu.winograd ? std::max(1, options_.threads) : 0);
    }
    NN_CHECK_OR_RETURN(native && native->ok(), StatusCode::kOutOfMemory, op_label(model_, k) + ": packing weights");
    if (r.gated)
      NN_CHECK_OR_RETURN(static_cast<NativeConv&>(*native).enable_scaled_input(r.gated->sum.has_value()),
                         StatusCode::kOutOfMemory, op_label(model_, k) + ": gated weights");
    r.kernel = std::move(native);
  }
  return Status::ok();
}

}  // namespace nn::cpu
