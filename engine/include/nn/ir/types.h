// Operand and operation types. Values are NNAPI's (NeuralNetworksTypes.h), so the NNAPI
// delegate passes them straight through and a .nnapi file stores them as-is.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace nn {

// X(name, nnapi_value)
#define NN_OPERAND_TYPES(X)              \
  X(FLOAT32, 0)                          \
  X(INT32, 1)                            \
  X(UINT32, 2)                           \
  X(TENSOR_FLOAT32, 3)                   \
  X(TENSOR_INT32, 4)                     \
  X(TENSOR_QUANT8_ASYMM, 5)              \
  X(BOOL, 6)                             \
  X(TENSOR_QUANT16_SYMM, 7)              \
  X(TENSOR_FLOAT16, 8)                   \
  X(TENSOR_BOOL8, 9)                     \
  X(FLOAT16, 10)                         \
  X(TENSOR_QUANT8_SYMM_PER_CHANNEL, 11)  \
  X(TENSOR_QUANT16_ASYMM, 12)            \
  X(TENSOR_QUANT8_SYMM, 13)              \
  X(TENSOR_QUANT8_ASYMM_SIGNED, 14)

enum class OperandType : int32_t {
#define NN_X(name, value) name = value,
  NN_OPERAND_TYPES(NN_X)
#undef NN_X
};

// X(name, nnapi_value). Extension operations (ops NNAPI lacks) use NNAPI's extension
// encoding: (prefix << 16) | code, with nnpipe's own prefix kNnpipeExtensionPrefix.
#define NN_OPERATION_TYPES(X)              \
  X(ADD, 0)                                \
  X(AVERAGE_POOL_2D, 1)                    \
  X(CONCATENATION, 2)                      \
  X(CONV_2D, 3)                            \
  X(DEPTHWISE_CONV_2D, 4)                  \
  X(DEPTH_TO_SPACE, 5)                     \
  X(DEQUANTIZE, 6)                         \
  X(FLOOR, 8)                              \
  X(FULLY_CONNECTED, 9)                    \
  X(L2_NORMALIZATION, 11)                  \
  X(LOCAL_RESPONSE_NORMALIZATION, 13)      \
  X(LOGISTIC, 14)                          \
  X(MAX_POOL_2D, 17)                       \
  X(MUL, 18)                               \
  X(RELU, 19)                              \
  X(RELU1, 20)                             \
  X(RELU6, 21)                             \
  X(RESHAPE, 22)                           \
  X(RESIZE_BILINEAR, 23)                   \
  X(SOFTMAX, 25)                           \
  X(SPACE_TO_DEPTH, 26)                    \
  X(TANH, 28)                              \
  X(DIV, 30)                               \
  X(MEAN, 31)                              \
  X(PAD, 32)                               \
  X(SQUEEZE, 34)                           \
  X(STRIDED_SLICE, 35)                     \
  X(SUB, 36)                               \
  X(TRANSPOSE, 37)                         \
  X(ABS, 38)                               \
  X(ARGMAX, 39)                            \
  X(ARGMIN, 40)                            \
  X(CAST, 45)                              \
  X(CHANNEL_SHUFFLE, 46)                   \
  X(EQUAL, 48)                             \
  X(EXP, 49)                               \
  X(EXPAND_DIMS, 50)                       \
  X(GATHER, 51)                            \
  X(GREATER, 53)                           \
  X(GREATER_EQUAL, 54)                     \
  X(GROUPED_CONV_2D, 55)                   \
  X(INSTANCE_NORMALIZATION, 57)            \
  X(LESS, 58)                              \
  X(LESS_EQUAL, 59)                        \
  X(LOG, 60)                               \
  X(LOGICAL_AND, 61)                       \
  X(LOGICAL_NOT, 62)                       \
  X(LOGICAL_OR, 63)                        \
  X(LOG_SOFTMAX, 64)                       \
  X(MAXIMUM, 65)                           \
  X(MINIMUM, 66)                           \
  X(NEG, 67)                               \
  X(NOT_EQUAL, 68)                         \
  X(PAD_V2, 69)                            \
  X(POW, 70)                               \
  X(PRELU, 71)                             \
  X(QUANTIZE, 72)                          \
  X(REDUCE_MAX, 77)                        \
  X(REDUCE_MIN, 78)                        \
  X(REDUCE_PROD, 79)                       \
  X(REDUCE_SUM, 80)                        \
  X(RSQRT, 83)                             \
  X(SELECT, 84)                            \
  X(SIN, 85)                               \
  X(SLICE, 86)                             \
  X(SPLIT, 87)                             \
  X(SQRT, 88)                              \
  X(TILE, 89)                              \
  X(TRANSPOSE_CONV_2D, 91)                 \
  X(RESIZE_NEAREST_NEIGHBOR, 94)           \
  X(ELU, 98)                               \
  X(HARD_SWISH, 99)                        \
  X(FILL, 100)                             \
  X(RANK, 101)                             \
  X(BATCH_MATMUL, 102)                     \
  X(PACK, 103)                             \
  X(MIRROR_PAD, 104)                       \
  X(REVERSE, 105)                          \
  /* nnpipe extensions: (kNnpipeExtensionPrefix << 16) | code */ \
  X(NNPIPE_GRU, 0x7E0001)                  \
  X(NNPIPE_ERF, 0x7E0002)                  \
  X(NNPIPE_CEIL, 0x7E0003)

inline constexpr int32_t kNnpipeExtensionPrefix = 0x7E;

enum class OperationType : int32_t {
#define NN_X(name, value) name = value,
  NN_OPERATION_TYPES(NN_X)
#undef NN_X
};

inline constexpr bool is_extension(OperationType t) { return (static_cast<int32_t>(t) >> 16) != 0; }

// NNAPI's fused activation codes (FuseCode).
enum class FuseCode : int32_t { NONE = 0, RELU = 1, RELU1 = 2, RELU6 = 3 };
// The output range a FuseCode clamps to: [0, inf), [-1, 1], [0, 6], or unbounded (NONE and
// any other code, which validation refuses before a kernel sees it).
struct ActivationRange {
  float lo, hi;
};
ActivationRange fuse_code_range(int32_t fuse_code);

// NNAPI's implicit padding schemes (PaddingCode).
enum class PaddingCode : int32_t { SAME = 1, VALID = 2 };

// How an operand lives (NNAPI's OperandLifeTime, plus the constant's storage).
enum class Lifetime : int32_t {
  TEMPORARY = 0,    // produced by one op, consumed by others
  MODEL_INPUT = 1,
  MODEL_OUTPUT = 2,
  CONSTANT = 3,     // data lives in the model (owned or mmapped)
  NO_VALUE = 5,     // an omitted optional input
};

std::string_view operand_type_name(OperandType t);      // "TENSOR_FLOAT32"; "?" if unknown
std::string_view operation_type_name(OperationType t);  // "CONV_2D"; "?" if unknown
std::optional<OperandType> operand_type_from_int(int32_t v);      // nullopt if not a known value
std::optional<OperationType> operation_type_from_int(int32_t v);  // nullopt if not a known value
std::optional<OperationType> operation_type_from_name(std::string_view name);

bool is_tensor_type(OperandType t);
// Bytes per element; 0 for non-tensor scalars of unknown size.
size_t element_size(OperandType t);

}  // namespace nn
