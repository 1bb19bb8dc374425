// The NNAPI delegate: the IR is an NNAPI model, so a partition maps 1:1 onto
// ANeuralNetworksModel_* calls (operand types, op codes and operand lists pass through).
// It uses the API as an app on a phone would:
//   - the library by dlopen (nnapi_api.cpp), its feature level from the entry points;
//   - devices enumerated; by default the non-CPU ones (NN_NNAPI_DEVICES names others);
//   - per-op support from getSupportedOperationsForDevices on the whole model, after ops
//     above the devices' feature level are taken out (never sent to the driver);
//   - compilation caching in a directory, keyed by the partition's sha256;
//   - a burst per partition for streams; the session's latency budget as priority and
//     execution timeout; a run the driver fails or misses the deadline on is redone on
//     the CPU delegate and counted (Session::runtime_fallbacks).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "delegates/nnapi/nnapi_api.h"
#include "delegates/nnapi/nnapi_feature_levels.h"
#include "ir/sha256.h"
#include "runtime/delegate.h"

namespace nn {
namespace nnapi {
namespace {

Status nnapi_error(const char* call, int code) {
  return Status(StatusCode::kDelegateIncompatible, std::string(call) + ": " + result_code_name(code));
}

#define NN_NNAPI_TRY(call_name, expr)                                                  \
  do {                                                                                 \
    int nn_code_ = (expr);                                                             \
    if (nn_code_ != ANEURALNETWORKS_NO_ERROR) return nnapi_error(call_name, nn_code_); \
  } while (0)

struct Device {
  ANeuralNetworksDevice* handle = nullptr;
  std::string name;
  int32_t type = ANEURALNETWORKS_DEVICE_UNKNOWN;
  int64_t level = 0;
};

const char* device_type_name(int32_t t) {
  switch (t) {
    case ANEURALNETWORKS_DEVICE_CPU: return "cpu";
    case ANEURALNETWORKS_DEVICE_GPU: return "gpu";
    case ANEURALNETWORKS_DEVICE_ACCELERATOR: return "accelerator";
    case ANEURALNETWORKS_DEVICE_OTHER: return "other";
  }
  return "unknown";
}

// Handles freed on every path.
struct ModelHandle {
  std::shared_ptr<const Api> api;
  ANeuralNetworksModel* model = nullptr;
  ~ModelHandle() {
    if (model) api->ANeuralNetworksModel_free(model);
  }
};

// Adds the partition's ops (and the operands they touch) to a new NNAPI model and
// finishes it. Ops are in partition order; the NNAPI op index k is spec.ops[k].
Status build_model(const Api& api, const Model& model, const PartitionSpec& spec, bool relax_allowed,
                   ANeuralNetworksModel** out) {
  NN_NNAPI_TRY("ANeuralNetworksModel_create", api.ANeuralNetworksModel_create(out));
  ANeuralNetworksModel* nn_model = *out;
  std::map<uint32_t, uint32_t> index;  // IR operand -> NNAPI operand
  auto add = [&](uint32_t o) -> Status {
    if (index.count(o)) return Status::ok();
    const Operand& operand = model.operands[o];
    ANeuralNetworksOperandType type{static_cast<int32_t>(operand.type), static_cast<uint32_t>(operand.dims.size()),
                                    operand.dims.empty() ? nullptr : operand.dims.data(), operand.scale,
                                    operand.zero_point};
    NN_NNAPI_TRY("ANeuralNetworksModel_addOperand", api.ANeuralNetworksModel_addOperand(nn_model, &type));
    const uint32_t i = static_cast<uint32_t>(index.size());
    index[o] = i;
    if (operand.lifetime == Lifetime::NO_VALUE) {
      NN_NNAPI_TRY("ANeuralNetworksModel_setOperandValue",
                   api.ANeuralNetworksModel_setOperandValue(nn_model, static_cast<int32_t>(i), nullptr, 0));
    } else if (operand.is_constant()) {
      // Values over 128 bytes are referenced, not copied: the IR model keeps them alive.
      NN_NNAPI_TRY("ANeuralNetworksModel_setOperandValue",
                   api.ANeuralNetworksModel_setOperandValue(nn_model, static_cast<int32_t>(i), operand.data,
                                                            operand.length));
    }
    if (operand.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL) {
      NN_CHECK_OR_RETURN(api.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams,
                         StatusCode::kDelegateIncompatible, "per-channel quantization needs feature level 29");
      ANeuralNetworksSymmPerChannelQuantParams q{operand.channel_quant.channel_dim,
                                                 static_cast<uint32_t>(operand.channel_quant.scales.size()),
                                                 operand.channel_quant.scales.data()};
      NN_NNAPI_TRY("ANeuralNetworksModel_setOperandSymmPerChannelQuantParams",
                   api.ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(nn_model, static_cast<int32_t>(i), &q));
    }
    return Status::ok();
  };
  for (uint32_t o : spec.inputs) NN_RETURN_IF_ERROR(add(o));
  for (uint32_t k : spec.ops) {
    const Operation& op = model.operations[k];
    std::vector<uint32_t> ins, outs;
    for (uint32_t o : op.inputs) {
      NN_RETURN_IF_ERROR(add(o));
      ins.push_back(index[o]);
    }
    for (uint32_t o : op.outputs) {
      NN_RETURN_IF_ERROR(add(o));
      outs.push_back(index[o]);
    }
    int code = api.ANeuralNetworksModel_addOperation(nn_model, static_cast<int32_t>(op.type),
                                                     static_cast<uint32_t>(ins.size()), ins.data(),
                                                     static_cast<uint32_t>(outs.size()), outs.data());
    if (code != ANEURALNETWORKS_NO_ERROR)
      return nnapi_error("ANeuralNetworksModel_addOperation", code).with_context(op_label(model, k));
  }
  std::vector<uint32_t> ins, outs;
  for (uint32_t o : spec.inputs) ins.push_back(index[o]);
  for (uint32_t o : spec.outputs) outs.push_back(index[o]);
  NN_NNAPI_TRY("ANeuralNetworksModel_identifyInputsAndOutputs",
               api.ANeuralNetworksModel_identifyInputsAndOutputs(nn_model, static_cast<uint32_t>(ins.size()),
                                                                 ins.data(), static_cast<uint32_t>(outs.size()),
                                                                 outs.data()));
  if (api.ANeuralNetworksModel_relaxComputationFloat32toFloat16)
    NN_NNAPI_TRY("ANeuralNetworksModel_relaxComputationFloat32toFloat16",
                 api.ANeuralNetworksModel_relaxComputationFloat32toFloat16(nn_model, relax_allowed));
  NN_NNAPI_TRY("ANeuralNetworksModel_finish", api.ANeuralNetworksModel_finish(nn_model));
  return Status::ok();
}

// The compilation cache key: everything the partition's NNAPI model is made of.
std::array<uint8_t, kCacheTokenBytes> partition_sha256(const Model& model, const PartitionSpec& spec) {
  Sha256 h;
  auto put = [&](const void* p, size_t n) { h.update({static_cast<const uint8_t*>(p), n}); };
  auto put_u32s = [&](const std::vector<uint32_t>& v) {
    uint32_t n = static_cast<uint32_t>(v.size());
    put(&n, sizeof n);
    put(v.data(), v.size() * sizeof(uint32_t));
  };
  put_u32s(spec.inputs);
  put_u32s(spec.outputs);
  std::map<uint32_t, bool> seen;
  for (uint32_t k : spec.ops) {
    const Operation& op = model.operations[k];
    put(&op.type, sizeof op.type);
    put_u32s(op.inputs);
    put_u32s(op.outputs);
    for (const auto* list : {&op.inputs, &op.outputs})
      for (uint32_t o : *list) {
        if (seen[o]) continue;
        seen[o] = true;
        const Operand& operand = model.operands[o];
        put(&operand.type, sizeof operand.type);
        put_u32s(operand.dims);
        put(&operand.scale, sizeof operand.scale);
        put(&operand.zero_point, sizeof operand.zero_point);
        if (operand.is_constant() && operand.data) put(operand.data, operand.length);
      }
  }
  return h.finish();
}

// NN_NNAPI_CACHE_DIR, else $XDG_CACHE_HOME/nnpipe/nnapi, else ~/.cache/nnpipe/nnapi;
// "" when caching is off (NN_NNAPI_CACHE_DIR=off) or the directory cannot be made.
std::string cache_directory() {
  std::filesystem::path dir;
  if (const char* v = std::getenv("NN_NNAPI_CACHE_DIR"); v && *v) {
    if (std::string(v) == "off") return {};
    dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::filesystem::path(x) / "nnpipe" / "nnapi";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::filesystem::path(home) / ".cache" / "nnpipe" / "nnapi";
  } else {
    return {};
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return ec ? std::string() : dir.string();
}

bool is_runtime_failure(int code) {
  return code == ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT || code == ANEURALNETWORKS_MISSED_DEADLINE_PERSISTENT ||
         code == ANEURALNETWORKS_OP_FAILED || code == ANEURALNETWORKS_RESOURCE_EXHAUSTED_TRANSIENT ||
         code == ANEURALNETWORKS_RESOURCE_EXHAUSTED_PERSISTENT || code == ANEURALNETWORKS_DEAD_OBJECT ||
         code == ANEURALNETWORKS_UNAVAILABLE_DEVICE;
}

class NnapiPartition final : public CompiledPartition {
 public:
  NnapiPartition(std::shared_ptr<const Api> api, const Model& model, PartitionSpec spec,
                 std::vector<ANeuralNetworksDevice*> devices, CompileOptions options)
      : api_(std::move(api)), model_(model), spec_(std::move(spec)), devices_(std::move(devices)),
        options_(options), nn_model_{api_, nullptr} {}
  ~NnapiPartition() override {
    if (burst_) api_->ANeuralNetworksBurst_free(burst_);
    if (compilation_) api_->ANeuralNetworksCompilation_free(compilation_);
  }

  Status build() {
    NN_RETURN_IF_ERROR(build_model(*api_, model_, spec_, false, &nn_model_.model));
    if (!devices_.empty() && api_->ANeuralNetworksCompilation_createForDevices)
      NN_NNAPI_TRY("ANeuralNetworksCompilation_createForDevices",
                   api_->ANeuralNetworksCompilation_createForDevices(
                       nn_model_.model, devices_.data(), static_cast<uint32_t>(devices_.size()), &compilation_));
    else
      NN_NNAPI_TRY("ANeuralNetworksCompilation_create",
                   api_->ANeuralNetworksCompilation_create(nn_model_.model, &compilation_));
    const bool budgeted = options_.budget_ms > 0;
    NN_NNAPI_TRY("ANeuralNetworksCompilation_setPreference",
                 api_->ANeuralNetworksCompilation_setPreference(
                     compilation_, budgeted ? ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER
                                            : ANEURALNETWORKS_PREFER_SUSTAINED_SPEED));
    if (budgeted && api_->ANeuralNetworksCompilation_setPriority)
      NN_NNAPI_TRY("ANeuralNetworksCompilation_setPriority",
                   api_->ANeuralNetworksCompilation_setPriority(compilation_, ANEURALNETWORKS_PRIORITY_HIGH));
    if (api_->ANeuralNetworksCompilation_setCaching) {
      const std::string dir = cache_directory();
      if (!dir.empty()) {
        const auto token = partition_sha256(model_, spec_);
        NN_NNAPI_TRY("ANeuralNetworksCompilation_setCaching",
                     api_->ANeuralNetworksCompilation_setCaching(compilation_, dir.c_str(), token.data()));
      }
    }
    NN_NNAPI_TRY("ANeuralNetworksCompilation_finish", api_->ANeuralNetworksCompilation_finish(compilation_));
    // A deadline is per execution and only allowed on a compilation for one device.
    timeout_ns_ = budgeted && api_->ANeuralNetworksExecution_setTimeout && devices_.size() == 1
                      ? static_cast<uint64_t>(options_.budget_ms * 1e6)
                      : 0;
    if (api_->ANeuralNetworksBurst_create && api_->ANeuralNetworksExecution_burstCompute &&
        api_->ANeuralNetworksBurst_create(compilation_, &burst_) != ANEURALNETWORKS_NO_ERROR)
      burst_ = nullptr;  // no burst: plain executions still work
    return Status::ok();
  }

  Status prepare(std::span<void* const> buffers) override {
    buffers_.assign(buffers.begin(), buffers.end());
    inputs_.clear();
    outputs_.clear();
    for (uint32_t o : spec_.inputs) {
      NN_CHECK_OR_RETURN(o < buffers.size() && buffers[o], StatusCode::kInternal,
                         "nnapi: no buffer for input operand " + std::to_string(o));
      inputs_.push_back(buffers[o]);
    }
    for (uint32_t o : spec_.outputs) {
      NN_CHECK_OR_RETURN(o < buffers.size() && buffers[o], StatusCode::kInternal,
                         "nnapi: no buffer for output operand " + std::to_string(o));
      outputs_.push_back(buffers[o]);
    }
    if (cpu_) NN_RETURN_IF_ERROR(cpu_->prepare(buffers_));
    return Status::ok();
  }

  Status run() override {
    int code = execute();
    if (code == ANEURALNETWORKS_NO_ERROR) return Status::ok();
    if (!is_runtime_failure(code)) return nnapi_error("ANeuralNetworksExecution", code);
    // The stream goes on: this run is redone on the CPU and counted.
    ++fallbacks_;
    if (!cpu_) {
      cpu_delegate_ = make_cpu_delegate();
      auto compiled = cpu_delegate_->compile(model_, spec_, options_);
      if (!compiled.is_ok())
        return compiled.status().with_context(std::string("nnapi run failed (") + result_code_name(code) +
                                              ") and the CPU fallback did not compile");
      cpu_ = std::move(compiled).value();
      NN_RETURN_IF_ERROR(cpu_->prepare(buffers_));
    }
    return cpu_->run();
  }

  uint64_t runtime_fallbacks() const override { return fallbacks_; }

 private:
  int execute() {
    ANeuralNetworksExecution* execution = nullptr;
    int code = api_->ANeuralNetworksExecution_create(compilation_, &execution);
    if (code != ANEURALNETWORKS_NO_ERROR) return code;
    std::unique_ptr<ANeuralNetworksExecution, void (*)(ANeuralNetworksExecution*)> guard(
        execution, api_->ANeuralNetworksExecution_free);
    for (size_t i = 0; i < inputs_.size() && code == ANEURALNETWORKS_NO_ERROR; ++i)
      code = api_->ANeuralNetworksExecution_setInput(execution, static_cast<int32_t>(i), nullptr, inputs_[i],
                                                     model_.operands[spec_.inputs[i]].byte_size());
    for (size_t i = 0; i < outputs_.size() && code == ANEURALNETWORKS_NO_ERROR; ++i)
      code = api_->ANeuralNetworksExecution_setOutput(execution, static_cast<int32_t>(i), nullptr, outputs_[i],
                                                      model_.operands[spec_.outputs[i]].byte_size());
    if (code == ANEURALNETWORKS_NO_ERROR && timeout_ns_)
      code = api_->ANeuralNetworksExecution_setTimeout(execution, timeout_ns_);
    if (code != ANEURALNETWORKS_NO_ERROR) return code;
    if (burst_) return api_->ANeuralNetworksExecution_burstCompute(execution, burst_);
    if (api_->ANeuralNetworksExecution_compute) return api_->ANeuralNetworksExecution_compute(execution);
    ANeuralNetworksEvent* event = nullptr;
    code = api_->ANeuralNetworksExecution_startCompute(execution, &event);
    if (code != ANEURALNETWORKS_NO_ERROR) return code;
    code = api_->ANeuralNetworksEvent_wait(event);
    api_->ANeuralNetworksEvent_free(event);
    return code;
  }

  std::shared_ptr<const Api> api_;
  const Model& model_;
  PartitionSpec spec_;
  std::vector<ANeuralNetworksDevice*> devices_;
  CompileOptions options_;
  ModelHandle nn_model_;
  ANeuralNetworksCompilation* compilation_ = nullptr;
  ANeuralNetworksBurst* burst_ = nullptr;
  uint64_t timeout_ns_ = 0;
  std::vector<void*> buffers_, inputs_, outputs_;
  std::unique_ptr<Delegate> cpu_delegate_;  // only after a run failed
  std::unique_ptr<CompiledPartition> cpu_;
  std::atomic<uint64_t> fallbacks_{0};  // read by other threads (element stats)
};

class NnapiDelegate final : public Delegate {
 public:
  NnapiDelegate() {
    api_ = current_api(&why_);
    if (api_) find_devices();
  }
  std::string name() const override { return "nnapi"; }
  Status available() const override {
    if (api_ && why_.empty()) return Status::ok();
    return Status(StatusCode::kDelegateUnavailable, why_);
  }
  std::string describe() const override {
    if (!api_) return {};
    std::string s = api_->origin + ", feature level " + std::to_string(api_->feature_level);
    if (devices_.empty()) return s + ", no device API (the runtime picks)";
    s += ", devices:";
    for (const Device& d : devices_) {
      const bool used = std::find(targets_.begin(), targets_.end(), d.handle) != targets_.end();
      s += " " + d.name + " (" + device_type_name(d.type) + ", level " + std::to_string(d.level) +
           (used ? ", used)" : ")");
    }
    return s;
  }
  SupportResult supports(const Model& model, uint32_t op_index) const override {
    if (const std::string why = static_refusal(model, op_index); !why.empty()) return SupportResult::no(why);
    if (!api_->ANeuralNetworksModel_getSupportedOperationsForDevices || targets_.empty()) return SupportResult::yes();
    std::lock_guard<std::mutex> lock(probe_mu_);
    if (probed_model_ != &model) probe(model);
    auto it = probe_answer_.find(op_index);
    if (it == probe_answer_.end()) return SupportResult::no("not in the model sent to the driver");
    return it->second.empty() ? SupportResult::yes() : SupportResult::no(it->second);
  }
  Result<std::unique_ptr<CompiledPartition>> compile(const Model& model, const PartitionSpec& spec,
                                                     const CompileOptions& options) override {
    NN_RETURN_IF_ERROR(available());
    auto partition = std::make_unique<NnapiPartition>(api_, model, spec, targets_, options);
    NN_RETURN_IF_ERROR(partition->build());
    return std::unique_ptr<CompiledPartition>(std::move(partition));
  }

 private:
  void find_devices() {
    if (api_->feature_level < 29 || !api_->ANeuralNetworks_getDeviceCount) {
      level_ = api_->feature_level;
      return;
    }
    uint32_t count = 0;
    if (api_->ANeuralNetworks_getDeviceCount(&count) != ANEURALNETWORKS_NO_ERROR || count == 0) {
      why_ = api_->origin + " reports no devices";
      return;
    }
    for (uint32_t i = 0; i < count; ++i) {
      Device d;
      const char* name = nullptr;
      if (api_->ANeuralNetworks_getDevice(i, &d.handle) != ANEURALNETWORKS_NO_ERROR ||
          api_->ANeuralNetworksDevice_getName(d.handle, &name) != ANEURALNETWORKS_NO_ERROR || !name)
        continue;
      d.name = name;
      if (api_->ANeuralNetworksDevice_getType) api_->ANeuralNetworksDevice_getType(d.handle, &d.type);
      api_->ANeuralNetworksDevice_getFeatureLevel(d.handle, &d.level);
      d.level = std::min<int64_t>(d.level, api_->feature_level);
      devices_.push_back(std::move(d));
    }
    // NN_NNAPI_DEVICES picks devices by name; otherwise every device but the runtime's
    // CPU implementation (offloading to a CPU driver only costs), unless it is all there is.
    if (const char* wanted = std::getenv("NN_NNAPI_DEVICES"); wanted && *wanted) {
      std::string list = wanted;
      for (size_t p = 0, q; p <= list.size(); p = q + 1) {
        q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        const std::string name = list.substr(p, q - p);
        auto it = std::find_if(devices_.begin(), devices_.end(), [&](const Device& d) { return d.name == name; });
        if (it == devices_.end()) {
          why_ = "NN_NNAPI_DEVICES names '" + name + "', which " + api_->origin + " does not have";
          targets_.clear();
          return;
        }
        targets_.push_back(it->handle);
      }
    } else {
      for (const Device& d : devices_)
        if (d.type != ANEURALNETWORKS_DEVICE_CPU) targets_.push_back(d.handle);
      if (targets_.empty())
        for (const Device& d : devices_) targets_.push_back(d.handle);
    }
    level_ = api_->feature_level;
    for (const Device& d : devices_)
      if (std::find(targets_.begin(), targets_.end(), d.handle) != targets_.end())
        level_ = std::min<int>(level_, static_cast<int>(d.level));
  }

  // Reasons that need no driver call: ops the driver must never see.
  std::string static_refusal(const Model& model, uint32_t k) const {
    const Operation& op = model.operations[k];
    if (is_extension(op.type)) return std::string(operation_type_name(op.type)) + " is an nnpipe extension op";
    std::vector<int32_t> types;
    for (uint32_t o : op.inputs) {
      const Operand& operand = model.operands[o];
      if (operand.lifetime != Lifetime::NO_VALUE && operand.is_constant() && operand.data == nullptr && operand.length)
        return "constant operand " + std::to_string(o) + " has no data";
      types.push_back(static_cast<int32_t>(operand.type));
    }
    std::string why = signature_level_reason(static_cast<int32_t>(op.type), types, level_);
    return why.empty() ? why : why + ": not sent to the driver";
  }

  // One NNAPI model of every op that passes the static checks, asked once which ops the
  // target devices take.
  void probe(const Model& model) const {
    probed_model_ = &model;
    probe_answer_.clear();
    PartitionSpec spec;
    std::vector<uint32_t> partition_of(model.operations.size(), 1);
    for (uint32_t k = 0; k < model.operations.size(); ++k)
      if (static_refusal(model, k).empty()) {
        spec.ops.push_back(k);
        partition_of[k] = 0;
      }
    if (spec.ops.empty()) return;
    compute_partition_boundary(model, spec, partition_of);
    ModelHandle handle{api_, nullptr};
    Status built = build_model(*api_, model, spec, false, &handle.model);
    std::vector<uint8_t> supported(spec.ops.size(), 0);
    std::string failure;
    if (!built.is_ok()) {
      failure = "the driver refused the model: " + built.message();
    } else {
      static_assert(sizeof(bool) == 1);
      int code = api_->ANeuralNetworksModel_getSupportedOperationsForDevices(
          handle.model, targets_.data(), static_cast<uint32_t>(targets_.size()),
          reinterpret_cast<bool*>(supported.data()));
      if (code != ANEURALNETWORKS_NO_ERROR)
        failure = std::string("getSupportedOperationsForDevices: ") + result_code_name(code);
    }
    std::string names;
    for (const Device& d : devices_)
      if (std::find(targets_.begin(), targets_.end(), d.handle) != targets_.end())
        names += (names.empty() ? "" : ", ") + d.name;
    for (size_t i = 0; i < spec.ops.size(); ++i)
      probe_answer_[spec.ops[i]] =
          !failure.empty() ? failure : supported[i] ? "" : "not supported by device " + names;
  }

  std::shared_ptr<const Api> api_;
  std::string why_;
  std::vector<Device> devices_;
  std::vector<ANeuralNetworksDevice*> targets_;
  int level_ = 27;
  mutable std::mutex probe_mu_;
  mutable const Model* probed_model_ = nullptr;
  mutable std::map<uint32_t, std::string> probe_answer_;
};

}  // namespace
}  // namespace nnapi

std::unique_ptr<Delegate> make_nnapi_delegate() {
  return std::make_unique<nnapi::NnapiDelegate>();
}

}  // namespace nn
