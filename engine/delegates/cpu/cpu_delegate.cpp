// The CPU delegate: a partition becomes a few steps, each either ONE XNNPACK runtime
// (every op XNNPACK does exactly, lowered into one subgraph with its own memory plan),
// a run of nnpipe's native kernels (dense/depthwise/transpose convs, native_kernels.h;
// the copies, MEAN and ERF XNNPACK lacks, native_data.h) or a run of reference kernels.
// Before that, ops whose inputs are all constant are folded at compile time (e.g.
// DEQUANTIZE of FP16 weights). Each live op gets a FusedOp record; named fusion passes
// make some records heads of the ops after them (a RELU* into its producer's clamp, a
// HARD_SWISH / residual ADD into a native kernel's epilogue, ...); CpuOptions turns each
// native kernel and fusion off.
//
//   ops --fold constants--> live ops --label_ops: xnn|native|ref--> fuse_* passes
//       --> make_native_kernels --> group_steps (group_by_label) --> plan_memory
//       --> one XNNPACK runtime per XNNPACK step; prepare() binds each native / reference
//       op's buffers into one record (NativeArgs, ...) that run() hands its kernel.
//   step boundary tensors: partition boundary -> session buffer, else the arena here
//   (runtime/arena_planner.h), which also holds each native kernel's scratch while it
//   runs; everything inside an XNNPACK step stays in XNNPACK's workspace.
//
// Files: native_choice.cpp (which ops a native kernel runs), cpu_passes.cpp (folding,
// labelling, the fusion passes, building native kernels), cpu_steps.cpp (steps, XNNPACK
// lowering glue, memory plan, prepare/run), this file (the pass pipeline, what --explain
// and --profile show, the Delegate).
#include <xnnpack.h>

#include <map>
#include <string>

#include "delegates/cpu/cpu_partition.h"
#include "delegates/cpu/native_dot_conv.h"
#include "delegates/cpu/native_grouped_conv.h"
#include "runtime/buffer.h"
#include "runtime/partitioner.h"  // log_line

