// A zero PAD of the spatial axes whose every reader is a float convolution is that
// convolution's own padding: Keras models (ZeroPadding2D before a stride-2 conv) and the
// TFLite files converted from them carry it as a separate op, which every delegate would
// otherwise run as a full copy of the tensor.
#pragma once

#include <cstddef>

#include "nn/ir/model.h"

namespace nn {

// Folds each such PAD into its readers (CONV_2D and DEPTHWISE_CONV_2D, NHWC, float32),
// rewriting them to explicit padding, and removes the PAD. The model must have its shapes
// inferred; it stays valid. Returns how many PAD ops were folded.
size_t fold_pad_into_conv(Model& model);

}  // namespace nn
