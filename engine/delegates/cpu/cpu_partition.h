// One partition compiled by the CPU delegate (cpu_delegate.cpp has the pipeline): its op
// records (FusedOp), the fusion passes over them (cpu_passes.cpp), its steps, memory and
// execution (cpu_steps.cpp).
#pragma once

#include <xnnpack.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "delegates/cpu/cpu_internal.h"
#include "delegates/cpu/native_choice.h"
#include "delegates/cpu/native_data.h"
#include "delegates/cpu/native_kernels.h"
#include "delegates/cpu/native_winograd.h"
#include "nn/ops/registry.h"
#include "runtime/buffer.h"
#include "runtime/delegate.h"
#include "runtime/thread_pool.h"

namespace nn::cpu {

struct RuntimeDeleter {
  void operator()(xnn_runtime* r) const {
    if (r) xnn_delete_runtime(r);
  }
};
struct SubgraphDeleter {
  void operator()(xnn_subgraph* s) const {
    if (s) xnn_delete_subgraph(s);
  }
};

// The ops of native and reference steps with their buffers, bound by prepare(): run() is
// one call per op.
struct KernelCall {  // a native kernel (native_kernels.h)
  uint32_t op = 0;
  const NativeOp* kernel = nullptr;
  NativeArgs args;
};
struct DataCall {  // a native data op (native_data.h)
  uint32_t op = 0;
  const NativeDataOp* data = nullptr;
  NativeDataArgs args;
};
using NativeCall = std::variant<KernelCall, DataCall>;
struct ReferenceCall {  // a reference kernel (OpRegistry)
  uint32_t op = 0;
  const OpDef* def = nullptr;
  std::vector<const void*> in;
  std::vector<void*> out;
};

// Step kinds (also the labels given to group_by_label).
enum StepKind : int { kReferenceStep = 0, kXnnStep = 1, kNativeStep = 2 };

struct Step {
  StepKind kind = kReferenceStep;
  std::vector<uint32_t> ops;      // in execution order (fused activations included)
  std::vector<uint32_t> inputs;   // non-static operands read, produced before the step
  std::vector<uint32_t> outputs;  // operands produced here and read later
  std::string label;
  // Too little work to share: runs on the calling thread, the pool left asleep or spinning
  // (waking it and waiting for it cost more than the second thread saves).
  bool on_caller = false;
  // XNNPACK step
  std::unique_ptr<xnn_runtime, RuntimeDeleter> runtime;
  std::vector<uint32_t> external_operands;  // external id -> operand
  std::vector<xnn_external_value> external_values;
  // native / reference step
  std::vector<NativeCall> native_calls;
  std::vector<ReferenceCall> reference_calls;
  double last_ms = 0;
  // Profiled with a pool: StepTiming's busy_ms, jobs, serial_jobs and wait_ms of the last run.
  std::vector<double> last_busy_ms;
  uint32_t last_jobs = 0, last_serial_jobs = 0;
  double last_wait_ms = 0;
};

// One live op of the partition as the passes see it: how it runs, and once it heads a
// fusion, what it absorbed. Ops fused into another keep their record (a later pass may
// read it) but run as part of their head (CpuPartition::fused_into_).
struct FusedOp {
  uint32_t op = 0;
  StepKind step = kReferenceStep;   // the kind of step it runs in
  bool lowers = false;              // XNNPACK could run it: it clamps its own output
  NativeKind native = NativeKind::kNone;
  Epilogue epilogue;                // lo/hi: its clamp (own fuse code, folded RELU*); native: the rest
  std::vector<uint32_t> chain;      // ops fused into it, in execution order
  std::optional<uint32_t> output;   // the operand it writes after fusion (else its own output)
  std::optional<uint32_t> residual; // the operand its epilogue adds
  std::optional<uint32_t> resize;   // a pointwise conv run before this resize (NativeConvThenResize)
  std::optional<ScaledInput> gated; // a 1x1 conv reading x * gate (+ sum) in place
  std::optional<uint32_t> depthwise;  // a conv running the depthwise conv it feeds (NativeExpandDepthwise)
  Epilogue depthwise_epilogue;        // that depthwise's clamp and epilogue
  std::optional<uint32_t> project;    // and the pointwise conv reading the depthwise's output
  Epilogue project_epilogue;          // that conv's epilogue
  std::optional<uint32_t> channel_scale;  // a per-output-channel constant folded into the weights
  std::unique_ptr<NativeOp> kernel;      // native ops
  std::unique_ptr<NativeDataOp> data;    // native data ops (native_data.h)
};

class CpuPartition final : public CompiledPartition {
 public:
  CpuPartition(const Model& model, const PartitionSpec& spec, const CompileOptions& options)
      : model_(model),
        spec_(spec),
        options_(options),
        isa_(isa_of(options.cpu)),
        statics_([this](uint32_t o) { return static_data(o); }) {}

  // Builds the steps; ops in `force_reference` skip XNNPACK. kUnsupportedOp with
  // *retry_op set means: that op failed to lower, build again without it.
  Status build(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference, int64_t* retry_op);

  Status prepare(std::span<void* const> buffers) override;
  Status run() override;
  std::vector<StepTiming> step_timings() const override;
  std::vector<StepTiming> kernels() const override;
  uint64_t arena_bytes() const override { return arena_.size(); }