namespace nn {

static_assert(kTensorSlackBytes >= XNN_EXTRA_BYTES, "session buffers must carry XNNPACK's read slack");

namespace cpu {
namespace {

const Status& xnnpack_ready() {
  static const Status status = [] {
    xnn_status s = xnn_initialize(nullptr);
    if (s != xnn_status_success)
      return Status(StatusCode::kDelegateUnavailable, std::string("xnn_initialize: ") + xnn_status_name(s));
    return Status::ok();
  }();
  return status;
}

}  // namespace

NativeIsa CpuPartition::isa_of(const CpuOptions& cpu) {
  const int half_width = cpu.avx512_half_width == CpuOptions::HalfWidth::kAuto ? -1
                         : cpu.avx512_half_width == CpuOptions::HalfWidth::kOn ? 1
                                                                               : 0;
  NativeIsa isa = NativeIsa::with(cpu.avx512, half_width, cpu.depthwise_two_rows, cpu.avx2_8_columns, cpu.avx_vnni);
  isa.edge_taps = cpu.edge_taps;
  isa.transpose_tiles = cpu.transpose_tiles;
  isa.small_image_rows = cpu.small_image_rows;
  isa.k_block_rows = cpu.k_block_rows;
  isa.gated_rows = cpu.gated_rows;
  isa.serial_row_tiles = cpu.serial_row_tiles;
  isa.amx = cpu.amx && isa.avx512 && amx_int8_cpu();
  isa.k_blocks = cpu.k_blocks;
  isa.avx2_k_blocks = cpu.avx2_k_blocks;
  isa.small_image_im2col = cpu.small_image_im2col;
  isa.grouped_pairs = cpu.grouped_pairs;
  isa.expand_depthwise_pairs = cpu.expand_depthwise_pairs;
  isa.dot_conv = cpu.dot_conv;
  isa.depthwise_pixel_pairs = cpu.depthwise_pixel_pairs;
  return isa;
}

// The pipeline above; each fusion pass runs unless its CpuOptions switch is off.
Status CpuPartition::build(bool use_xnnpack, const std::map<uint32_t, std::string>& force_reference,
                           int64_t* retry_op) {
  *retry_op = -1;
  NN_RETURN_IF_ERROR(fold_constants());
  for (uint32_t k = 0; k < model_.operations.size(); ++k)
    for (uint32_t i : model_.operations[k].inputs) readers_[i].push_back(k);
  partition_outputs_ = std::set<uint32_t>(spec_.outputs.begin(), spec_.outputs.end());
  model_outputs_ = std::set<uint32_t>(model_.outputs.begin(), model_.outputs.end());
  NN_RETURN_IF_ERROR(label_ops(use_xnnpack, force_reference));
  if (options_.cpu.native_int8_residual ||
      (options_.cpu.native_int8_residual_table && options_.cpu.native_int8_add_table))
    fuse_int8_residual_adds();
  if (options_.cpu.fold_reshapes) fuse_reshapes_into_data_ops();
  if (options_.cpu.int8_table_dequantize) fuse_int8_table_dequantize();
  if (options_.cpu.int8_expand_depthwise) fuse_int8_expand_depthwise();
  if (options_.cpu.int8_conv_table) fuse_int8_conv_tables();
  if (options_.cpu.concat_affine) fuse_concat_affine();
  if (options_.cpu.conv_before_resize) fuse_conv_before_resize();
  if (native_conv_supported() && options_.cpu.native_kernels && options_.cpu.add_mean) fuse_add_mean();
  if (native_conv_supported() && options_.cpu.native_kernels && options_.cpu.native_mean) native_global_means();
  if (options_.cpu.se_fusion) fuse_se_gates();  // before the epilogues: what it absorbs fuses nowhere else
  if (options_.cpu.layer_norm) fuse_layer_norm();  // before the epilogues: its ADD is no residual
  fuse_epilogues();
  if (options_.cpu.expand_depthwise) fuse_expand_depthwise();
  NN_RETURN_IF_ERROR(make_native_kernels());
  group_steps();
  NN_RETURN_IF_ERROR(plan_memory());
  for (Step& step : steps_)
    if (step.kind == kXnnStep) NN_RETURN_IF_ERROR(build_xnn_step(step, retry_op));
  return Status::ok();
}

std::vector<StepTiming> CpuPartition::step_timings() const {
  std::vector<StepTiming> t;
  if (!options_.profile) return t;
  for (const Step& s : steps_) {
    // Profiled steps hold one head op and its fused chain (or XNNPACK's one node).
    t.push_back({s.label, s.last_ms, s.ops, kernel_name(s.ops.front()), s.last_busy_ms, s.last_jobs,
                 s.last_serial_jobs, s.last_wait_ms});
  }
  return t;
}

std::string CpuPartition::kernel_name(uint32_t k) const {
  const FusedOp& f = ops_.at(k);
  if (f.data) return f.data->kernel();
  if (f.native == NativeKind::kNone) return f.lowers ? "xnnpack" : "reference";
  std::string name;
  switch (f.native) {
    case NativeKind::kConv:
      name = model_.operations[k].type == OperationType::FULLY_CONNECTED ? "native fully connected"
             : f.depthwise && f.project ? "native conv+depthwise+conv"
             : f.depthwise ? "native conv+depthwise"
             : f.resize  ? "native conv+resize"
             : f.gated   ? "native conv (gated input)"
             : model_.operations[k].type == OperationType::GROUPED_CONV_2D ? "native grouped conv"
                                                                             : "native conv";
      break;
    case NativeKind::kDepthwise: name = "native depthwise"; break;
    case NativeKind::kDeconv: name = "native deconv"; break;
    case NativeKind::kResize: name = "native resize"; break;
    case NativeKind::kAddMean: name = f.residual ? "native add+mean" : "native global mean"; break;
    case NativeKind::kNone: break;
  }
  const auto* winograd = dynamic_cast<const NativeWinograd*>(f.kernel.get());
  if (winograd) name = "native winograd F(" + std::to_string(winograd->output_tile()) + "x" +
                       std::to_string(winograd->output_tile()) + ",3x3)";
  name += isa_.avx512 ? " AVX-512" : " AVX2";
  if (winograd && (winograd->shape().dilation_h > 1 || winograd->shape().dilation_w > 1)) {
    const NativeConvShape& s = winograd->shape();
    name += ", dilation " + std::to_string(s.dilation_h);
    if (s.dilation_w != s.dilation_h) name += "x" + std::to_string(s.dilation_w);
  }
  if (dynamic_cast<const NativeGroupedConv*>(f.kernel.get())) name += ", group pairs";
  if (dynamic_cast<const NativeDotConv*>(f.kernel.get())) name += ", a dot per pixel";
  // The variants a CpuOptions switch picks, so --explain and --profile show them.
  const auto* conv = dynamic_cast<const NativeConv*>(f.kernel.get());
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && conv && conv->ymm_last_panel())
    name += ", ymm last panel";
  if (f.native == NativeKind::kConv && conv && conv->eight_column_panel()) name += ", 8-column last panel";
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && conv && conv->k_block()) name += ", k-blocked";
  if (f.native == NativeKind::kConv && f.gated && !f.gated->sum && conv && conv->gated_rows())
    name += ", gate on rows";
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && conv && conv->edge_taps()) name += ", edge taps";
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && conv &&
      conv->im2col_once(size_t(std::max(1, options_.threads))))
    name += ", im2col once";
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && conv) {
    const size_t threads = size_t(std::max(1, options_.threads));
    if (conv->splits_rows(threads)) name += ", rows per thread";
    if (conv->k_block_rows(threads)) name += ", one row piece per thread";
    if (conv->serial_row_tiles(threads)) name += ", row tiles outer";
  }
  if (f.native == NativeKind::kConv && !f.depthwise && !f.resize && (conv || winograd)) {
    const NativeConvShape& s = conv ? conv->shape() : winograd->shape();
    const Dims& filter = model_.operands[model_.operations[k].inputs[1]].dims;
    if (filter.size() == 4 && (s.kernel_h != filter[1] || s.kernel_w != filter[2]))
      name += ", " + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " live taps";
  }
  if (f.native == NativeKind::kDepthwise && f.kernel &&
      static_cast<const NativeDepthwise*>(f.kernel.get())->row_pairs())
    name += ", row pairs";
  if (f.native == NativeKind::kDepthwise && f.kernel &&
      static_cast<const NativeDepthwise*>(f.kernel.get())->pixel_pairs())
    name += ", pixel pairs";
  if (const auto* fused = dynamic_cast<const NativeExpandDepthwise*>(f.kernel.get()); fused && fused->row_pairs())
    name += ", row pairs";
  return name;
}

