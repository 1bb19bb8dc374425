// The CPU delegate's compile-time passes over a partition's FusedOp records, in the
// order CpuPartition::build runs them: constant folding, labelling (XNNPACK | native |
// reference), the fusions, and the native kernels the heads get.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "delegates/cpu/cpu_partition.h"
#include "delegates/cpu/native_int8.h"
#include "delegates/cpu/native_layer_norm.h"
#include "delegates/cpu/xnn_int8.h"
#include "ops/activation.h"

namespace nn::cpu {

namespace {

// An epilogue that only adds the bias: what a per-channel scale can be multiplied through.
bool plain(const Epilogue& e) {
  const Epilogue none;
  return e.lo == none.lo && e.hi == none.hi && !e.hard_swish && !e.residual && !e.logistic && !e.swish &&
         !e.gelu && !e.gelu_tanh;
}

}  // namespace

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
                                (r.data = make_native_data_op(model_, k, statics_, &why, isa_))) {
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

// A RESHAPE of what a native data op (TRANSPOSE, CONCATENATION, SLICE, ...) writes, read by
// nothing else: the data op writes the RESHAPE's output itself (a reshape keeps the bytes and
// their order), so the copy and its step go. ShuffleNet's channel shuffles put a RESHAPE on
// each side of a TRANSPOSE; each was a step of its own between native data ops.
void CpuPartition::fuse_reshapes_into_data_ops() {
  std::map<uint32_t, uint32_t> writer;  // operand -> the native data op head writing it
  for (uint32_t k : live_) {
    if (absorbed(k)) continue;
    const Operation& op = model_.operations[k];
    if (op.type == OperationType::RESHAPE && rec(k).chain.empty() && !op.inputs.empty() && op.outputs.size() == 1) {
      const Operand& in = model_.operands[op.inputs[0]];
      const Operand& out = model_.operands[op.outputs[0]];
      auto w = writer.find(op.inputs[0]);
      if (w != writer.end() && internal_single_use(op.inputs[0]) && in.type == out.type &&
          in.byte_size() == out.byte_size() && in.byte_size() > 0) {
        rec(w->second).output = op.outputs[0];
        absorb(w->second, k);
        writer[op.outputs[0]] = w->second;
        continue;
      }
    }
    if (rec(k).data && op.outputs.size() == 1) writer[op.outputs[0]] = k;
  }
}

// A native int8 table op (HARD_SWISH, LOGISTIC, TANH) whose output a DEQUANTIZE to float
// alone reads (selfie's sigmoid head before its float output, its SE gates in default PTQ):
// the table op writes each byte's dequantized value, (q - zp) * scale as the DEQUANTIZE
// computes it, so the int8 tensor is never written and the DEQUANTIZE (an XNNPACK step)
// goes. Not for an int8 LOGISTIC left to XNNPACK (no AVX-512 VBMI): the AVX2 table is slower
// than XNNPACK's LOGISTIC and DEQUANTIZE steps together (bench/README.md, int8).
void CpuPartition::fuse_int8_table_dequantize() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& op = model_.operations[k];
    if (!r.data || !fusable(k) || op.outputs.size() != 1 || !internal_single_use(op.outputs[0])) continue;
    const uint32_t d = readers_.at(op.outputs[0])[0];
    if (!fusable(d)) continue;
    const Operation& dq = model_.operations[d];
    if (dq.type != OperationType::DEQUANTIZE || dq.outputs.size() != 1) continue;
    const Operand& q = model_.operands[op.outputs[0]];
    if (q.type != OperandType::TENSOR_QUANT8_ASYMM_SIGNED ||
        model_.operands[dq.outputs[0]].type != OperandType::TENSOR_FLOAT32)
      continue;
    std::unique_ptr<NativeDataOp> fused = int8_table_dequantized(*r.data, q.scale, q.zero_point);
    if (!fused) continue;  // not a table op
    r.data = std::move(fused);
    absorb(k, d);
    r.output = dq.outputs[0];
  }
}

