// A CPU partition's steps: grouping the head ops into XNNPACK / native / reference steps,
// lowering an XNNPACK step into its subgraph, the arena of the tensors between steps, and
// binding and running the steps.
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <string>

#include "delegates/cpu/cpu_partition.h"
#include "delegates/cpu/xnn_int8.h"
#include "runtime/arena_planner.h"
#include "runtime/partitioner.h"
#include "runtime/thread_pool.h"

namespace nn::cpu {
namespace {

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

// Below this estimated single-thread time a step runs on the caller alone: handing out a
// job and waiting for its end costs the caller about half of it even with the other thread
// spinning (bench/README.md, "Why the 2-thread figures moved"), more when it has to wake.
constexpr double kOnCallerNs = 4000;

// A head op's single-thread time, roughly: its multiply-adds at 32 per ns plus the bytes of
// the tensors it reads and writes at 16 per ns, both well under what the kernels reach, so
// the estimate errs toward sharing.
double estimated_ns(const Model& m, uint32_t k, const std::vector<uint32_t>& reads,
                    const std::vector<uint32_t>& writes) {
  const Operation& op = m.operations[k];
  double bytes = 0;
  for (uint32_t o : reads) bytes += 4.0 * double(num_elements(m.operands[o].dims));
  for (uint32_t o : writes) bytes += 4.0 * double(num_elements(m.operands[o].dims));
  double macs = 0;
  if (!op.outputs.empty() && op.inputs.size() > 1) {
    const double out = double(num_elements(m.operands[op.outputs[0]].dims));
    const Dims& w = m.operands[op.inputs[1]].dims;
    switch (op.type) {
      case OperationType::CONV_2D:
      case OperationType::GROUPED_CONV_2D:
        if (w.size() == 4) macs = out * w[1] * w[2] * w[3];
        break;
      case OperationType::DEPTHWISE_CONV_2D:
        if (w.size() == 4) macs = out * w[1] * w[2];
        break;
      case OperationType::TRANSPOSE_CONV_2D:
        if (w.size() == 4) macs = double(num_elements(m.operands[op.inputs[0]].dims)) * w[0] * w[1] * w[2];
        break;
      case OperationType::FULLY_CONNECTED:
        if (w.size() == 2) macs = out * w[1];
        break;
      default: break;
    }
  }
  return macs / 32 + bytes / 16;
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

}  // namespace

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
  s = xnn_create_runtime_v2(sg.get(), step.on_caller ? nullptr : options_.threadpool, 0, &runtime);
  if (s != xnn_status_success) {
    // Which node XNNPACK refused is not reported; move the first op and rebuild.
    *retry_op = step.ops.front();
    return Status(StatusCode::kUnsupportedOp,
                  std::string("xnn_create_runtime_v2: ") + xnn_status_name(s) + " (" + step.label + ")");
  }
  step.runtime.reset(runtime);
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
  // With a pool: runs of small heads become steps of their own that run on the caller.
  std::vector<bool> on_caller(groups.size(), false);
  if (options_.threadpool) {
    std::map<uint32_t, bool> small;
    for (size_t h = 0; h < heads.size(); ++h)
      small[heads[h]] = estimated_ns(model_, heads[h], head_reads[h], head_writes[h]) < kOnCallerNs;
    std::vector<LabeledGroup> split;
    on_caller.clear();
    for (LabeledGroup& g : groups) {
      if (g.label == kReferenceStep) {  // the reference kernels never use the pool
        split.push_back(std::move(g));
        on_caller.push_back(false);
        continue;
      }
      for (size_t i = 0, j; i < g.ops.size(); i = j) {
        for (j = i + 1; j < g.ops.size() && small[g.ops[j]] == small[g.ops[i]];) ++j;
        split.push_back({g.label, std::vector<uint32_t>(g.ops.begin() + i, g.ops.begin() + j)});
        on_caller.push_back(small[g.ops[i]]);
      }
    }
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
    step.on_caller = on_caller[g];
    step.ops = groups[g].ops;
    std::set<uint32_t> written_here;
    for (uint32_t k : step.ops)
      for (uint32_t o : writes(k)) written_here.insert(o);
    for (uint32_t k : step.ops) {
      for (uint32_t i : reads(k))
        if (!written_here.count(i) && std::find(step.inputs.begin(), step.inputs.end(), i) == step.inputs.end())
          step.inputs.push_back(i);
      for (uint32_t o : writes(k)) {
        bool needed = partition_outputs_.count(o) || model_outputs_.count(o) || step.kind != kXnnStep;
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

// Tensors between steps share one arena (runtime/arena_planner.h): each lives from the op
// that writes it to the last op that reads it, and tensors whose lives overlap get disjoint
// bytes. Besides memory, reuse keeps the working set in cache: the selfie decoder's 1 MB
// tensors cycle through a few slots.
Status CpuPartition::plan_memory() {
  // Lives in positions finer than steps: a native or reference step runs its ops one after
  // another, so each op (with the ops fused into it) is a position of its own and the
  // tensors inside such a step reuse bytes too (one step of MobileNetV2's native convs and
  // depthwise held every tensor apart: 12% slower). An XNNPACK step is one position.
  std::map<uint32_t, size_t> written_at, last_read, runs_at;
  size_t pos = 0;
  for (const Step& step : steps_) {
    for (uint32_t k : step.ops) {
      if (step.kind != kXnnStep && !absorbed(k) && k != step.ops.front()) ++pos;
      if (!absorbed(k)) runs_at[k] = pos;
      const Operation& op = model_.operations[k];
      for (uint32_t o : op.outputs) written_at.emplace(o, pos);
      for (uint32_t i : op.inputs) last_read[i] = std::max(last_read[i], pos);
      if (const auto& res = rec(k).residual) last_read[*res] = std::max(last_read[*res], pos);
    }
    ++pos;
  }
  std::vector<uint32_t> operands;
  std::vector<ArenaTensor> lives;
  for (const Step& step : steps_)
    for (uint32_t o : step.outputs)
      if (!partition_outputs_.count(o) && std::find(operands.begin(), operands.end(), o) == operands.end()) {
        const size_t first = written_at.at(o);
        auto r = last_read.find(o);
        operands.push_back(o);
        // XNNPACK's read slack past each tensor, 64-byte aligned starts.
        lives.push_back({first, r != last_read.end() ? std::max(first, r->second) : first,
                         model_.operands[o].byte_size() + kTensorSlackBytes});
      }
  // A native kernel's scratch lives while it runs, in the same arena.
  std::vector<uint32_t> scratch_ops;
  for (const auto& [k, at] : runs_at) {
    const FusedOp& r = rec(k);
    if (r.kernel && r.kernel->scratch_bytes()) {
      scratch_ops.push_back(k);
      lives.push_back({at, at, r.kernel->scratch_bytes()});
    }
  }
  const ArenaPlan plan = plan_arena(lives, 64);
  arena_ = AlignedBuffer(plan.bytes);
  NN_CHECK_OR_RETURN(arena_.ok(), StatusCode::kOutOfMemory,
                     "cpu delegate: " + std::to_string(plan.bytes) + " bytes for intermediate tensors");
  for (size_t i = 0; i < operands.size(); ++i) internal_[operands[i]] = arena_.data() + plan.offsets[i];
  for (size_t i = 0; i < scratch_ops.size(); ++i)
    scratch_[scratch_ops[i]] = arena_.data() + plan.offsets[operands.size() + i];
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
    if (step.kind == kXnnStep) {
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
    step.native_calls.clear();
    step.reference_calls.clear();
    if (step.kind == kNativeStep) {
      const pthreadpool_t pool = step.on_caller ? nullptr : options_.threadpool;
      for (uint32_t k : step.ops) {
        if (absorbed(k)) continue;
        const FusedOp& f = rec(k);
        if (f.data) {
          DataCall call{k, f.data.get(), {{}, pointer(written(f)), pool}};
          for (uint32_t i : f.data->operands()) call.args.inputs.push_back(pointer(i));
          for (const void* p : call.args.inputs)
            NN_CHECK_OR_RETURN(p, StatusCode::kInternal, step.label + ": no input buffer");
          NN_CHECK_OR_RETURN(call.args.output, StatusCode::kInternal, step.label + ": no output buffer");
          step.native_calls.push_back(std::move(call));
          continue;
        }
        KernelCall call{k, f.kernel.get(), {}};
        NativeArgs& a = call.args;
        a.input = static_cast<const float*>(pointer(f.gated    ? f.gated->x
                                                    : f.resize ? model_.operations[*f.resize].inputs[0]
                                                               : model_.operations[k].inputs[0]));
        a.residual = f.residual ? static_cast<const float*>(pointer(*f.residual)) : nullptr;
        if (f.gated) {
          a.gate = static_cast<const float*>(pointer(f.gated->gate));
          a.gate_sum = f.gated->sum ? static_cast<const float*>(pointer(*f.gated->sum)) : nullptr;
          NN_CHECK_OR_RETURN(a.gate && (!f.gated->sum || a.gate_sum), StatusCode::kInternal,
                             step.label + ": no buffer for the gated input");
        }
        a.output = static_cast<float*>(pointer(written(f)));
        auto scratch = scratch_.find(k);
        a.scratch = scratch != scratch_.end() ? scratch->second : nullptr;
        a.pool = pool;
        NN_CHECK_OR_RETURN(call.kernel && a.input && a.output && (!f.residual || a.residual) &&
                               (a.scratch || !call.kernel->scratch_bytes()),
                           StatusCode::kInternal, step.label + ": no buffer");
        step.native_calls.push_back(call);
      }
      continue;
    }
    for (uint32_t k : step.ops) {
      const Operation& op = model_.operations[k];
      ReferenceCall r;
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
      step.reference_calls.push_back(std::move(r));
    }
  }
  return Status::ok();
}

Status CpuPartition::run() {
  // Denormals flushed for the whole run, every step and thread (CpuOptions::flush_denormals).
  FlushDenormals flush(options_.cpu.flush_denormals);
  // Sharing the pool or not, as ParallelChoice measures (not when profiling: the profile
  // shows the shared schedule).
  if (options_.threadpool && options_.cpu.adaptive_threads && !options_.profile) {
    const bool parallel = parallel_choice_.parallel();
    const auto start = std::chrono::steady_clock::now();
    Status s;
    {
      SerialJobs serial(!parallel);
      s = run_steps();
    }
    parallel_choice_.record(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    return s;
  }
  return run_steps();
}

Status CpuPartition::run_steps() {
  const bool cpu_clock = options_.threadpool == nullptr;
  // With a pool, each step's wall time and each thread's CPU time in it.
  const bool pool_profile = options_.profile && options_.threadpool;
  if (pool_profile) thread_pool_set_profiling(options_.threadpool, true);
  ThreadPoolBusy busy0;
  double caller0 = 0;
  for (Step& step : steps_) {
    if (pool_profile) busy0 = thread_pool_busy(options_.threadpool), caller0 = thread_cpu_ms();
    const double t0 = options_.profile ? profile_clock_ms(cpu_clock) : 0;
    if (step.kind == kXnnStep) {
      xnn_status s = xnn_invoke_runtime(step.runtime.get());
      NN_CHECK_OR_RETURN(s == xnn_status_success, StatusCode::kInternal,
                         step.label + ": xnn_invoke_runtime: " + xnn_status_name(s));
    } else if (step.kind == kNativeStep) {
      for (const NativeCall& call : step.native_calls) {
        if (const auto* k = std::get_if<KernelCall>(&call))
          k->kernel->run(k->args);
        else if (const auto* d = std::get_if<DataCall>(&call))
          d->data->run(d->args);
      }
    } else {
      for (const ReferenceCall& r : step.reference_calls) {
        OpContext ctx{model_, model_.operations[r.op], r.in, r.out, options_.requantization};
        Status s = r.def->reference(ctx);
        if (!s.is_ok()) return s.with_context(op_label(model_, r.op));
      }
    }
    if (options_.profile) step.last_ms = profile_clock_ms(cpu_clock) - t0;
    if (pool_profile) {
      const double caller = thread_cpu_ms() - caller0;
      const ThreadPoolBusy b = thread_pool_busy(options_.threadpool);
      step.last_busy_ms.assign(b.chunk_ms.size(), 0.0);
      for (size_t t = 0; t < b.chunk_ms.size(); ++t) step.last_busy_ms[t] = b.chunk_ms[t] - busy0.chunk_ms[t];
      // The caller's work outside the pool's jobs (setup, serial parts) counts as busy; its
      // waiting inside them does not.
      step.last_busy_ms[0] += std::max(0.0, caller - (b.caller_in_jobs_ms - busy0.caller_in_jobs_ms));
      step.last_jobs = static_cast<uint32_t>(b.jobs - busy0.jobs);
      step.last_serial_jobs = static_cast<uint32_t>(b.serial_jobs - busy0.serial_jobs);
      step.last_wait_ms = b.caller_wait_ms - busy0.caller_wait_ms;
    }
  }
  return Status::ok();
}

}  // namespace nn::cpu
