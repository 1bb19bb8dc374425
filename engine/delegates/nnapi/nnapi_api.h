// The NNAPI C ABI this delegate uses (values and signatures from Android's
// NeuralNetworks.h), declared here so the delegate builds off-Android, and the function
// table the delegate calls through: loaded from libneuralnetworks.so with dlopen, or
// injected by tests (a fake that records calls and fails on demand).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nn::nnapi {

// Result codes (ResultCode).
enum : int {
  ANEURALNETWORKS_NO_ERROR = 0,
  ANEURALNETWORKS_OUT_OF_MEMORY = 1,
  ANEURALNETWORKS_INCOMPLETE = 2,
  ANEURALNETWORKS_UNEXPECTED_NULL = 3,
  ANEURALNETWORKS_BAD_DATA = 4,
  ANEURALNETWORKS_OP_FAILED = 5,
  ANEURALNETWORKS_BAD_STATE = 6,
  ANEURALNETWORKS_UNMAPPABLE = 7,
  ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE = 8,
  ANEURALNETWORKS_UNAVAILABLE_DEVICE = 9,
  ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT = 10,
  ANEURALNETWORKS_MISSED_DEADLINE_PERSISTENT = 11,
  ANEURALNETWORKS_RESOURCE_EXHAUSTED_TRANSIENT = 12,
  ANEURALNETWORKS_RESOURCE_EXHAUSTED_PERSISTENT = 13,
  ANEURALNETWORKS_DEAD_OBJECT = 14,
};

// DeviceTypeCode.
enum : int32_t {
  ANEURALNETWORKS_DEVICE_UNKNOWN = 0,
  ANEURALNETWORKS_DEVICE_OTHER = 1,
  ANEURALNETWORKS_DEVICE_CPU = 2,
  ANEURALNETWORKS_DEVICE_GPU = 3,
  ANEURALNETWORKS_DEVICE_ACCELERATOR = 4,
};

// PriorityCode (feature level 30).
enum : int {
  ANEURALNETWORKS_PRIORITY_LOW = 90,
  ANEURALNETWORKS_PRIORITY_MEDIUM = 100,
  ANEURALNETWORKS_PRIORITY_HIGH = 110,
};

inline constexpr size_t kCacheTokenBytes = 32;  // ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN

// PreferenceCode.
enum : int32_t {
  ANEURALNETWORKS_PREFER_LOW_POWER = 0,
  ANEURALNETWORKS_PREFER_FAST_SINGLE_ANSWER = 1,
  ANEURALNETWORKS_PREFER_SUSTAINED_SPEED = 2,
};

struct ANeuralNetworksModel;
struct ANeuralNetworksCompilation;
struct ANeuralNetworksExecution;
struct ANeuralNetworksEvent;
struct ANeuralNetworksDevice;
struct ANeuralNetworksBurst;

struct ANeuralNetworksOperandType {
  int32_t type;
  uint32_t dimensionCount;
  const uint32_t* dimensions;
  float scale;
  int32_t zeroPoint;
};

struct ANeuralNetworksSymmPerChannelQuantParams {
  uint32_t channelDim;
  uint32_t scaleCount;
  const float* scales;
};

using ANeuralNetworksOperationType = int32_t;

