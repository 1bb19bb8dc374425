// Loading the NNAPI C API with dlopen, as an app on a phone does: required entry points
// first, then each newer level's, and the feature level from what is there.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "delegates/nnapi/nnapi_api.h"

namespace nn::nnapi {

const char* result_code_name(int code) {
  switch (code) {
    case ANEURALNETWORKS_NO_ERROR: return "ANEURALNETWORKS_NO_ERROR";
    case ANEURALNETWORKS_OUT_OF_MEMORY: return "ANEURALNETWORKS_OUT_OF_MEMORY";
    case ANEURALNETWORKS_INCOMPLETE: return "ANEURALNETWORKS_INCOMPLETE";
    case ANEURALNETWORKS_UNEXPECTED_NULL: return "ANEURALNETWORKS_UNEXPECTED_NULL";
    case ANEURALNETWORKS_BAD_DATA: return "ANEURALNETWORKS_BAD_DATA";
    case ANEURALNETWORKS_OP_FAILED: return "ANEURALNETWORKS_OP_FAILED";
    case ANEURALNETWORKS_BAD_STATE: return "ANEURALNETWORKS_BAD_STATE";
    case ANEURALNETWORKS_UNMAPPABLE: return "ANEURALNETWORKS_UNMAPPABLE";
    case ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE: return "ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE";
    case ANEURALNETWORKS_UNAVAILABLE_DEVICE: return "ANEURALNETWORKS_UNAVAILABLE_DEVICE";
    case ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT: return "ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT";
    case ANEURALNETWORKS_MISSED_DEADLINE_PERSISTENT: return "ANEURALNETWORKS_MISSED_DEADLINE_PERSISTENT";
    case ANEURALNETWORKS_RESOURCE_EXHAUSTED_TRANSIENT: return "ANEURALNETWORKS_RESOURCE_EXHAUSTED_TRANSIENT";
    case ANEURALNETWORKS_RESOURCE_EXHAUSTED_PERSISTENT: return "ANEURALNETWORKS_RESOURCE_EXHAUSTED_PERSISTENT";
    case ANEURALNETWORKS_DEAD_OBJECT: return "ANEURALNETWORKS_DEAD_OBJECT";
  }
  return "ANEURALNETWORKS_?";
}

namespace {

std::mutex g_override_mu;
std::shared_ptr<const Api> g_override;

template <typename Fn>
bool load_symbol(void* lib, const char* name, Fn*& slot) {
  slot = reinterpret_cast<Fn*>(dlsym(lib, name));
  return slot != nullptr;
}

}  // namespace

void set_api_for_testing(std::shared_ptr<const Api> api) {
  std::lock_guard<std::mutex> lock(g_override_mu);
  g_override = std::move(api);
}

int detect_feature_level(const Api& a) {
  int level = 27;
  if (a.ANeuralNetworksModel_relaxComputationFloat32toFloat16) level = 28;
  if (level == 28 && a.ANeuralNetworks_getDeviceCount && a.ANeuralNetworks_getDevice &&
      a.ANeuralNetworksDevice_getName && a.ANeuralNetworksDevice_getFeatureLevel &&
      a.ANeuralNetworksModel_getSupportedOperationsForDevices && a.ANeuralNetworksCompilation_createForDevices &&
      a.ANeuralNetworksExecution_compute)
    level = 29;
  if (level == 29 && a.ANeuralNetworksCompilation_setPriority && a.ANeuralNetworksCompilation_setTimeout &&
      a.ANeuralNetworksExecution_setTimeout)
    level = 30;
  if (a.ANeuralNetworks_getRuntimeFeatureLevel) {
    // A runtime may claim a level while lacking an entry point of it: trust the smaller.
    const int64_t runtime = a.ANeuralNetworks_getRuntimeFeatureLevel();
    if (runtime > 0 && runtime < level) level = static_cast<int>(runtime);
  }
  return level;
}

std::shared_ptr<const Api> load_api(const std::string& library, std::string* why) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    *why = library + " not found" + (err && library.find('/') != std::string::npos ? std::string(" (") + err + ")" : "");
    return nullptr;
  }
  auto api = std::make_shared<Api>();
  api->origin = library;
  api->library = std::shared_ptr<void>(lib, [](void* l) { dlclose(l); });
  std::string missing;