 private:
  // The native kernels' ISA and kernel-form switches: CpuOptions' choices where the CPU has them.
  static NativeIsa isa_of(const CpuOptions& cpu);

  // The passes of build(), in order. Each fusion pass makes some records heads of what
  // they absorb; a record already absorbed (fused_into_) takes part in no later pass.
  Status label_ops(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference);
  void fuse_int8_residual_adds();
  void fuse_reshapes_into_data_ops();
  void fuse_int8_table_dequantize();
  void fuse_int8_expand_depthwise();
  void fuse_int8_conv_tables();
  void fuse_concat_affine();
  void fuse_conv_before_resize();
  void fuse_add_mean();
  void native_global_means();
  void fuse_se_gates();
  void fuse_epilogues();
  // The LOGISTIC and MUL computing out * sigmoid(out) (SiLU), when they are out's only
  // readers and the sigmoid is read by the MUL alone: a swish epilogue.
  std::optional<std::pair<uint32_t, uint32_t>> swish_after(uint32_t out) const;
  // The ops computing GELU of out, each the only reader of the one before, out read by
  // them alone: out * (1 + erf(out / sqrt 2)) * 0.5 (five ops), or the tanh form
  // out * (1 + tanh(sqrt(2 / pi) (out + 0.044715 POW(out, 3)))) * 0.5 (eight ops); the
  // last two MULs in either order. A GELU epilogue.
  struct GeluMatch {
    std::vector<uint32_t> ops;  // in execution order
    bool tanh_form = false;
  };
  std::optional<GeluMatch> gelu_after(uint32_t out) const;
  // When op k is of `type`, MUL (with no fuse code) or ADD (any fuse code: the caller
  // applies it), and combines out with a constant of one value per channel of out's last
  // axis: that constant.
  std::optional<uint32_t> channel_constant_of(OperationType type, uint32_t k, uint32_t out) const;
  // Whether live op k can be absorbed: not yet absorbed, heading nothing.
  bool fusable(uint32_t k) const {
    auto f = ops_.find(k);
    return f != ops_.end() && !absorbed(k) && f->second.chain.empty();
  }
  void fuse_expand_depthwise();
  // The pointwise conv reading a fused depthwise's output (rec(k).depthwise), when it can
  // run on its rows as they come (NativeExpandDepthwise::add_projection); -1 otherwise.
  int64_t projection_of(uint32_t k) const;
  // LayerNorm over the last axis written as ops (native_layer_norm.h), from its first MEAN.
  void fuse_layer_norm();
  Status make_native_kernels();
  void group_steps();

  // What runs head op k (an op not fused into another): "native conv AVX-512", "xnnpack", ...
  std::string kernel_name(uint32_t k) const;
  const void* static_data(uint32_t operand) const {
    const Operand& o = model_.operands[operand];
    if (o.is_constant()) return o.data;
    auto it = folded_.find(operand);
    return it == folded_.end() ? nullptr : it->second.data();
  }
  Status fold_constants();
  Status plan_memory();
  Status build_xnn_step(Step& step, int64_t* retry_op);

  FusedOp& rec(uint32_t k) { return ops_.at(k); }
  bool absorbed(uint32_t k) const { return fused_into_.count(k) > 0; }
  // Whether operand o is read only by one op and not visible outside the partition.
  bool internal_single_use(uint32_t o) const {
    auto r = readers_.find(o);
    return r != readers_.end() && r->second.size() == 1 && !partition_outputs_.count(o) &&
           !model_outputs_.count(o);
  }
  void absorb(uint32_t head, uint32_t k) {
    fused_into_[k] = head;
    rec(head).chain.push_back(k);
  }
  Status run_steps();
  // Effective reads and writes after fusion: a head reads what its fused ops read (the
  // residual, a gated input's parts) and writes the last fused op's output.
  std::vector<uint32_t> writes(uint32_t k) const;
  std::vector<uint32_t> reads(uint32_t k) const;
  uint32_t written(const FusedOp& r) const { return r.output ? *r.output : model_.operations[r.op].outputs[0]; }

  const Model& model_;
  PartitionSpec spec_;
  CompileOptions options_;
  NativeIsa isa_;  // the native kernels' variants (options_.cpu and the CPU)
  StaticLookup statics_;
  std::map<uint32_t, AlignedBuffer> folded_;  // values computed at compile time
  std::set<uint32_t> folded_ops_;
  std::map<uint32_t, std::vector<uint32_t>> readers_;  // operand -> ops (whole model)
  std::set<uint32_t> partition_outputs_, model_outputs_;
  std::vector<uint32_t> live_;              // ops left after folding, in execution order
  std::map<uint32_t, FusedOp> ops_;         // live op -> its record
  std::map<uint32_t, uint32_t> fused_into_;  // absorbed op -> the head running it
  std::map<uint32_t, void*> internal_;        // tensors between steps of this partition, in arena_
  std::map<uint32_t, void*> scratch_;         // native head op -> its NativeArgs::scratch, in arena_
  AlignedBuffer arena_;
  std::vector<Step> steps_;
  ParallelChoice parallel_choice_;  // CpuOptions::adaptive_threads
};

}  // namespace nn::cpu
