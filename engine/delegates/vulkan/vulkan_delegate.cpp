// The Vulkan delegate: GLSL compute shaders (shaders/*.comp, compiled to SPIR-V by glslc at
// build time) on any Vulkan 1.1 device. A partition compiles to:
//
//   ops --fuse activations--> steps (one dispatch each: vk_conv/eltwise/pool/resize.cpp)
//       --plan tensor memory--> one device buffer for tensors (reused by lifetime),
//                               one for constants (weights uploaded once)
//       --> one pipeline per step (shapes as specialization constants), one descriptor
//           set per step, and ONE command buffer recorded here for the whole partition:
//           staging -> tensors, dispatch, barrier, dispatch, ..., tensors -> staging.
//
// prepare() binds the session's boundary buffers; run() copies inputs into the upload
// staging buffer, submits, waits, and copies outputs out of the readback staging buffer.
// Without Vulkan at build time (no NN_HAVE_VULKAN) the delegate compiles to a stub that
// reports itself unavailable, and the partitioner leaves every op to the CPU.
#include <memory>
#include <string>

#include "runtime/delegate.h"

#ifdef NN_HAVE_VULKAN

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "delegates/vulkan/vk_context.h"
#include "delegates/vulkan/vk_ops.h"
#include "runtime/arena_planner.h"

namespace nn {
namespace vk {
namespace {

constexpr uint32_t kLocalSize = 64;  // local_size_x of every shader (common.glsl)
constexpr uint32_t kMaxBindings = 4;

const std::vector<OpLowering>& lowerings() {
  static const std::vector<OpLowering> all = [] {
    std::vector<OpLowering> v;
    add_conv_lowerings(v);
    add_eltwise_lowerings(v);
    add_pool_lowerings(v);
    add_resize_lowerings(v);
    return v;
  }();
  return all;
}

const OpLowering* find_lowering(OperationType type) {
  for (const OpLowering& l : lowerings())
    if (l.type == type) return &l;
  return nullptr;
}

// Whether op k can run here; limits == nullptr skips the device limits.
SupportResult check_op(const Model& m, uint32_t k, const VkPhysicalDeviceLimits* limits) {
  const Operation& op = m.operations[k];
  const OpLowering* lowering = find_lowering(op.type);
  if (!lowering)
    return SupportResult::no(std::string(operation_type_name(op.type)) + " has no Vulkan shader");
  auto check_tensor = [&](uint32_t operand, const std::string& what) -> SupportResult {
    const Operand& o = m.operands[operand];
    if (!is_tensor_type(o.type)) return SupportResult::yes();
    // Constant TENSOR_INT32 inputs are parameters read on the host (MEAN's axes,
    // TRANSPOSE_CONV_2D's output_shape); the lowerings never upload them as data.
    const bool host_int = o.type == OperandType::TENSOR_INT32 && o.is_constant();
    if (o.type != OperandType::TENSOR_FLOAT32 && !host_int)
      return SupportResult::no(what + " is " + std::string(operand_type_name(o.type)) +
                               " (the Vulkan delegate runs TENSOR_FLOAT32)");
    for (uint32_t d : o.dims)
      if (d == 0) return SupportResult::no(what + " has a zero dim " + dims_to_string(o.dims));
    const uint64_t bytes = o.byte_size();
    if (bytes >= (uint64_t(1) << 31) || (limits && bytes > limits->maxStorageBufferRange))
      return SupportResult::no(what + " " + dims_to_string(o.dims) +
                               " is larger than the device's storage buffer range");
    return SupportResult::yes();
  };
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!m.has_value(op.inputs[i])) continue;
    SupportResult s = check_tensor(op.inputs[i], "input " + std::to_string(i));
    if (!s.supported) return s;
  }
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    SupportResult s = check_tensor(op.outputs[i], "output " + std::to_string(i));
    if (!s.supported) return s;
  }
  return lowering->supports(m, op);
}

