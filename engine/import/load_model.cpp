// nn::load_model: one entry point for every model file the engine reads, by extension.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"

#ifndef NN_VERSION
#define NN_VERSION "unknown"
#endif

namespace nn {

namespace {

std::string lowercase_extension(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

}  // namespace

const char* converter_version() {
  return "nnpipe " NN_VERSION;
}

Result<std::shared_ptr<Model>> load_model(const std::string& path) {
  const std::string ext = lowercase_extension(path);
  if (ext != ".nnapi" && ext != ".tflite" && ext != ".onnx" && ext != ".pt")
    return Status(StatusCode::kInvalidArgument,
                  path + ": unknown model extension '" + ext + "' (expected .nnapi, .tflite, .onnx or .pt)");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return Status(StatusCode::kIoError, path + ": cannot open model: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status(StatusCode::kIoError, path + ": not a regular file");
  if (ext == ".nnapi") return load_nnapi_file(path);
  if (ext == ".tflite") return import_tflite_file(path);
  if (ext == ".pt") return import_pytorch_nnapi_file(path);
  return import_onnx_file(path);
}

}  // namespace nn
