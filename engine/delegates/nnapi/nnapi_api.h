// The function table the NNAPI delegate calls through: loaded from libneuralnetworks.so
// with dlopen, or injected by tests (a fake that records calls and fails on demand). The
// C API itself (types, constants, signatures) is nnapi/NeuralNetworks.h, the header the
// reference driver implements: each entry here is declared as a pointer to that function,
// so the two cannot disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nnapi/NeuralNetworks.h"

namespace nn::nnapi {

// The C API's types and constants, as the rest of the delegate names them.
using ::ANeuralNetworksBurst;
using ::ANeuralNetworksCompilation;
using ::ANeuralNetworksDevice;
using ::ANeuralNetworksEvent;
using ::ANeuralNetworksExecution;
using ::ANeuralNetworksModel;
using ::ANeuralNetworksOperandType;
using ::ANeuralNetworksOperationType;
using ::ANeuralNetworksSymmPerChannelQuantParams;
inline constexpr size_t kCacheTokenBytes = ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN;

// The entry points, one pointer each, typed as the C API's function of the same name.
// Optional ones (newer feature levels) may be null.
#define NN_NNAPI_ENTRY(fn) decltype(&::fn) fn = nullptr
struct Api {
  NN_NNAPI_ENTRY(ANeuralNetworksModel_create);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_free);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_finish);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_addOperand);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_setOperandValue);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_addOperation);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_identifyInputsAndOutputs);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_relaxComputationFloat32toFloat16);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_create);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_free);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_setPreference);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_finish);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_create);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_free);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_setInput);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_setOutput);
  // Feature level 29+; older drivers only have startCompute + Event_wait.
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_compute);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_startCompute);
  NN_NNAPI_ENTRY(ANeuralNetworksEvent_wait);
  NN_NNAPI_ENTRY(ANeuralNetworksEvent_free);
  // Feature level 29: devices, per-device support, caching, bursts.
  NN_NNAPI_ENTRY(ANeuralNetworks_getDeviceCount);
  NN_NNAPI_ENTRY(ANeuralNetworks_getDevice);
  NN_NNAPI_ENTRY(ANeuralNetworksDevice_getName);
  NN_NNAPI_ENTRY(ANeuralNetworksDevice_getType);
  NN_NNAPI_ENTRY(ANeuralNetworksDevice_getFeatureLevel);
  NN_NNAPI_ENTRY(ANeuralNetworksModel_getSupportedOperationsForDevices);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_createForDevices);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_setCaching);
  NN_NNAPI_ENTRY(ANeuralNetworksBurst_create);
  NN_NNAPI_ENTRY(ANeuralNetworksBurst_free);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_burstCompute);
  // Feature level 30: priority and deadlines.
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_setPriority);
  NN_NNAPI_ENTRY(ANeuralNetworksCompilation_setTimeout);
  NN_NNAPI_ENTRY(ANeuralNetworksExecution_setTimeout);
  // Feature level 31 (also in updated Android 11 runtimes).
  NN_NNAPI_ENTRY(ANeuralNetworks_getRuntimeFeatureLevel);

  // The level the library offers: getRuntimeFeatureLevel where present, else the newest
  // level whose entry points are all there (27, 28, 29 or 30).
  int feature_level = 27;

  // What provides the table (the library path, or "fake" in tests); keeps it loaded.
  std::string origin;
  std::shared_ptr<void> library;
};
#undef NN_NNAPI_ENTRY

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