bool is_clamp_activation(OperationType t) {
  return t == OperationType::RELU || t == OperationType::RELU1 || t == OperationType::RELU6;
}
bool is_unary_activation(OperationType t) {
  return t == OperationType::HARD_SWISH || t == OperationType::LOGISTIC;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

struct Step {
  uint32_t op = 0;              // the op that owns the dispatch
  std::vector<uint32_t> fused;  // activation ops folded into it
  uint32_t writes = 0;          // the operand it writes (the last fused op's output)
  std::vector<uint32_t> reads;  // non-constant operands it reads
  Activation fused_act;         // what the fused ops add
  Dispatch dispatch;
  std::string label;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  uint32_t groups_x = 1, groups_y = 1;
};

// Copies between a staging buffer and the tensor buffer, and the session buffer it serves.
struct Transfer {
  uint32_t operand = 0;
  uint64_t staging_offset = 0, tensor_offset = 0, bytes = 0;
  void* host = nullptr;
};

class VulkanPartition final : public CompiledPartition, private LoweringContext {
 public:
  explicit VulkanPartition(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)), device_(ctx_->device()) {}
  ~VulkanPartition() override;

  Status build(const Model& model, const PartitionSpec& spec, const CompileOptions& options);
  Status prepare(std::span<void* const> buffers) override;
  Status run() override;
  std::vector<StepTiming> step_timings() const override;
  uint64_t arena_bytes() const override { return tensor_bytes_; }

 private:
  // LoweringContext
  BufferRange operand(uint32_t operand) override;
  BufferRange upload(std::span<const uint8_t> bytes) override;

  Status plan_steps();
  void plan_tensor_memory();
  Status create_buffers();
  Status create_pipelines();
  Status record_commands();

  std::shared_ptr<Context> ctx_;  // first: outlives every Vulkan object below
  VkDevice device_;
  const Model* model_ = nullptr;
  PartitionSpec spec_;
  bool profile_ = false;
  uint64_t alignment_ = 64;

  std::vector<Step> steps_;
  std::map<uint32_t, uint64_t> tensor_offset_;  // non-constant operand -> offset in tensors_
  uint64_t tensor_bytes_ = 0;
  std::map<uint32_t, BufferRange> constant_range_;  // model constant -> its upload
  std::vector<uint8_t> constant_blob_;              // everything upload() was given

  Buffer tensors_, constants_, staging_in_, staging_out_;
  std::vector<Transfer> inputs_, outputs_;

  VkDescriptorSetLayout set_layouts_[kMaxBindings + 1] = {};
  VkPipelineLayout pipeline_layouts_[kMaxBindings + 1] = {};
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  double timestamp_ns_ = 1;
  std::vector<double> step_ms_;
};

VulkanPartition::~VulkanPartition() {
  for (Step& s : steps_)
    if (s.pipeline) vkDestroyPipeline(device_, s.pipeline, nullptr);
  for (uint32_t i = 0; i <= kMaxBindings; ++i) {
    if (pipeline_layouts_[i]) vkDestroyPipelineLayout(device_, pipeline_layouts_[i], nullptr);
    if (set_layouts_[i]) vkDestroyDescriptorSetLayout(device_, set_layouts_[i], nullptr);
  }
  if (descriptor_pool_) vkDestroyDescriptorPool(device_, descriptor_pool_, nullptr);
  if (command_pool_) vkDestroyCommandPool(device_, command_pool_, nullptr);  // frees commands_
  if (fence_) vkDestroyFence(device_, fence_, nullptr);
  if (queries_) vkDestroyQueryPool(device_, queries_, nullptr);
}

BufferRange VulkanPartition::operand(uint32_t index) {
  const Operand& o = model_->operands[index];
  if (o.is_constant()) {
    auto it = constant_range_.find(index);
    if (it != constant_range_.end()) return it->second;
    BufferRange r = upload({o.data, o.byte_size()});
    constant_range_[index] = r;
    return r;
  }
  return {BufferRange::kTensors, tensor_offset_.at(index), o.byte_size()};
}

BufferRange VulkanPartition::upload(std::span<const uint8_t> bytes) {
  const uint64_t offset = align_up(constant_blob_.size(), alignment_);
  constant_blob_.resize(offset + bytes.size());
  std::copy(bytes.begin(), bytes.end(), constant_blob_.begin() + static_cast<ptrdiff_t>(offset));
  return {BufferRange::kConstants, offset, bytes.size()};
}

