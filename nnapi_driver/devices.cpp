// The driver's devices and their configuration, and the counters tests read.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "delegates/nnapi/nnapi_feature_levels.h"
#include "driver_internal.h"
#include "nn/ops/registry.h"

namespace nnpipe_driver {

int feature_level() {
  static const int level = [] {
    int level = build_feature_level();
    if (const char* v = std::getenv("NNPIPE_NNAPI_FEATURE_LEVEL"); v && *v) {
      int wanted = std::atoi(v);
      if (wanted >= 27 && wanted < level) level = wanted;  // an environment can only lower it
    }
    return level;
  }();
  return level;
}

std::optional<nn::Requantization> driver_requantization() {
  const char* v = std::getenv("NNPIPE_NNAPI_REQUANTIZE");
  if (!v || !*v) return nn::Requantization::kNnapi;
  return nn::parse_requantization(v);
}

Counters& counters() {
  static Counters c;
  return c;
}

int fail(int code, const std::string& why) {
  static const bool log = [] {
    const char* v = std::getenv("NNPIPE_NNAPI_LOG");
    return v && *v && std::string(v) != "0";
  }();
  if (log) std::fprintf(stderr, "[nnpipe-nnapi] %s\n", why.c_str());
  return code;
}

namespace {

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(" \t\r\n"), b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// "key=value" items separated by ';' or newlines ('#' starts a comment).
void apply_accel_settings(DeviceConfig& c, const std::string& text, const std::string& where) {
  std::string item;
  std::string normalized = text;
  for (char& ch : normalized)
    if (ch == ';') ch = '\n';
  std::istringstream lines(normalized);
  while (std::getline(lines, item)) {
    item = trim(item.substr(0, item.find('#')));
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = trim(item.substr(0, eq)), value = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
    if (key == "ops") {
      c.all_ops = false;
      std::istringstream names(value);
      std::string name;
      while (std::getline(names, name, ',')) {
        name = trim(name);
        if (name.empty()) continue;
        auto type = nn::operation_type_from_name(name);
        if (type)
          c.ops.insert(static_cast<int32_t>(*type));
        else
          std::fprintf(stderr, "[nnpipe-nnapi] %s: unknown op '%s' in ops= (ignored)\n", where.c_str(),
                       name.c_str());
      }
    } else if (key == "slow_ms") {
      c.slow_ms = std::atoi(value.c_str());
    } else if (key == "fail_compile") {
      c.fail_compile = value == "1" || value == "true";
    } else if (key == "fail_run_every") {
      c.fail_run_every = std::atoi(value.c_str());
    } else if (key == "miss_deadline_every") {
      c.miss_deadline_every = std::atoi(value.c_str());
    } else if (key == "level") {
      c.level = std::atoi(value.c_str());
    } else if (key == "delegate") {
      c.engine_delegate = value;
    } else {
      std::fprintf(stderr, "[nnpipe-nnapi] %s: unknown setting '%s' (ignored)\n", where.c_str(), key.c_str());
    }
  }
}

// The accel device's settings: NNPIPE_NNAPI_ACCEL_CONFIG's file, then NNPIPE_NNAPI_ACCEL.
std::string accel_settings_source() {
  std::string text;
  if (const char* file = std::getenv("NNPIPE_NNAPI_ACCEL_CONFIG"); file && *file) {
    std::ifstream f(file);
    if (!f) std::fprintf(stderr, "[nnpipe-nnapi] NNPIPE_NNAPI_ACCEL_CONFIG=%s: cannot read it\n", file);
    std::stringstream contents;
    contents << f.rdbuf();
    text = contents.str() + "\n";
  }
  if (const char* inline_settings = std::getenv("NNPIPE_NNAPI_ACCEL"); inline_settings && *inline_settings)
    text += inline_settings;
  return text;
}

void configure_accel(ANeuralNetworksDevice& accel, const std::string& settings) {
  accel.config = DeviceConfig{};
  accel.config.name = "nnpipe-accel";
  accel.config.type = ANEURALNETWORKS_DEVICE_ACCELERATOR;
  accel.config.engine_delegate = "cpu";
  accel.config.level = feature_level();
  apply_accel_settings(accel.config, settings, "nnpipe-accel settings");
  accel.config.level = std::min(accel.config.level, feature_level());
  accel.runs = 0;
}

std::vector<ANeuralNetworksDevice*> make_devices() {
  std::vector<ANeuralNetworksDevice*> list;
  const char* accel_env = std::getenv("NNPIPE_NNAPI_ACCEL");
  if (!(accel_env && std::string(accel_env) == "off")) {
    auto* accel = new ANeuralNetworksDevice;
    configure_accel(*accel, accel_settings_source());
    list.push_back(accel);
  }
  auto* reference = new ANeuralNetworksDevice;
  reference->config.name = "nnpipe-reference";
  reference->config.type = ANEURALNETWORKS_DEVICE_CPU;
  reference->config.level = feature_level();
  list.push_back(reference);
  return list;
}

}  // namespace

const std::vector<ANeuralNetworksDevice*>& devices() {
  static const std::vector<ANeuralNetworksDevice*> list = make_devices();  // live for the process
  // The accel settings are read again when they change, so one process (a test) can
  // try several device behaviours; its presence is decided once.
  static std::mutex mu;
  static std::string applied = accel_settings_source();
  std::lock_guard<std::mutex> lock(mu);
  if (list.front()->config.name == "nnpipe-accel") {
    std::string now = accel_settings_source();
    if (now != applied) {
      configure_accel(*list.front(), now);
      applied = now;
    }
  }
  return list;
}

}  // namespace nnpipe_driver

