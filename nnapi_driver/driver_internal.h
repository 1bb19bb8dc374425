// The reference driver's objects behind the NNAPI handles. An ANeuralNetworksModel
// collects the app's calls into an nn::Model (the engine's IR *is* an NNAPI model); a
// compilation validates it, infers shapes and opens an engine Session on the chosen
// device's delegate; an execution binds the app's buffers and runs that session.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/runtime/session.h"
#include "nnapi/NeuralNetworks.h"

namespace nnpipe_driver {

// The level this build exports (27, 29 or 30), lowered by NNPIPE_NNAPI_FEATURE_LEVEL.
int build_feature_level();  // defined per library in level.cpp
int feature_level();
// The driver's quant8 arithmetic, a property of this driver like a vendor driver's:
// NNPIPE_NNAPI_REQUANTIZE=nnapi (default: NNAPI's fixed point) or fp32 (qnnpack's, so
// PyTorch's quantized models give eager PyTorch's results). nullopt for any other value.
std::optional<nn::Requantization> driver_requantization();

// A device and how it behaves. "nnpipe-reference" runs every op the engine has on its
// reference kernels; "nnpipe-accel" is configured by NNPIPE_NNAPI_ACCEL (or the file
// NNPIPE_NNAPI_ACCEL_CONFIG names) so tests can make it partial, slow, or failing.
struct DeviceConfig {
  std::string name;
  int32_t type = ANEURALNETWORKS_DEVICE_CPU;
  int level = 30;
  std::string engine_delegate = "reference";
  bool all_ops = true;
  std::set<int32_t> ops;              // when !all_ops: the op codes it takes
  int slow_ms = 0;                    // added to every execution
  bool fail_compile = false;          // Compilation_finish -> OP_FAILED
  int fail_run_every = 0;             // every Nth execution -> OP_FAILED (1 = all)
  int miss_deadline_every = 0;        // every Nth execution with a timeout -> MISSED_DEADLINE_TRANSIENT
};

}  // namespace nnpipe_driver

struct ANeuralNetworksDevice {
  nnpipe_driver::DeviceConfig config;
  std::atomic<int64_t> runs{0};
};

namespace nnpipe_driver {

// The devices, built once from the environment.
const std::vector<ANeuralNetworksDevice*>& devices();
// Whether `device` takes op k of a finished model (its op set, its level, the engine's
// validation of that op with the model's shapes).
bool device_supports(const ANeuralNetworksDevice& device, const ANeuralNetworksModel& model, size_t app_op);
// Why it does not ("" when it does).
std::string device_refuses(const ANeuralNetworksDevice& device, const ANeuralNetworksModel& model, size_t app_op);

struct Counters {
  std::atomic<int64_t> live_models{0}, live_compilations{0}, live_executions{0}, live_bursts{0}, live_events{0};
  std::atomic<int64_t> executions_run{0}, cache_hits{0}, cache_writes{0}, missed_deadlines{0};
};
Counters& counters();

// Logs a refused call when NNPIPE_NNAPI_LOG=1 (as Android's runtime logs to logcat).
int fail(int code, const std::string& why);

}  // namespace nnpipe_driver

struct ANeuralNetworksModel {
  nn::Model ir;                              // operands/ops in the app's numbering
  std::vector<bool> value_set;               // setOperandValue called
  std::vector<bool> written_by_op;
  std::vector<std::vector<uint32_t>> dims_given;  // as the app declared them (0 = unknown)
  bool identified = false;
  bool finished = false;
  bool relaxed = false;
  bool invalid = false;                      // a call failed: finish refuses it, as Android does
  std::vector<uint32_t> run_order;           // app op indices in a topological order (finish)
  std::shared_ptr<const nn::Model> validated;  // ops in run order, shapes inferred (or null)
  std::vector<std::string> op_problem;       // per app op: why the engine cannot run it, or ""
};

struct ANeuralNetworksCompilation {
  ANeuralNetworksModel* model = nullptr;
  std::vector<ANeuralNetworksDevice*> devices;  // empty: the runtime picks
  bool explicit_devices = false;
  ANeuralNetworksDevice* chosen = nullptr;
  int32_t preference = ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER;
  int priority = ANEURALNETWORKS_PRIORITY_DEFAULT;
  uint64_t timeout_ns = 0;
  std::string cache_dir;
  std::vector<uint8_t> cache_token;
  bool finished = false;
  std::mutex run_mu;  // one Session; executions of one compilation run one at a time
  std::unique_ptr<nn::Session> session;
};

struct ANeuralNetworksExecution {
  ANeuralNetworksCompilation* compilation = nullptr;
  struct Binding {
    bool set = false;
    const void* in = nullptr;
    void* out = nullptr;
    size_t length = 0;
  };
  std::vector<Binding> inputs, outputs;
  std::vector<std::vector<uint32_t>> output_dims;  // after compute
  uint64_t timeout_ns = 0;
  enum class State { kPreparation, kComputing, kCompleted } state = State::kPreparation;
  int result = ANEURALNETWORKS_NO_ERROR;
};

struct ANeuralNetworksEvent {
  ANeuralNetworksExecution* execution = nullptr;
  int result = ANEURALNETWORKS_NO_ERROR;
};

struct ANeuralNetworksBurst {
  ANeuralNetworksCompilation* compilation = nullptr;
  bool busy = false;
};