// Which ops get a dispatch, and which RELU/RELU1/RELU6/HARD_SWISH/LOGISTIC fold into the
// op before them: when the intermediate tensor has that one reader and is not visible
// outside the partition, the producer clamps (and then applies the unary) itself.
Status VulkanPartition::plan_steps() {
  const Model& m = *model_;
  std::set<uint32_t> in_partition(spec_.ops.begin(), spec_.ops.end());
  std::set<uint32_t> visible(spec_.outputs.begin(), spec_.outputs.end());
  visible.insert(m.outputs.begin(), m.outputs.end());
  std::map<uint32_t, std::vector<uint32_t>> readers;
  for (uint32_t k = 0; k < m.operations.size(); ++k)
    for (uint32_t i : m.operations[k].inputs) readers[i].push_back(k);

  std::set<uint32_t> fused;
  for (uint32_t k : spec_.ops) {
    if (fused.count(k)) continue;
    const Operation& op = m.operations[k];
    SupportResult s = check_op(m, k, &ctx_->limits());
    if (!s.supported) return Status(StatusCode::kDelegateIncompatible, op_label(m, k) + ": " + s.reason);
    NN_CHECK_OR_RETURN(op.outputs.size() == 1, StatusCode::kDelegateIncompatible,
                       op_label(m, k) + ": expected one output");
    Step step;
    step.op = k;
    bool unary_taken = is_unary_activation(op.type);
    uint32_t out = op.outputs[0];
    for (;;) {
      if (visible.count(out)) break;
      const std::vector<uint32_t>& r = readers[out];
      if (r.size() != 1 || !in_partition.count(r[0]) || fused.count(r[0])) break;
      if (!check_op(m, r[0], &ctx_->limits()).supported) break;
      const OperationType t = m.operations[r[0]].type;
      if (unary_taken || !(is_clamp_activation(t) || is_unary_activation(t))) break;
      if (is_clamp_activation(t)) {
        const Activation a = fuse_activation(t == OperationType::RELU    ? 1
                                             : t == OperationType::RELU1 ? 2
                                                                         : 3);
        step.fused_act.lo = std::max(step.fused_act.lo, a.lo);
        step.fused_act.hi = std::min(step.fused_act.hi, a.hi);
      } else {
        step.fused_act.kind = t == OperationType::HARD_SWISH ? Activation::kHardSwish : Activation::kLogistic;
        unary_taken = true;
      }
      fused.insert(r[0]);
      step.fused.push_back(r[0]);
      out = m.operations[r[0]].outputs[0];
    }
    step.writes = out;
    for (uint32_t i : op.inputs)
      if (m.has_value(i) && !m.operands[i].is_constant() && is_tensor_type(m.operands[i].type) &&
          std::find(step.reads.begin(), step.reads.end(), i) == step.reads.end())
        step.reads.push_back(i);
    step.label = op_label(m, k);
    for (uint32_t f : step.fused) step.label += " + " + op_label(m, f);
    steps_.push_back(std::move(step));
  }
  // Every operand a step reads is a partition input or written by an earlier step.
  std::set<uint32_t> available(spec_.inputs.begin(), spec_.inputs.end());
  for (const Step& s : steps_) {
    for (uint32_t i : s.reads)
      NN_CHECK_OR_RETURN(available.count(i), StatusCode::kInternal,
                         s.label + ": reads operand " + std::to_string(i) +
                             " that is neither a partition input "
                             "nor written before it");
    available.insert(s.writes);
  }
  for (uint32_t o : spec_.outputs)
    NN_CHECK_OR_RETURN(available.count(o), StatusCode::kInternal,
                       "partition output operand " + std::to_string(o) + " is written by no step");
  return Status::ok();
}

