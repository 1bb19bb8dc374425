// Which NNAPI feature level (Android API level) introduced an operation, an operand type
// and an operation's longer signatures, from the NNAPI specification (NeuralNetworks.h:
// "Available since API level N"). The delegate uses it to never send a driver an op above
// the device's level; the reference driver (nnapi_driver/) to refuse one with BAD_DATA.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace nn::nnapi {

// 27 (Android 8.1), 28 (9), 29 (10), 30 (11), 31 (12); Android 14's additions
// (BATCH_MATMUL, PACK, MIRROR_PAD, REVERSE) report 34. 0: not an NNAPI operation code.
int operation_feature_level(int32_t operation_type);
// 27, 29 or 30; 0: not an NNAPI operand type code.
int operand_type_feature_level(int32_t operand_type);
// The level an operation with these input operand types needs: the op's own level, each
// operand type's, and the longer operand lists later levels added (SOFTMAX's axis at 29,
// RESIZE_BILINEAR's align_corners at 30, ...). 0 when the op code is not NNAPI's.
int signature_feature_level(int32_t operation_type, std::span<const int32_t> input_types);
// "needs feature level 29 (SOFTMAX with an axis input)" style reason, or "".
std::string signature_level_reason(int32_t operation_type, std::span<const int32_t> input_types,
                                   int available_level);

}  // namespace nn::nnapi