// The entry points, one pointer each. Optional ones (newer feature levels) may be null.
struct Api {
  int (*ANeuralNetworksModel_create)(ANeuralNetworksModel** model) = nullptr;
  void (*ANeuralNetworksModel_free)(ANeuralNetworksModel* model) = nullptr;
  int (*ANeuralNetworksModel_finish)(ANeuralNetworksModel* model) = nullptr;
  int (*ANeuralNetworksModel_addOperand)(ANeuralNetworksModel* model,
                                         const ANeuralNetworksOperandType* type) = nullptr;
  int (*ANeuralNetworksModel_setOperandValue)(ANeuralNetworksModel* model, int32_t index, const void* buffer,
                                              size_t length) = nullptr;
  int (*ANeuralNetworksModel_setOperandSymmPerChannelQuantParams)(
      ANeuralNetworksModel* model, int32_t index,
      const ANeuralNetworksSymmPerChannelQuantParams* params) = nullptr;
  int (*ANeuralNetworksModel_addOperation)(ANeuralNetworksModel* model, ANeuralNetworksOperationType type,
                                           uint32_t inputCount, const uint32_t* inputs, uint32_t outputCount,
                                           const uint32_t* outputs) = nullptr;
  int (*ANeuralNetworksModel_identifyInputsAndOutputs)(ANeuralNetworksModel* model, uint32_t inputCount,
                                                       const uint32_t* inputs, uint32_t outputCount,
                                                       const uint32_t* outputs) = nullptr;
  int (*ANeuralNetworksModel_relaxComputationFloat32toFloat16)(ANeuralNetworksModel* model,
                                                               bool allow) = nullptr;
  int (*ANeuralNetworksCompilation_create)(ANeuralNetworksModel* model,
                                           ANeuralNetworksCompilation** compilation) = nullptr;
  void (*ANeuralNetworksCompilation_free)(ANeuralNetworksCompilation* compilation) = nullptr;
  int (*ANeuralNetworksCompilation_setPreference)(ANeuralNetworksCompilation* compilation,
                                                  int32_t preference) = nullptr;
  int (*ANeuralNetworksCompilation_finish)(ANeuralNetworksCompilation* compilation) = nullptr;
  int (*ANeuralNetworksExecution_create)(ANeuralNetworksCompilation* compilation,
                                         ANeuralNetworksExecution** execution) = nullptr;
  void (*ANeuralNetworksExecution_free)(ANeuralNetworksExecution* execution) = nullptr;
  int (*ANeuralNetworksExecution_setInput)(ANeuralNetworksExecution* execution, int32_t index,
                                           const ANeuralNetworksOperandType* type, const void* buffer,
                                           size_t length) = nullptr;
  int (*ANeuralNetworksExecution_setOutput)(ANeuralNetworksExecution* execution, int32_t index,
                                            const ANeuralNetworksOperandType* type, void* buffer,
                                            size_t length) = nullptr;
  // Feature level 29+; older drivers only have startCompute + Event_wait.
  int (*ANeuralNetworksExecution_compute)(ANeuralNetworksExecution* execution) = nullptr;
  int (*ANeuralNetworksExecution_startCompute)(ANeuralNetworksExecution* execution,
                                               ANeuralNetworksEvent** event) = nullptr;
  int (*ANeuralNetworksEvent_wait)(ANeuralNetworksEvent* event) = nullptr;
  void (*ANeuralNetworksEvent_free)(ANeuralNetworksEvent* event) = nullptr;
  // Feature level 29: devices, per-device support, caching, bursts.
  int (*ANeuralNetworks_getDeviceCount)(uint32_t* num_devices) = nullptr;
  int (*ANeuralNetworks_getDevice)(uint32_t index, ANeuralNetworksDevice** device) = nullptr;
  int (*ANeuralNetworksDevice_getName)(const ANeuralNetworksDevice* device, const char** name) = nullptr;
  int (*ANeuralNetworksDevice_getType)(const ANeuralNetworksDevice* device, int32_t* type) = nullptr;
  int (*ANeuralNetworksDevice_getFeatureLevel)(const ANeuralNetworksDevice* device, int64_t* level) = nullptr;
  int (*ANeuralNetworksModel_getSupportedOperationsForDevices)(const ANeuralNetworksModel* model,
                                                               const ANeuralNetworksDevice* const* devices,
                                                               uint32_t num_devices, bool* supported) = nullptr;
  int (*ANeuralNetworksCompilation_createForDevices)(ANeuralNetworksModel* model,
                                                     const ANeuralNetworksDevice* const* devices,
                                                     uint32_t num_devices,
                                                     ANeuralNetworksCompilation** compilation) = nullptr;
  int (*ANeuralNetworksCompilation_setCaching)(ANeuralNetworksCompilation* compilation, const char* cache_dir,
                                               const uint8_t* token) = nullptr;
  int (*ANeuralNetworksBurst_create)(ANeuralNetworksCompilation* compilation, ANeuralNetworksBurst** burst) = nullptr;
  void (*ANeuralNetworksBurst_free)(ANeuralNetworksBurst* burst) = nullptr;
  int (*ANeuralNetworksExecution_burstCompute)(ANeuralNetworksExecution* execution,
                                               ANeuralNetworksBurst* burst) = nullptr;
  // Feature level 30: priority and deadlines.
  int (*ANeuralNetworksCompilation_setPriority)(ANeuralNetworksCompilation* compilation, int priority) = nullptr;
  int (*ANeuralNetworksCompilation_setTimeout)(ANeuralNetworksCompilation* compilation, uint64_t ns) = nullptr;
  int (*ANeuralNetworksExecution_setTimeout)(ANeuralNetworksExecution* execution, uint64_t ns) = nullptr;
  // Feature level 31 (also in updated Android 11 runtimes).
  int64_t (*ANeuralNetworks_getRuntimeFeatureLevel)() = nullptr;

  // The level the library offers: getRuntimeFeatureLevel where present, else the newest
  // level whose entry points are all there (27, 28, 29 or 30).
  int feature_level = 27;

  // What provides the table (the library path, or "fake" in tests); keeps it loaded.
  std::string origin;
  std::shared_ptr<void> library;
};

const char* result_code_name(int code);  // "ANEURALNETWORKS_BAD_DATA"

// Loads libneuralnetworks.so by dlopen name, as an app does (or the path in the
// environment variable NN_NNAPI_LIBRARY). nullptr with *why set when it is absent or
// incomplete.
std::shared_ptr<const Api> load_system_api(std::string* why);
// The same from a given name or path (tests point it at each build of the driver).
std::shared_ptr<const Api> load_api(const std::string& library, std::string* why);
// The level the entry points present imply (and getRuntimeFeatureLevel where there).
int detect_feature_level(const Api& api);

// The table "nnapi" delegates use: the one set for testing, else the system library
// (loaded once per process).
std::shared_ptr<const Api> current_api(std::string* why);

// Tests: every "nnapi" delegate made after this uses `api` (nullptr restores the system
// library). Not thread-safe against concurrent Session::open.
void set_api_for_testing(std::shared_ptr<const Api> api);

}  // namespace nn::nnapi