// Tensors share one buffer (runtime/arena_planner.h): each gets [offset, offset + size)
// for the steps it lives through (partition inputs from the upload copy, outputs until the
// readback copy); tensors whose lifetimes overlap never overlap in memory.
void VulkanPartition::plan_tensor_memory() {
  // Positions: 0 = the upload copy, step i = i + 1, steps + 1 = the readback copy.
  std::map<uint32_t, ArenaTensor> lives;
  const size_t end = steps_.size() + 1;
  auto touch = [&](uint32_t o, size_t t) {
    auto it = lives.find(o);
    if (it == lives.end()) {
      lives[o] = {t, t, std::max<uint64_t>(model_->operands[o].byte_size(), 4)};
    } else {
      it->second.first = std::min(it->second.first, t);
      it->second.last = std::max(it->second.last, t);
    }
  };
  for (uint32_t o : spec_.inputs) touch(o, 0);
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (uint32_t o : steps_[s].reads) touch(o, s + 1);
    touch(steps_[s].writes, s + 1);
  }
  for (uint32_t o : spec_.outputs) touch(o, end);

  std::vector<ArenaTensor> tensors;
  for (const auto& [o, l] : lives) tensors.push_back(l);
  const ArenaPlan plan = plan_arena(tensors, alignment_);
  size_t i = 0;
  for (const auto& [o, l] : lives) tensor_offset_[o] = plan.offsets[i++];
  tensor_bytes_ = plan.bytes;
}