std::vector<StepTiming> CpuPartition::kernels() const {
  std::vector<StepTiming> t;
  for (const Step& s : steps_)
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const uint32_t k = s.ops[i];
      if (absorbed(k)) continue;
      StepTiming e{op_label(model_, k), 0, {k}, kernel_name(k)};
      for (size_t j = i + 1; j < s.ops.size() && absorbed(s.ops[j]); ++j) e.ops.push_back(s.ops[j]);
      t.push_back(std::move(e));
    }
  return t;
}

namespace {

class CpuDelegate final : public Delegate {
 public:
  explicit CpuDelegate(bool use_xnnpack) : use_xnnpack_(use_xnnpack) {}
  std::string name() const override { return use_xnnpack_ ? "cpu" : "reference"; }
  Status available() const override { return Status::ok(); }

  SupportResult supports(const Model& model, uint32_t op_index) const override {
    const OpDef* def = OpRegistry::instance().find(model.operations[op_index].type);
    if (def && def->reference) return SupportResult::yes();
    if (use_xnnpack_ && xnnpack_ready().is_ok()) {
      StaticLookup constants = [&](uint32_t o) -> const void* {
        return model.operands[o].is_constant() ? model.operands[o].data : nullptr;
      };
      if (xnn_can_lower(model, op_index, constants).supported) return SupportResult::yes();
    }
    return SupportResult::no("no kernel for " +
                             std::string(operation_type_name(model.operations[op_index].type)));
  }

  Result<std::unique_ptr<CompiledPartition>> compile(const Model& model, const PartitionSpec& spec,
                                                     const CompileOptions& options) override {
    const bool xnn = use_xnnpack_ && xnnpack_ready().is_ok();
    // The oracle keeps IEEE denormals.
    CompileOptions own = options;
    if (!use_xnnpack_) own.cpu.flush_denormals = false;
    std::map<uint32_t, std::string> force_reference;
    for (size_t attempt = 0; attempt <= spec.ops.size() + 1; ++attempt) {
      auto partition = std::make_unique<CpuPartition>(model, spec, own);
      int64_t retry_op = -1;
      Status s = partition->build(xnn, force_reference, &retry_op);
      if (s.is_ok()) return std::unique_ptr<CompiledPartition>(std::move(partition));
      if (retry_op < 0 || force_reference.count(static_cast<uint32_t>(retry_op))) return s;
      // XNNPACK refused a node that xnn_can_lower accepted: run that op on the reference
      // kernels and say so.
      log_line(log_, op_label(model, static_cast<uint32_t>(retry_op)) +
                         " runs on reference kernels inside cpu: " + s.message());
      force_reference[static_cast<uint32_t>(retry_op)] = s.message();
    }
    return Status(StatusCode::kInternal, "cpu delegate: partition did not converge");
  }

 private:
  bool use_xnnpack_;
  std::function<void(const std::string&)> log_;
};

}  // namespace
}  // namespace cpu

std::unique_ptr<Delegate> make_cpu_delegate() {
  return std::make_unique<cpu::CpuDelegate>(true);
}
std::unique_ptr<Delegate> make_reference_delegate() {
  return std::make_unique<cpu::CpuDelegate>(false);
}

}  // namespace nn