// An int8 table op (HARD_SWISH, LOGISTIC, TANH) that alone reads what a native int8 conv or
// depthwise conv writes: the conv looks each chunk of its rows up as it writes them
// (fuse_int8_table), so the table op is no step and no pass over memory of its own. After the
// residual ADDs (a conv running one takes no table), the table + DEQUANTIZE fusion (which
// keeps its table op) and the expansion + depthwise fusion (which would drop the table).
void CpuPartition::fuse_int8_conv_tables() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& op = model_.operations[k];
    if (!r.data || !fusable(k) || op.outputs.size() != 1 || (r.output && *r.output != op.outputs[0]) ||
        (op.type != OperationType::CONV_2D && op.type != OperationType::DEPTHWISE_CONV_2D) ||
        !internal_single_use(op.outputs[0]))
      continue;
    const uint32_t t = readers_.at(op.outputs[0])[0];
    auto it = ops_.find(t);
    if (!fusable(t) || it == ops_.end() || !it->second.data || model_.operations[t].outputs.size() != 1) continue;
    std::shared_ptr<const Int8Lookup> lookup = int8_table_lookup(*it->second.data);
    if (!lookup || !fuse_int8_table(*r.data, lookup, std::string(operation_type_name(model_.operations[t].type))))
      continue;
    absorb(k, t);
    r.output = model_.operations[t].outputs[0];
  }
}

// A native int8 1x1 conv whose output a native int8 depthwise conv alone reads (an inverted
// residual's expansion): one op (int8_expand_depthwise) computes the conv's rows into a ring
// the depthwise reads at once, so the expanded tensor is never written. After the residual
// ADDs: a conv or depthwise running an ADD is left alone. With threads only: apart, each
// thread's depthwise rows read expanded rows the other core wrote; on one thread the two
// int8 ops apart are as fast (compute-bound; the expanded tensor stays in L2), and the
// AMX expansions of 7- and 14-wide images slower fused (bench/README.md, "int8 expansion +
// depthwise"). AVX-512 VNNI only (int8_expand_depthwise).
void CpuPartition::fuse_int8_expand_depthwise() {
  if (options_.threads < 2) return;
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& op = model_.operations[k];
    if (!r.data || !fusable(k) || op.type != OperationType::CONV_2D || op.outputs.size() != 1 ||
        !internal_single_use(op.outputs[0]))
      continue;
    const uint32_t d = readers_.at(op.outputs[0])[0];
    if (!fusable(d)) continue;
    FusedOp& dw = rec(d);
    const Operation& dop = model_.operations[d];
    if (!dw.data || dop.type != OperationType::DEPTHWISE_CONV_2D || dop.inputs[0] != op.outputs[0]) continue;
    std::unique_ptr<NativeDataOp> fused = int8_expand_depthwise(r.data, dw.data);
    if (!fused) continue;
    r.data = std::move(fused);
    absorb(k, d);
    r.output = dop.outputs[0];
  }
}