Status VulkanPartition::create_buffers() {
  const VkBufferUsageFlags storage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  NN_ASSIGN_OR_RETURN(tensors_, ctx_->create_buffer(std::max<uint64_t>(tensor_bytes_, 4),
                                                    storage | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                                    MemoryKind::kDevice));
  const uint64_t constant_bytes = std::max<uint64_t>(constant_blob_.size(), 4);
  NN_ASSIGN_OR_RETURN(
      constants_,
      ctx_->create_buffer(constant_bytes, storage | VK_BUFFER_USAGE_TRANSFER_DST_BIT, MemoryKind::kDevice));
  uint64_t in_bytes = 0, out_bytes = 0;
  for (uint32_t o : spec_.inputs) {
    const uint64_t bytes = model_->operands[o].byte_size();
    inputs_.push_back({o, in_bytes, tensor_offset_.at(o), bytes, nullptr});
    in_bytes = align_up(in_bytes + bytes, alignment_);
  }
  for (uint32_t o : spec_.outputs) {
    const uint64_t bytes = model_->operands[o].byte_size();
    outputs_.push_back({o, out_bytes, tensor_offset_.at(o), bytes, nullptr});
    out_bytes = align_up(out_bytes + bytes, alignment_);
  }
  NN_ASSIGN_OR_RETURN(staging_in_,
                      ctx_->create_buffer(std::max<uint64_t>(in_bytes, 4), VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                                          MemoryKind::kUpload));
  NN_ASSIGN_OR_RETURN(staging_out_,
                      ctx_->create_buffer(std::max<uint64_t>(out_bytes, 4), VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                          MemoryKind::kReadback));

  auto pool_info = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool_info.queueFamilyIndex = ctx_->queue_family();
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  NN_RETURN_IF_ERROR(
      check(vkCreateCommandPool(device_, &pool_info, nullptr, &command_pool_), "vkCreateCommandPool"));
  auto alloc = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  alloc.commandPool = command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  NN_RETURN_IF_ERROR(
      check(vkAllocateCommandBuffers(device_, &alloc, &commands_), "vkAllocateCommandBuffers"));
  auto fence_info = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
  NN_RETURN_IF_ERROR(check(vkCreateFence(device_, &fence_info, nullptr, &fence_), "vkCreateFence"));

  // Weights go up once, through a temporary staging buffer; the same command buffer is
  // re-recorded for the partition afterwards.
  if (!constant_blob_.empty()) {
    NN_ASSIGN_OR_RETURN(
        Buffer upload,
        ctx_->create_buffer(constant_blob_.size(), VK_BUFFER_USAGE_TRANSFER_SRC_BIT, MemoryKind::kUpload));
    std::copy(constant_blob_.begin(), constant_blob_.end(), upload.mapped());
    auto begin = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    NN_RETURN_IF_ERROR(check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer"));
    VkBufferCopy region{0, 0, constant_blob_.size()};
    vkCmdCopyBuffer(commands_, upload.handle(), constants_.handle(), 1, &region);
    NN_RETURN_IF_ERROR(check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer"));
    NN_RETURN_IF_ERROR(ctx_->submit_and_wait(commands_, fence_));
    NN_RETURN_IF_ERROR(check(vkResetFences(device_, 1, &fence_), "vkResetFences"));
    NN_RETURN_IF_ERROR(check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer"));
    constant_blob_.clear();
    constant_blob_.shrink_to_fit();
  }
  return Status::ok();
}

Status VulkanPartition::create_pipelines() {
  // One set layout / pipeline layout per binding count; one pool for every set.
  uint32_t descriptors = 0;
  for (const Step& s : steps_) descriptors += static_cast<uint32_t>(s.dispatch.bindings.size());
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(descriptors, 1u)};
  auto pool_info = make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  pool_info.maxSets = std::max<uint32_t>(static_cast<uint32_t>(steps_.size()), 1);
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  NN_RETURN_IF_ERROR(check(vkCreateDescriptorPool(device_, &pool_info, nullptr, &descriptor_pool_),
                           "vkCreateDescriptorPool"));

  for (Step& s : steps_) {
    const Dispatch& d = s.dispatch;
    const uint32_t n = static_cast<uint32_t>(d.bindings.size());
    NN_CHECK_OR_RETURN(n >= 1 && n <= kMaxBindings, StatusCode::kInternal, s.label + ": bad binding count");
    if (!set_layouts_[n]) {
      VkDescriptorSetLayoutBinding bindings[kMaxBindings];
      for (uint32_t b = 0; b < n; ++b)
        bindings[b] = {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
      auto info = make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
      info.bindingCount = n;
      info.pBindings = bindings;
      NN_RETURN_IF_ERROR(check(vkCreateDescriptorSetLayout(device_, &info, nullptr, &set_layouts_[n]),
                               "vkCreateDescriptorSetLayout"));
      auto layout = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
      layout.setLayoutCount = 1;
      layout.pSetLayouts = &set_layouts_[n];
      NN_RETURN_IF_ERROR(check(vkCreatePipelineLayout(device_, &layout, nullptr, &pipeline_layouts_[n]),
                               "vkCreatePipelineLayout"));
    }

    // Specialization constants: 0..3 the activation and TOTAL, then the shader's own.
    const Activation act = d.act;
    std::vector<uint32_t> values = {float_bits(act.lo), float_bits(act.hi), act.kind,
                                    static_cast<uint32_t>(d.items)};
    values.insert(values.end(), d.spec.begin(), d.spec.end());
    std::vector<VkSpecializationMapEntry> entries(values.size());
    for (uint32_t i = 0; i < values.size(); ++i) entries[i] = {i, i * 4, 4};
    VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(), values.size() * 4,
                              values.data()};
    NN_ASSIGN_OR_RETURN(VkShaderModule module, ctx_->shader_module(d.shader));
    auto info = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    info.stage = make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = &spec;
    info.layout = pipeline_layouts_[n];
    NN_RETURN_IF_ERROR(
        check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &s.pipeline),
              s.label + ": vkCreateComputePipelines(" + d.shader + ")"));

    auto alloc = make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    alloc.descriptorPool = descriptor_pool_;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layouts_[n];
    NN_RETURN_IF_ERROR(check(vkAllocateDescriptorSets(device_, &alloc, &s.set), "vkAllocateDescriptorSets"));
    VkDescriptorBufferInfo buffers[kMaxBindings];
    VkWriteDescriptorSet writes[kMaxBindings];
    for (uint32_t b = 0; b < n; ++b) {
      const BufferRange& r = d.bindings[b];
      buffers[b] = {r.arena == BufferRange::kTensors ? tensors_.handle() : constants_.handle(), r.offset,
                    std::max<uint64_t>(r.size, 4)};
      writes[b] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[b].dstSet = s.set;
      writes[b].dstBinding = b;
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &buffers[b];
    }
    vkUpdateDescriptorSets(device_, n, writes, 0, nullptr);

    // Work items over a 2-D grid of workgroups (item() in common.glsl flattens it).
    const VkPhysicalDeviceLimits& lim = ctx_->limits();
    const uint64_t groups = (d.items + kLocalSize - 1) / kLocalSize;
    s.groups_x = static_cast<uint32_t>(std::min<uint64_t>(groups, lim.maxComputeWorkGroupCount[0]));
    const uint64_t gy = (groups + s.groups_x - 1) / s.groups_x;
    NN_CHECK_OR_RETURN(
        gy <= lim.maxComputeWorkGroupCount[1] && d.items < (uint64_t(1) << 32),
        StatusCode::kDelegateIncompatible,
        s.label + ": " + std::to_string(d.items) + " work items exceed the device's dispatch limits");
    s.groups_y = static_cast<uint32_t>(gy);
  }
  return Status::ok();
}