using namespace nnpipe_driver;

extern "C" {

int ANeuralNetworks_getDeviceCount(uint32_t* numDevices) {
  if (!numDevices) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getDeviceCount: numDevices is null");
  *numDevices = static_cast<uint32_t>(devices().size());
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworks_getDevice(uint32_t devIndex, ANeuralNetworksDevice** device) {
  if (!device) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getDevice: device is null");
  if (devIndex >= devices().size()) return fail(ANEURALNETWORKS_BAD_DATA, "getDevice: index out of range");
  *device = devices()[devIndex];
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getName(const ANeuralNetworksDevice* device, const char** name) {
  if (!device || !name) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Device_getName: null argument");
  *name = device->config.name.c_str();
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getType(const ANeuralNetworksDevice* device, int32_t* type) {
  if (!device || !type) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Device_getType: null argument");
  *type = device->config.type;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getVersion(const ANeuralNetworksDevice* device, const char** version) {
  if (!device || !version) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Device_getVersion: null argument");
  *version = NN_DRIVER_VERSION;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getFeatureLevel(const ANeuralNetworksDevice* device, int64_t* featureLevel) {
  if (!device || !featureLevel)
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Device_getFeatureLevel: null argument");
  *featureLevel = device->config.level;
  return ANEURALNETWORKS_NO_ERROR;
}

int64_t ANeuralNetworks_getRuntimeFeatureLevel(void) { return feature_level(); }

void NnpipeDriver_getCounters(NnpipeDriverCounters* out) {
  if (!out) return;
  Counters& c = counters();
  out->live_models = c.live_models;
  out->live_compilations = c.live_compilations;
  out->live_executions = c.live_executions;
  out->live_bursts = c.live_bursts;
  out->live_events = c.live_events;
  out->executions_run = c.executions_run;
  out->cache_hits = c.cache_hits;
  out->cache_writes = c.cache_writes;
  out->missed_deadlines = c.missed_deadlines;
}

}  // extern "C"

extern "C" int ANeuralNetworksModel_getSupportedOperationsForDevices(const ANeuralNetworksModel* model,
                                                                     const ANeuralNetworksDevice* const* list,
                                                                     uint32_t numDevices, bool* supportedOps) {
  if (!model || !list || !supportedOps)
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getSupportedOperationsForDevices: null argument");
  if (!model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "getSupportedOperationsForDevices: model not finished");
  if (numDevices == 0) return fail(ANEURALNETWORKS_BAD_DATA, "getSupportedOperationsForDevices: no devices");
  for (uint32_t i = 0; i < numDevices; ++i)
    if (!list[i]) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "getSupportedOperationsForDevices: null device");
  for (size_t k = 0; k < model->ir.operations.size(); ++k) {
    supportedOps[k] = false;
    for (uint32_t i = 0; i < numDevices && !supportedOps[k]; ++i)
      supportedOps[k] = device_supports(*list[i], *model, k);
  }
  return ANEURALNETWORKS_NO_ERROR;
}
