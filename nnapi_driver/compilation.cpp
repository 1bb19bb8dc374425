// ANeuralNetworksCompilation_*: picks the device (the first of the allowed ones that
// takes every op), opens an engine Session on that device's delegate, and keeps a
// compilation cache entry keyed by the app's token.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "driver_internal.h"

using namespace nnpipe_driver;

namespace {

bool takes_whole_model(const ANeuralNetworksDevice& device, const ANeuralNetworksModel& model) {
  for (size_t k = 0; k < model.ir.operations.size(); ++k)
    if (!device_supports(device, model, k)) return false;
  return true;
}

int new_compilation(ANeuralNetworksModel* model, std::vector<ANeuralNetworksDevice*> list, bool explicit_devices,
                    ANeuralNetworksCompilation** out) {
  auto* c = new ANeuralNetworksCompilation;
  c->model = model;
  c->devices = std::move(list);
  c->explicit_devices = explicit_devices;
  *out = c;
  ++counters().live_compilations;
  return ANEURALNETWORKS_NO_ERROR;
}

// The cache entry stands for the compiled artifact a real driver would keep: the token,
// the device and the model's size identify it; a hit skips nothing here but is counted.
void use_cache(ANeuralNetworksCompilation* c) {
  if (c->cache_dir.empty() || c->cache_token.empty()) return;
  std::string hex;
  for (uint8_t b : c->cache_token) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  const std::filesystem::path path = std::filesystem::path(c->cache_dir) / ("nnpipe-" + hex + ".cache");
  const std::string entry = c->chosen->config.name + " " + std::to_string(c->model->ir.operations.size()) + " ops " +
                            std::to_string(c->model->ir.operands.size()) + " operands\n";
  {
    std::ifstream in(path);
    std::string line;
    if (in && std::getline(in, line) && line + "\n" == entry) {
      ++counters().cache_hits;
      return;
    }
  }
  std::ofstream out(path, std::ios::trunc);
  out << entry;
  if (out) ++counters().cache_writes;
}

}  // namespace

extern "C" {

int ANeuralNetworksCompilation_create(ANeuralNetworksModel* model, ANeuralNetworksCompilation** compilation) {
  if (!model || !compilation) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_create: null argument");
  if (!model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_create: model not finished");
  return new_compilation(model, devices(), false, compilation);
}

int ANeuralNetworksCompilation_createForDevices(ANeuralNetworksModel* model,
                                                const ANeuralNetworksDevice* const* list, uint32_t numDevices,
                                                ANeuralNetworksCompilation** compilation) {
  if (!model || !list || !compilation)
    return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_createForDevices: null argument");
  if (!model->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_createForDevices: model not finished");
  if (numDevices == 0) return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_createForDevices: no devices");
  std::vector<ANeuralNetworksDevice*> chosen;
  for (uint32_t i = 0; i < numDevices; ++i) {
    auto* d = const_cast<ANeuralNetworksDevice*>(list[i]);
    if (!d) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_createForDevices: null device");
    for (auto* known : chosen)
      if (known == d) return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_createForDevices: a device listed twice");
    chosen.push_back(d);
  }
  return new_compilation(model, std::move(chosen), true, compilation);
}

void ANeuralNetworksCompilation_free(ANeuralNetworksCompilation* compilation) {
  if (!compilation) return;
  delete compilation;
  --counters().live_compilations;
}

int ANeuralNetworksCompilation_setPreference(ANeuralNetworksCompilation* c, int32_t preference) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_setPreference: null");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_setPreference: already finished");
  if (preference < ANEURALNETWORKS_PREFER_LOW_POWER || preference > ANEURALNETWORKS_PREFER_SUSTAINED_SPEED)
    return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_setPreference: " + std::to_string(preference));
  c->preference = preference;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_setCaching(ANeuralNetworksCompilation* c, const char* cacheDir, const uint8_t* token) {
  if (!c || !cacheDir || !token) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_setCaching: null");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_setCaching: already finished");
  c->cache_dir = cacheDir;
  c->cache_token.assign(token, token + ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN);
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_setPriority(ANeuralNetworksCompilation* c, int priority) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_setPriority: null");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_setPriority: already finished");
  if (priority != ANEURALNETWORKS_PRIORITY_LOW && priority != ANEURALNETWORKS_PRIORITY_MEDIUM &&
      priority != ANEURALNETWORKS_PRIORITY_HIGH)
    return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_setPriority: " + std::to_string(priority));
  c->priority = priority;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_setTimeout(ANeuralNetworksCompilation* c, uint64_t duration) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_setTimeout: null");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_setTimeout: already finished");
  if (!c->explicit_devices || c->devices.size() != 1)
    return fail(ANEURALNETWORKS_BAD_DATA, "Compilation_setTimeout: needs createForDevices with one device");
  c->timeout_ns = duration;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_finish(ANeuralNetworksCompilation* c) {
  if (!c) return fail(ANEURALNETWORKS_UNEXPECTED_NULL, "Compilation_finish: null");
  if (c->finished) return fail(ANEURALNETWORKS_BAD_STATE, "Compilation_finish: already finished");
  c->finished = true;  // even when it fails: a compilation is finished once
  for (ANeuralNetworksDevice* d : c->devices)
    if (takes_whole_model(*d, *c->model)) {
      c->chosen = d;
      break;
    }
  if (!c->chosen) {
    std::string why;
    for (ANeuralNetworksDevice* d : c->devices)
      for (size_t k = 0; k < c->model->ir.operations.size(); ++k)
        if (std::string r = device_refuses(*d, *c->model, k); !r.empty()) {
          why += "; " + d->config.name + ": op " + std::to_string(k) + ": " + r;
          break;
        }
    return fail(c->explicit_devices ? ANEURALNETWORKS_BAD_DATA : ANEURALNETWORKS_OP_FAILED,
                "Compilation_finish: no allowed device takes every operation" + why);
  }
  if (c->chosen->config.fail_compile)
    return fail(ANEURALNETWORKS_OP_FAILED, "Compilation_finish: " + c->chosen->config.name + " is set to fail compiling");
  const std::optional<nn::Requantization> requantization = driver_requantization();
  if (!requantization) {
    // Said out loud, not only under NNPIPE_NNAPI_LOG: a client sees just OP_FAILED.
    std::fprintf(stderr, "[nnpipe-nnapi] NNPIPE_NNAPI_REQUANTIZE=%s: expected nnapi or fp32\n",
                 std::getenv("NNPIPE_NNAPI_REQUANTIZE"));
    return fail(ANEURALNETWORKS_OP_FAILED, "Compilation_finish: bad NNPIPE_NNAPI_REQUANTIZE");
  }
  nn::SessionOptions options;
  options.requantization = *requantization;
  options.delegates = {c->chosen->config.engine_delegate};
  options.threads = 1;
  options.log = [](const std::string&) {};
  auto session = nn::Session::open(c->model->validated, options);
  if (!session.is_ok()) return fail(ANEURALNETWORKS_OP_FAILED, "Compilation_finish: " + session.status().to_string());
  c->session = std::move(session).value();
  use_cache(c);
  return ANEURALNETWORKS_NO_ERROR;
}

}  // extern "C"