Status VulkanPartition::record_commands() {
  const bool timestamps = profile_ && ctx_->limits().timestampComputeAndGraphics;
  if (timestamps) {
    auto info = make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = static_cast<uint32_t>(steps_.size() + 1);
    NN_RETURN_IF_ERROR(check(vkCreateQueryPool(device_, &info, nullptr, &queries_), "vkCreateQueryPool"));
    timestamp_ns_ = ctx_->limits().timestampPeriod;
  }
  auto begin = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  NN_RETURN_IF_ERROR(check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer"));
  auto barrier = [&](VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                     VkAccessFlags dst) {
    auto b = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    b.srcAccessMask = src;
    b.dstAccessMask = dst;
    vkCmdPipelineBarrier(commands_, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
  };
  if (queries_) vkCmdResetQueryPool(commands_, queries_, 0, static_cast<uint32_t>(steps_.size() + 1));

  std::vector<VkBufferCopy> regions;
  for (const Transfer& t : inputs_) regions.push_back({t.staging_offset, t.tensor_offset, t.bytes});
  if (!regions.empty())
    vkCmdCopyBuffer(commands_, staging_in_.handle(), tensors_.handle(), static_cast<uint32_t>(regions.size()),
                    regions.data());
  barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (queries_)
      vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_,
                          static_cast<uint32_t>(i));
    const uint32_t n = static_cast<uint32_t>(s.dispatch.bindings.size());
    vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, s.pipeline);
    vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layouts_[n], 0, 1, &s.set, 0,
                            nullptr);
    vkCmdDispatch(commands_, s.groups_x, s.groups_y, 1);
    // Each step reads what the one before wrote, and a later step may reuse the memory
    // an earlier one read (tensor memory is shared by lifetime): a full compute barrier.
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  if (queries_)
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_,
                        static_cast<uint32_t>(steps_.size()));
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT);
  regions.clear();
  for (const Transfer& t : outputs_) regions.push_back({t.tensor_offset, t.staging_offset, t.bytes});
  if (!regions.empty())
    vkCmdCopyBuffer(commands_, tensors_.handle(), staging_out_.handle(),
                    static_cast<uint32_t>(regions.size()), regions.data());
  barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  return check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
}

Status VulkanPartition::build(const Model& model, const PartitionSpec& spec, const CompileOptions& options) {
  model_ = &model;
  spec_ = spec;
  profile_ = options.profile;
  alignment_ = std::max<uint64_t>(64, ctx_->limits().minStorageBufferOffsetAlignment);
  NN_RETURN_IF_ERROR(plan_steps());
  plan_tensor_memory();
  for (Step& s : steps_) {
    const Operation& op = model.operations[s.op];
    Dispatch& d = s.dispatch;
    d.bindings.push_back(
        {BufferRange::kTensors, tensor_offset_.at(s.writes), model.operands[s.writes].byte_size()});
    NN_RETURN_IF_ERROR(find_lowering(op.type)->lower(*this, model, op, d).with_context(s.label));
    // The op's own clamp first, then what the fused activations add.
    d.act.lo = std::max(d.act.lo, s.fused_act.lo);
    d.act.hi = std::min(d.act.hi, s.fused_act.hi);
    if (s.fused_act.kind != Activation::kNone) d.act.kind = s.fused_act.kind;
    s.label += " [vulkan " + d.shader + "]";
  }
  NN_RETURN_IF_ERROR(create_buffers());
  NN_RETURN_IF_ERROR(create_pipelines());
  return record_commands();
}

Status VulkanPartition::prepare(std::span<void* const> buffers) {
  for (std::vector<Transfer>* list : {&inputs_, &outputs_})
    for (Transfer& t : *list) {
      t.host = t.operand < buffers.size() ? buffers[t.operand] : nullptr;
      NN_CHECK_OR_RETURN(t.host, StatusCode::kInternal,
                         "vulkan partition: no buffer for boundary operand " + std::to_string(t.operand));
    }
  return Status::ok();
}

