#include "nn/status.h"

namespace nn {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kInvalidModel: return "invalid model";
    case StatusCode::kUnsupportedOp: return "unsupported op";
    case StatusCode::kDelegateUnavailable: return "delegate unavailable";
    case StatusCode::kDelegateIncompatible: return "delegate incompatible";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown status";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace nn