// An int8 ADD of two same-shaped tensors (fuse code NONE or RELU*), one of them written by a
// native int8 conv or depthwise conv that nothing else reads: the conv applies the ADD to its
// rows as it writes them (fuse_int8_residual_add) and writes the ADD's output. The other
// input (the residual) must be written before the conv runs; it may be the conv's own input
// (a depthwise conv's skip). Ahead of the other fusions: the conv then heads the ADD.
void CpuPartition::fuse_int8_residual_adds() {
  const bool residual_by_table = options_.cpu.native_int8_residual_table && options_.cpu.native_int8_add_table;
  std::map<uint32_t, uint32_t> writer;  // operand -> op
  for (uint32_t k = 0; k < model_.operations.size(); ++k)
    for (uint32_t o : model_.operations[k].outputs) writer[o] = k;
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& op = model_.operations[k];
    if (!r.data || !fusable(k) ||
        (op.type != OperationType::CONV_2D && op.type != OperationType::DEPTHWISE_CONV_2D) ||
        op.outputs.size() != 1)
      continue;
    const uint32_t out = op.outputs[0];
    if (!internal_single_use(out)) continue;
    const uint32_t c = readers_.at(out)[0];
    if (!fusable(c)) continue;
    const Operation& add = model_.operations[c];
    if (add.type != OperationType::ADD || add.inputs.size() != 3 || add.outputs.size() != 1) continue;
    const uint32_t other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
    const void* fuse = static_data(add.inputs[2]);
    if (other == out || !model_.has_value(other) || static_data(other) || !fuse) continue;
    const int32_t code = *static_cast<const int32_t*>(fuse);
    if (code < 0 || code > 3) continue;  // NONE, RELU, RELU1, RELU6
    auto w = writer.find(other);
    if (w != writer.end() && w->second >= k) continue;  // written after the conv
    if (!fuse_int8_residual_add(*r.data, model_, c, other, code, isa_, residual_by_table,
                                options_.cpu.native_int8_residual))
      continue;
    absorb(k, c);
    r.output = add.outputs[0];
    r.residual = other;
  }
}