Status VulkanPartition::run() {
  for (const Transfer& t : inputs_) {
    NN_CHECK_OR_RETURN(t.host, StatusCode::kInternal, "vulkan partition: run() before prepare()");
    std::memcpy(staging_in_.mapped() + t.staging_offset, t.host, t.bytes);
  }
  NN_RETURN_IF_ERROR(ctx_->submit_and_wait(commands_, fence_));
  NN_RETURN_IF_ERROR(check(vkResetFences(device_, 1, &fence_), "vkResetFences"));
  for (const Transfer& t : outputs_) std::memcpy(t.host, staging_out_.mapped() + t.staging_offset, t.bytes);
  if (profile_) step_ms_.assign(steps_.size(), 0.0);  // labels even without device timestamps
  if (queries_) {
    std::vector<uint64_t> ticks(steps_.size() + 1);
    VkResult r = vkGetQueryPoolResults(device_, queries_, 0, static_cast<uint32_t>(ticks.size()),
                                       ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                       VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r == VK_SUCCESS)
      for (size_t i = 0; i < steps_.size(); ++i)
        step_ms_[i] = double(ticks[i + 1] - ticks[i]) * timestamp_ns_ / 1e6;
  }
  return Status::ok();
}

std::vector<StepTiming> VulkanPartition::step_timings() const {
  std::vector<StepTiming> t;
  for (size_t i = 0; i < step_ms_.size() && i < steps_.size(); ++i)
    t.push_back({steps_[i].label, step_ms_[i]});
  return t;
}

class VulkanDelegate final : public Delegate {
 public:
  std::string name() const override { return "vulkan"; }
  Status available() const override { return Context::get().status(); }
  std::string auto_skip_reason() const override {
    auto ctx = Context::get();
    if (ctx.is_ok() && (*ctx)->properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
      return (*ctx)->description() + " runs on the CPU, slower than the cpu delegate; ask for vulkan by name";
    return {};
  }
  SupportResult supports(const Model& model, uint32_t op_index) const override {
    auto ctx = Context::get();
    return check_op(model, op_index, ctx.is_ok() ? &ctx.value()->limits() : nullptr);
  }
  Result<std::unique_ptr<CompiledPartition>> compile(const Model& model, const PartitionSpec& spec,
                                                     const CompileOptions& options) override {
    NN_ASSIGN_OR_RETURN(std::shared_ptr<Context> ctx, Context::get());
    auto partition = std::make_unique<VulkanPartition>(std::move(ctx));
    Status s = partition->build(model, spec, options);
    if (!s.is_ok()) {
      const StatusCode code =
          s.code() == StatusCode::kOutOfMemory ? s.code() : StatusCode::kDelegateIncompatible;
      return Status(code, "vulkan: " + s.message());
    }
    return std::unique_ptr<CompiledPartition>(std::move(partition));
  }
};

}  // namespace
}  // namespace vk

std::unique_ptr<Delegate> make_vulkan_delegate() {
  return std::make_unique<vk::VulkanDelegate>();
}

}  // namespace nn

#else  // !NN_HAVE_VULKAN

namespace nn {
namespace {

class VulkanStub final : public Delegate {
 public:
  std::string name() const override { return "vulkan"; }
  Status available() const override {
    return Status(StatusCode::kDelegateUnavailable,
                  "built without Vulkan (the Vulkan loader/headers or glslc were missing at configure time)");
  }
  SupportResult supports(const Model&, uint32_t) const override {
    return SupportResult::no("built without Vulkan");
  }
  Result<std::unique_ptr<CompiledPartition>> compile(const Model&, const PartitionSpec&,
                                                     const CompileOptions&) override {
    return Status(StatusCode::kDelegateUnavailable, "vulkan: built without Vulkan");
  }
};

}  // namespace

std::unique_ptr<Delegate> make_vulkan_delegate() {
  return std::make_unique<VulkanStub>();
}

}  // namespace nn

#endif  // NN_HAVE_VULKAN