#define NN_LOAD_REQUIRED(name) \
  if (!load_symbol(lib, #name, api->name)) missing += (missing.empty() ? "" : ", ") + std::string(#name)
  NN_LOAD_REQUIRED(ANeuralNetworksModel_create);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_free);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_finish);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_addOperand);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_setOperandValue);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_addOperation);
  NN_LOAD_REQUIRED(ANeuralNetworksModel_identifyInputsAndOutputs);
  NN_LOAD_REQUIRED(ANeuralNetworksCompilation_create);
  NN_LOAD_REQUIRED(ANeuralNetworksCompilation_free);
  NN_LOAD_REQUIRED(ANeuralNetworksCompilation_setPreference);
  NN_LOAD_REQUIRED(ANeuralNetworksCompilation_finish);
  NN_LOAD_REQUIRED(ANeuralNetworksExecution_create);
  NN_LOAD_REQUIRED(ANeuralNetworksExecution_free);
  NN_LOAD_REQUIRED(ANeuralNetworksExecution_setInput);
  NN_LOAD_REQUIRED(ANeuralNetworksExecution_setOutput);
  NN_LOAD_REQUIRED(ANeuralNetworksExecution_startCompute);
  NN_LOAD_REQUIRED(ANeuralNetworksEvent_wait);
  NN_LOAD_REQUIRED(ANeuralNetworksEvent_free);
#undef NN_LOAD_REQUIRED
  if (!missing.empty()) {
    *why = library + " lacks required entry points: " + missing;
    return nullptr;
  }
#define NN_LOAD_OPTIONAL(name) load_symbol(lib, #name, api->name)
  NN_LOAD_OPTIONAL(ANeuralNetworksModel_setOperandSymmPerChannelQuantParams);
  NN_LOAD_OPTIONAL(ANeuralNetworksModel_relaxComputationFloat32toFloat16);
  NN_LOAD_OPTIONAL(ANeuralNetworksExecution_compute);
  NN_LOAD_OPTIONAL(ANeuralNetworks_getDeviceCount);
  NN_LOAD_OPTIONAL(ANeuralNetworks_getDevice);
  NN_LOAD_OPTIONAL(ANeuralNetworksDevice_getName);
  NN_LOAD_OPTIONAL(ANeuralNetworksDevice_getType);
  NN_LOAD_OPTIONAL(ANeuralNetworksDevice_getFeatureLevel);
  NN_LOAD_OPTIONAL(ANeuralNetworksModel_getSupportedOperationsForDevices);
  NN_LOAD_OPTIONAL(ANeuralNetworksCompilation_createForDevices);
  NN_LOAD_OPTIONAL(ANeuralNetworksCompilation_setCaching);
  NN_LOAD_OPTIONAL(ANeuralNetworksBurst_create);
  NN_LOAD_OPTIONAL(ANeuralNetworksBurst_free);
  NN_LOAD_OPTIONAL(ANeuralNetworksExecution_burstCompute);
  NN_LOAD_OPTIONAL(ANeuralNetworksCompilation_setPriority);
  NN_LOAD_OPTIONAL(ANeuralNetworksCompilation_setTimeout);
  NN_LOAD_OPTIONAL(ANeuralNetworksExecution_setTimeout);
  NN_LOAD_OPTIONAL(ANeuralNetworks_getRuntimeFeatureLevel);
#undef NN_LOAD_OPTIONAL
  api->feature_level = detect_feature_level(*api);
  return api;
}

std::shared_ptr<const Api> load_system_api(std::string* why) {
  const char* path = std::getenv("NN_NNAPI_LIBRARY");
  return load_api(path && *path ? path : "libneuralnetworks.so", why);
}

std::shared_ptr<const Api> current_api(std::string* why) {
  {
    std::lock_guard<std::mutex> lock(g_override_mu);
    if (g_override) return g_override;
  }
  static std::mutex mu;
  static std::shared_ptr<const Api> system;
  static std::string system_why;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried) {
    system = load_system_api(&system_why);
    tried = true;
  }
  *why = system_why;
  return system;
}

}  // namespace nn::nnapi