// A batch norm after a channel concat (DenseNet: CONCATENATION -> MUL by a per-channel
// constant -> ADD of one, with a RELU fuse code or a RELU* op after): the concat's copy
// computes it (concat_with_channel_affine) and writes the last op's output, so the concat's
// output is never written and the MUL and ADD have no steps or passes over memory of their
// own. Each op's output must be read by the next alone.
void CpuPartition::fuse_concat_affine() {
  auto next_of = [&](uint32_t o) -> int64_t {
    if (!internal_single_use(o)) return -1;
    const uint32_t n = readers_.at(o)[0];
    return fusable(n) && rec(n).lowers ? int64_t(n) : -1;
  };
  for (uint32_t k : live_) {
    const Operation& op = model_.operations[k];
    if (op.type != OperationType::CONCATENATION || !rec(k).data || !fusable(k) || op.outputs.size() != 1) continue;
    const uint32_t out = op.outputs[0];
    const Operand& o = model_.operands[out];
    if (o.type != OperandType::TENSOR_FLOAT32 || o.dims.empty()) continue;
    const int64_t mul = next_of(out);
    const auto scale = mul >= 0 ? channel_constant_of(OperationType::MUL, uint32_t(mul), out) : std::nullopt;
    if (!scale) continue;
    const uint32_t mul_out = model_.operations[mul].outputs[0];
    const int64_t add = next_of(mul_out);
    const auto bias = add >= 0 ? channel_constant_of(OperationType::ADD, uint32_t(add), mul_out) : std::nullopt;
    if (!bias) continue;
    float lo, hi;
    xnn_own_clamp(model_, model_.operations[add], &lo, &hi);
    std::vector<uint32_t> chain = {uint32_t(mul), uint32_t(add)};
    uint32_t last = model_.operations[add].outputs[0];
    if (const int64_t act = next_of(last); act >= 0 && clamp_activation_code(model_.operations[act].type)) {
      float alo, ahi;
      xnn_own_clamp(model_, model_.operations[act], &alo, &ahi);
      lo = std::max(lo, alo), hi = std::min(hi, ahi);  // the fuse codes' ranges overlap
      chain.push_back(uint32_t(act));
      last = model_.operations[act].outputs[0];
    }
    const size_t c = size_t(o.dims.back());
    const float* s = static_cast<const float*>(static_data(*scale));
    const float* b = static_cast<const float*>(static_data(*bias));
    auto fused = concat_with_channel_affine(*rec(k).data, std::vector<float>(s, s + c), std::vector<float>(b, b + c),
                                            lo, hi, isa_);
    if (!fused) continue;  // not along the last axis
    rec(k).data = std::move(fused);
    for (uint32_t f : chain) absorb(k, f);
    rec(k).output = last;
  }
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
    if (conv == ops_.end() || conv->second.native != NativeKind::kConv || model_.operations[c].inputs[0] != o ||
        model_.operations[c].type == OperationType::GROUPED_CONV_2D)
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

// A float MEAN over height and width that no ADD took (fuse_add_mean) runs on NativeAddMean
// without its second operand: rows over the pool, so each thread sums the rows its core wrote
// (XNNPACK's global average pool runs one image on one thread, reading half of it from the
// other core: efficientnet_b0's squeeze-and-excitation means ran slower at 2 threads than 1).
// Only images of 10 rows or more and 256 KB or more: below either (7x7 and 8x8 final pools,
// MobileNetV3-small's 14x14 squeezes) XNNPACK's tied or won at 2 threads.
void CpuPartition::native_global_means() {
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    const Operation& op = model_.operations[k];
    if (op.type != OperationType::MEAN || !r.lowers || absorbed(k) || r.native != NativeKind::kNone || r.data ||
        !r.chain.empty() || model_.operands[op.inputs[0]].type != OperandType::TENSOR_FLOAT32 ||
        model_.operands[op.outputs[0]].type != OperandType::TENSOR_FLOAT32 ||
        !is_global_mean(model_, op, statics_))
      continue;
    const Dims& in = model_.operands[op.inputs[0]].dims;
    if (in[1] < 10 || num_elements(in) * sizeof(float) < (size_t(256) << 10)) continue;
    r.native = NativeKind::kAddMean;
    r.step = kNativeStep;
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
    // FULLY_CONNECTED and 1x1 convs run on NativeConv's GEMM tiles, which take the GELU
    // stage and write rows any RESHAPE of them leaves in place.
    const bool gemm = r.native == NativeKind::kConv && !r.resize && !r.gated &&
                      (op.type == OperationType::FULLY_CONNECTED || pointwise_conv(model_, op));
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
      if (auto gelu = gemm && options_.cpu.gelu_epilogue ? gelu_after(out) : std::nullopt) {
        (gelu->tanh_form ? e.gelu_tanh : e.gelu) = true;  // the last stage, as swish
        for (uint32_t g : gelu->ops) absorb(k, g);
        r.output = model_.operations[gelu->ops.back()].outputs[0];
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
      } else if (gemm && next.type == OperationType::RESHAPE &&
                 model_.operands[next.outputs[0]].type == OperandType::TENSOR_FLOAT32) {
        // The same bytes under other dims: the head writes the RESHAPE's output.
      } else if (auto scale = gemm && options_.cpu.channel_scale_fold && plain(e) && !r.channel_scale
                                  ? channel_constant_of(OperationType::MUL, c, out)
                                  : std::nullopt) {
        r.channel_scale = *scale;  // make_native_kernels multiplies it into filter and bias
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

std::optional<CpuPartition::GeluMatch> CpuPartition::gelu_after(uint32_t out) const {
  auto rd = readers_.find(out);
  if (rd == readers_.end() || partition_outputs_.count(out) || model_outputs_.count(out)) return std::nullopt;
  std::vector<uint32_t> readers = rd->second;
  std::sort(readers.begin(), readers.end());
  if (std::adjacent_find(readers.begin(), readers.end()) != readers.end()) return std::nullopt;
  // A float constant of one element within 1e-6 of `want` (the exporters' constants are
  // the float nearest sqrt 2, 1 / sqrt 2, sqrt(2 / pi), 0.044715, 3, 1 and 0.5).
  auto is_scalar = [&](uint32_t o, float want) {
    const Operand& c = model_.operands[o];
    const void* v = static_data(o);
    return v && (c.type == OperandType::TENSOR_FLOAT32 || c.type == OperandType::FLOAT32) &&
           num_elements(c.dims) == 1 && std::fabs(*static_cast<const float*>(v) - want) <= 1e-6f * want;
  };
  // Op k of `type` with no fuse code reading x and either `want`'s scalar (want > 0) or
  // the operand `other` (want == 0), in either order (x first for DIV and POW).
  auto binary = [&](int64_t k, OperationType type, uint32_t x, float want, uint32_t other = 0) {
    if (k < 0 || !fusable(uint32_t(k))) return false;
    const Operation& op = model_.operations[size_t(k)];
    const bool pow = type == OperationType::POW;  // POW(a, b) has no fuse code
    if (op.type != type || (!pow && !fuses_nothing(op, statics_)) || op.inputs.size() < 2) return false;
    for (int side = 0; side < 2; ++side)
      if (op.inputs[side] == x && (want > 0 ? is_scalar(op.inputs[1 - side], want) : op.inputs[1 - side] == other))
        return (type != OperationType::DIV && !pow) || side == 0;
    return false;
  };
  // The only reader of operand o, when o is seen nowhere else; -1 otherwise.
  auto next = [&](uint32_t o) -> int64_t { return internal_single_use(o) ? int64_t(readers_.at(o)[0]) : -1; };
  auto output = [&](int64_t k) { return model_.operations[size_t(k)].outputs[0]; };
  // t -> t + 1 -> then out * (t + 1) * 0.5 or out * 0.5 * (t + 1), m being the MUL that
  // reads out: the ops from the ADD of one, or empty.
  auto tail = [&](uint32_t t, uint32_t m) -> std::vector<uint32_t> {
    const int64_t plus = next(t);
    if (!binary(plus, OperationType::ADD, t, 1.f)) return {};
    const uint32_t p = output(plus), mo = output(m);
    const int64_t last = next(mo);
    if (last < 0 || model_.operands[output(last)].dims != model_.operands[out].dims) return {};
    const bool product_first = binary(m, OperationType::MUL, out, 0.f, p) && next(p) == int64_t(m) &&
                               binary(last, OperationType::MUL, mo, 0.5f);
    const bool half_first = binary(m, OperationType::MUL, out, 0.5f) && next(p) == last &&
                            binary(last, OperationType::MUL, mo, 0.f, p);
    if (!product_first && !half_first) return {};
    return {uint32_t(plus), m, uint32_t(last)};
  };
  auto match = [&](std::vector<uint32_t> ops, std::vector<uint32_t> rest, bool tanh_form) -> std::optional<GeluMatch> {
    if (rest.empty()) return std::nullopt;
    ops.insert(ops.end(), rest.begin(), rest.end());
    std::sort(ops.begin(), ops.end());  // execution order
    return GeluMatch{std::move(ops), tanh_form};
  };
  if (readers.size() == 2) {
    // erf form: out / sqrt 2 (or out * (1 / sqrt 2)) -> ERF -> tail
    for (int first = 0; first < 2; ++first) {
      const uint32_t a = readers[first], m = readers[1 - first];
      if (!binary(a, OperationType::DIV, out, 1.41421356f) && !binary(a, OperationType::MUL, out, 0.70710678f))
        continue;
      const int64_t erf = next(output(a));
      if (erf < 0 || model_.operations[erf].type != OperationType::NNPIPE_ERF || !fusable(uint32_t(erf))) continue;
      if (auto g = match({a, uint32_t(erf)}, tail(output(erf), m), false)) return g;
    }
  }
  if (readers.size() == 3) {
    // tanh form: POW(out, 3) * 0.044715 + out -> * sqrt(2 / pi) -> TANH -> tail
    for (int i = 0; i < 3; ++i) {
      const uint32_t cube = readers[i];
      if (!binary(cube, OperationType::POW, out, 3.f)) continue;
      const int64_t scaled = next(output(cube));
      if (!binary(scaled, OperationType::MUL, output(cube), 0.044715f)) continue;
      const int64_t sum = next(output(scaled));
      if (!binary(sum, OperationType::ADD, out, 0.f, output(scaled))) continue;
      const int64_t arg = next(output(sum));
      if (!binary(arg, OperationType::MUL, output(sum), 0.7978845608f)) continue;
      const int64_t tanh = next(output(arg));
      if (tanh < 0 || model_.operations[tanh].type != OperationType::TANH || !fusable(uint32_t(tanh))) continue;
      // out's third reader: the MUL of the tail
      const uint32_t m = readers[0] != cube && readers[0] != uint32_t(sum)   ? readers[0]
                         : readers[1] != cube && readers[1] != uint32_t(sum) ? readers[1]
                                                                             : readers[2];
      if (m == cube || m == uint32_t(sum)) continue;
      if (auto g = match({cube, uint32_t(scaled), uint32_t(sum), uint32_t(arg), uint32_t(tanh)},
                         tail(output(tanh), m), true))
        return g;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> CpuPartition::channel_constant_of(OperationType type, uint32_t k, uint32_t out) const {
  const Operation& op = model_.operations[k];
  if (op.type != type) return std::nullopt;
  // A MUL's fuse code would clamp between the product and the caller's next stage; an
  // ADD's is the last stage, which the caller applies.
  if (type == OperationType::MUL ? !fuses_nothing(op, statics_) : op.inputs.size() != 3 || !static_data(op.inputs[2]))
    return std::nullopt;
  const Dims& d = model_.operands[out].dims;
  for (int side = 0; side < 2; ++side) {
    const uint32_t s = op.inputs[1 - side];
    const Operand& c = model_.operands[s];
    if (op.inputs[side] != out || !static_data(s) || c.type != OperandType::TENSOR_FLOAT32 || c.dims.empty() ||
        d.empty() || c.dims.back() != d.back() || c.dims.size() > d.size())
      continue;
    bool per_channel = true;
    for (size_t i = 0; i + 1 < c.dims.size(); ++i) per_channel = per_channel && c.dims[i] == 1;
    if (per_channel && model_.operands[op.outputs[0]].dims == d) return s;
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
    if (auto shape = conv_shape(model_, model_.operations[k]);
        !shape || shape->groups != 1 || !NativeExpandDepthwise::supports(*shape))
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
    const int64_t p = options_.cpu.depthwise_project ? projection_of(k) : -1;
    if (p < 0) continue;
    FusedOp& third = rec(uint32_t(p));
    r.project = uint32_t(p);
    r.project_epilogue = third.epilogue;
    absorb(k, uint32_t(p));
    for (uint32_t c : third.chain) absorb(k, c);
    third.chain.clear();
    r.output = written(third);
    r.residual = third.residual;
    third.residual.reset();
  }
}

int64_t CpuPartition::projection_of(uint32_t k) const {
  const FusedOp& r = ops_.at(k);
  if (!r.depthwise || r.residual) return -1;  // the depthwise's own residual has no place
  const uint32_t out = written(r);
  if (!internal_single_use(out)) return -1;
  const uint32_t p = readers_.at(out)[0];
  auto it = ops_.find(p);
  if (it == ops_.end() || absorbed(p)) return -1;
  const FusedOp& proj = it->second;
  const Operation& op = model_.operations[p];
  if (proj.native != NativeKind::kConv || proj.resize || proj.gated || proj.channel_scale ||
      op.type != OperationType::CONV_2D || op.inputs[0] != out || !pointwise_conv(model_, op))
    return -1;
  return depthwise_project_pays(model_, *r.depthwise, p) ? int64_t(p) : -1;
}

// The nine ops of a LayerNorm become one native op, headed by its first MEAN.
void CpuPartition::fuse_layer_norm() {
  auto internal_readers = [&](uint32_t o) -> std::vector<uint32_t> {
    auto r = readers_.find(o);
    if (r == readers_.end() || partition_outputs_.count(o) || model_outputs_.count(o)) return {};
    std::vector<uint32_t> ops = r->second;  // an op reading o twice (MUL(d, d)) once
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    return ops;
  };
  auto fusable_op = [&](uint32_t k) {
    auto f = ops_.find(k);
    return fusable(k) && (f->second.lowers || f->second.data);  // not left to the reference kernels
  };
  for (uint32_t k : live_) {
    FusedOp& r = rec(k);
    if (model_.operations[k].type != OperationType::MEAN || !fusable_op(k)) continue;
    auto p = match_layer_norm(model_, k, statics_, internal_readers, fusable_op);
    if (!p) continue;
    r.data = std::make_unique<NativeLayerNorm>(*p, isa_.avx512);
    r.native = NativeKind::kNone;
    r.lowers = false;
    r.step = kNativeStep;
    for (uint32_t f : p->ops) absorb(k, f);
    r.output = p->output;
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
      auto fused = std::make_unique<NativeExpandDepthwise>(
          *first, filter, bias, r.epilogue,
          std::make_unique<NativeDepthwise>(*second, dw_filter, dw_bias, r.depthwise_epilogue, isa_),
          size_t(std::max(1, options_.threads)), isa_);
      if (r.project) {
        auto third = conv_shape(model_, model_.operations[*r.project]);
        NN_CHECK_OR_RETURN(third, StatusCode::kInternal, op_label(model_, *r.project) + ": conv parameters");
        auto [p_filter, p_bias] = conv_weights(model_, model_.operations[*r.project], statics_);
        auto project = std::make_unique<NativeConv>(*third, p_filter, p_bias, r.project_epilogue, isa_);
        NN_CHECK_OR_RETURN(project->ok() && fused->ok(), StatusCode::kOutOfMemory,
                           op_label(model_, k) + ": packing weights");
        NN_CHECK_OR_RETURN(fused->add_projection(std::move(project)), StatusCode::kInternal,
                           op_label(model_, *r.project) + ": projection does not fit its depthwise");
      }
      native = std::move(fused);
    } else {
      // A folded per-channel scale: the kernel is built on filter and bias times it, one
      // rounding per weight (gamma * (W x + b) and (gamma W) x + gamma b differ by that).
      std::vector<float> scaled_filter, scaled_bias;
      StaticLookup statics = statics_;
      if (r.channel_scale) {
        const Operation& op = model_.operations[k];
        const float* scale = static_cast<const float*>(static_data(*r.channel_scale));
        const size_t channels = model_.operands[*r.channel_scale].dims.back();
        auto [filter, bias] = conv_weights(model_, op, statics_);
        const size_t per_channel = num_elements(model_.operands[op.inputs[1]].dims) / channels;
        scaled_filter.assign(filter, filter + channels * per_channel);
        for (size_t c = 0; c < channels; ++c)
          for (size_t i = 0; i < per_channel; ++i) scaled_filter[c * per_channel + i] *= scale[c];
        if (bias) {
          scaled_bias.assign(bias, bias + channels);
          for (size_t c = 0; c < channels; ++c) scaled_bias[c] *= scale[c];
        }
        const uint32_t filter_operand = op.inputs[1], bias_operand = op.inputs[2];
        statics = [&, filter_operand, bias_operand](uint32_t o) -> const void* {
          if (o == filter_operand) return scaled_filter.data();
          if (o == bias_operand && !scaled_bias.empty()) return scaled_bias.data();
          return statics_(o);
        };
      }
      native = make_native_op(model_, k, r.native, statics, r.epilogue, isa_, options_.cpu.drop_dead_taps, nullptr,
                              options_.cpu.winograd ? std::max(1, options_.threads) : 0,
                              options_.cpu.winograd_panel_split, options_.cpu.winograd_f2,
                              options_.cpu.dilated_winograd);
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
